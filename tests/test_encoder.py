import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import checkpoints
from bert_tf.models.chunked import ROW_CLASS_BOUNDS, map_in_chunks, row_class
from bert_tf.models.encoder import BertEncoder
from bert_tf.models.served import ServedEncoder, ServedModel
from bert_tf.models.split_matmuls import SplitMatmuls
from conftest import (TINY, assert_close_at_real_tokens,
                      cpu_has_avx512, int8_weight_limit, random_inputs)


def test_outputs_and_names(tiny_config):
    encoder = BertEncoder(**tiny_config)
    assert sorted(t.name for t in encoder.inputs) == [
        "input_mask", "input_type_ids", "input_word_ids"]
    assert all(t.dtype == "int32" for t in encoder.inputs)
    out = encoder(random_inputs())
    assert out["sequence_output"].shape == (3, 12, 32)
    assert out["pooled_output"].shape == (3, 32)
    assert len(out["encoder_outputs"]) == 2
    np.testing.assert_array_equal(out["encoder_outputs"][-1],
                                  out["sequence_output"])
    # Pooled = tanh(dense([CLS])).
    expected = np.tanh(out["sequence_output"].numpy()[:, 0] @
                       encoder.pooler.kernel.numpy() +
                       encoder.pooler.bias.numpy())
    np.testing.assert_allclose(out["pooled_output"], expected, atol=1e-5)


@pytest.mark.slow
def test_built_parameter_counts_match_the_paper():
    assert BertEncoder.from_preset("bert_base").count_params() == 109_482_240


def test_padding_does_not_change_real_positions(tiny_config):
    encoder = BertEncoder(**tiny_config)
    inputs = random_inputs(pad_from=7)
    out = encoder(inputs)["sequence_output"].numpy()
    garbage = {k: v.copy() for k, v in inputs.items()}
    garbage["input_word_ids"][-1, 7:] = 99
    out2 = encoder(garbage)["sequence_output"].numpy()
    np.testing.assert_allclose(out[-1, :7], out2[-1, :7], atol=1e-5)
    # And a padded row equals the same row run alone without padding.
    alone = {k: v[-1:, :7] for k, v in inputs.items()}
    np.testing.assert_allclose(
        encoder(alone)["sequence_output"].numpy()[0], out[-1, :7], atol=1e-5)


def test_extra_features_are_ignored(tiny_config):
    encoder = BertEncoder(**tiny_config)
    inputs = random_inputs()
    with_labels = dict(inputs, masked_lm_ids=inputs["input_word_ids"])
    np.testing.assert_array_equal(encoder(inputs)["pooled_output"],
                                  encoder(with_labels)["pooled_output"])


def test_keras_file_round_trip(tiny_config, tmp_path):
    encoder = BertEncoder(**tiny_config, attention="causal",
                          hidden_act="gelu_exact")
    path = tmp_path / "encoder.keras"
    encoder.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded, BertEncoder)
    assert loaded.get_config() == encoder.get_config()
    inputs = random_inputs(pad_from=5)
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_array_equal(encoder(inputs)[key],
                                      loaded(inputs)[key])


def test_tf_checkpoint_round_trip(tiny_config, tmp_path):
    encoder = BertEncoder(**tiny_config)
    prefix = checkpoints.model_checkpoint(encoder).write(
        str(tmp_path / "ckpt"))
    other = BertEncoder(**tiny_config)
    checkpoints.restore_model(prefix, other)
    inputs = random_inputs()
    np.testing.assert_array_equal(encoder(inputs)["sequence_output"],
                                  other(inputs)["sequence_output"])
    keys = [k for k, _ in tf.train.list_variables(prefix)]
    assert any("encoder/transformer_layer_1/attention/qkv/" in k
               for k in keys)


def test_restore_into_wrong_config_names_the_variable(tiny_config, tmp_path):
    prefix = checkpoints.model_checkpoint(BertEncoder(**tiny_config)).write(
        str(tmp_path / "ckpt"))
    wider = BertEncoder(**dict(tiny_config, intermediate_size=96))
    with pytest.raises(ValueError, match=r"intermediate/kernel.*\(32, 64\).*"
                                         r"\(32, 96\)"):
        checkpoints.restore_model(prefix, wider)
    deeper = BertEncoder(**dict(tiny_config, num_layers=3))
    with pytest.raises(ValueError, match="transformer_layer_2"):
        checkpoints.restore_model(prefix, deeper)


def _train_steps(model, inputs, steps=3, jit_compile=False):
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss=None,
                  jit_compile=jit_compile)
    history = model.fit(tf.data.Dataset.from_tensors(inputs).repeat(steps),
                        verbose=0)
    return history.history["loss"]


def test_mixed_bfloat16_close_to_float32(tiny_config):
    inputs = random_inputs(pad_from=6)
    reference = BertEncoder(**tiny_config)
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        mixed = BertEncoder(**tiny_config)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    mixed.set_weights(reference.get_weights())
    assert mixed.embeddings.word_embeddings.embeddings.dtype == "float32"
    out = mixed(inputs)
    # Layer norms (and so the outputs they make) stay float32.
    assert out["sequence_output"].dtype == tf.float32
    delta = np.abs(out["sequence_output"].numpy() -
                   reference(inputs)["sequence_output"].numpy())
    # bfloat16 keeps 8 bits of mantissa; activations are O(1) after LN.
    assert delta.max() < 0.1, delta.max()
    assert delta.mean() < 0.02, delta.mean()


def test_jit_compiled_encoder_matches_eager(tiny_config):
    encoder = BertEncoder(**tiny_config)
    inputs = random_inputs(pad_from=4)
    compiled = tf.function(lambda x: encoder(x)["sequence_output"],
                           jit_compile=True)
    np.testing.assert_allclose(compiled(inputs),
                               encoder(inputs)["sequence_output"], atol=1e-5)


def test_too_long_input_is_a_clear_error(tiny_config):
    encoder = BertEncoder(**tiny_config)
    with pytest.raises(ValueError, match=r"input_word_ids has 65 positions "
                                         r"but this model has "
                                         r"max_position_embeddings = 64"):
        encoder(random_inputs(length=65))


@pytest.mark.parametrize("rows, expected", [(6, 0), (7, 1), (80, 1),
                                            (81, 2)])
def test_row_class_bounds_are_inclusive_below(rows, expected):
    """The copy a traced fp32 encoder runs is the row class of its token
    rows: [0, 7), [7, 81), [81, ...) (`ROW_CLASS_BOUNDS`)."""
    assert ROW_CLASS_BOUNDS == (7, 81)
    assert int(row_class(tf.constant(rows))) == expected


@pytest.mark.parametrize("batch, length, real, expected", [
    (1, 6, 6, 0), (1, 7, 7, 1), (2, 40, 40, 1), (3, 27, 27, 2),
    (9, 9, 9, 2), (3, 27, 20, 1), (4, 60, 1, 0)])
def test_traced_encoder_runs_the_copy_of_its_token_rows_class(
        tiny_config, batch, length, real, expected):
    """The copy a served fp32 encoder runs (the index `map_in_chunks`'s
    row-class branch computes) is the class of the token rows its matmuls
    take, the real ones (`real` of each row's `length`): 6 / 7 / 80 / 81
    rows run copies 0 / 1 / 1 / 2, whatever the padding around them."""
    served = ServedModel(BertEncoder(**tiny_config), ROW_CLASS_BOUNDS)
    names = ("input_word_ids", "input_mask", "input_type_ids")
    wrapped = tf.compat.v1.wrap_function(
        lambda x: map_in_chunks(served, x, ["sequence_output"],
                                row_classes=served.row_classes),
        [{k: tf.TensorSpec([None, None], tf.int32, name=k) for k in names}])
    [case] = [op for op in wrapped.graph.get_operations()
              if op.type in ("Case", "StatelessCase")]
    branch = wrapped.prune(
        feeds=[wrapped.graph.get_tensor_by_name(f"{k}:0") for k in names],
        fetches=case.inputs[0])
    ids = tf.fill((batch, length), 5)
    mask = tf.cast(tf.range(length) < real, tf.int32) + tf.zeros_like(ids)
    assert int(branch(ids, mask, tf.zeros_like(ids))) == expected


def _nodes(function, inputs):
    """The NodeDefs `function` traces for `inputs`, those of the functions
    it calls (the served encoder's) included."""
    graph = function.get_concrete_function(inputs).graph.as_graph_def()
    return [*graph.node, *(n for f in graph.library.function
                           for n in f.node_def)]


def _random_vectors(encoder, seed):
    rng = np.random.default_rng(seed)
    for weight in encoder.weights:
        if len(weight.shape) == 1:  # nonzero biases, gammas and betas
            weight.assign(rng.normal(size=weight.shape).astype("float32"))


def test_served_encoder_reads_vectors_as_constants_and_matrices_as_variables(
        tiny_config):
    """The served graph reads no bias, gamma or beta as a variable (each
    is a constant named by its path), every matrix as one, and gives the
    encoder's numbers."""
    encoder = BertEncoder(**tiny_config)
    _random_vectors(encoder, 2)
    inputs = random_inputs(batch=3, length=9, pad_from=4)
    before = encoder(inputs)
    served = tf.function(ServedEncoder(encoder))
    captured = set()  # the variables the served encoder's function reads
    for call in served.get_concrete_function(inputs).graph.captures:
        captured |= {v.path for v in encoder.variables
                     if v.value.handle is call[0]}
    vectors = {v.path for v in encoder.variables if len(v.shape) == 1}
    matrices = {v.path for v in encoder.variables if len(v.shape) == 2}
    assert not captured & vectors, captured & vectors
    assert matrices <= captured, matrices - captured
    constants = {n.name for n in _nodes(served, inputs) if n.op == "Const"}
    assert {v for v in vectors if "qkv" in v} <= constants
    after = served(inputs)
    np.testing.assert_allclose(after["pooled_output"],
                               before["pooled_output"], atol=1e-5)
    assert_close_at_real_tokens(after["sequence_output"],
                                before["sequence_output"],
                                inputs["input_mask"])


@pytest.mark.parametrize("zeros", ["one channel", "every channel"])
def test_served_form_keeps_betas_with_zeros(tiny_config, zeros):
    """A beta with a zero channel is still a beta: the served outputs
    equal eager ones when a norm's beta is zero in one channel, and when
    it is zero throughout (nothing to fold)."""
    encoder = BertEncoder(**tiny_config)
    rng = np.random.default_rng(1)
    betas = 0
    for weight in encoder.weights:
        if len(weight.shape) == 1:
            value = rng.normal(size=weight.shape).astype("float32")
            if weight.path.endswith("beta"):
                betas += 1
                value[:1 if zeros == "one channel" else None] = 0.0
            weight.assign(value)
    assert betas >= 2 * tiny_config["num_layers"]
    inputs = random_inputs(batch=3, length=9, pad_from=4)
    before = encoder(inputs)
    after = tf.function(ServedEncoder(encoder))(inputs)
    for a, b in zip(after["encoder_outputs"], before["encoder_outputs"]):
        assert_close_at_real_tokens(a, b, inputs["input_mask"])
    assert_close_at_real_tokens(after["sequence_output"],
                                before["sequence_output"],
                                inputs["input_mask"])


def test_served_form_folds_norm_betas_into_the_biases_they_feed(tiny_config):
    """Served, each norm (the embeddings' too) leaves beta out and the
    dense layers after it add it in their biases: the same outputs (every
    layer's, the embeddings' included), one add fewer a norm; the pooler
    is left out of a served task model that does not read it."""
    from bert_tf.tasks.classification.model import BertClassifier

    encoder = BertEncoder(**tiny_config)
    _random_vectors(encoder, 0)
    inputs = random_inputs(batch=3, length=9, pad_from=4)
    before = encoder(inputs)
    served = tf.function(ServedEncoder(encoder))
    folded = [n.name for n in _nodes(served, inputs)
              if n.name.endswith("_folded")]
    # qkv and the attention output (after the embeddings' norm or the
    # block before), the feed-forward in and out, of every block.
    assert len(folded) == 4 * tiny_config["num_layers"], folded
    after = served(inputs)
    assert_close_at_real_tokens(after["embedding_output"],
                                before["embedding_output"],
                                inputs["input_mask"])
    np.testing.assert_allclose(after["pooled_output"],
                               before["pooled_output"], atol=1e-5)
    assert_close_at_real_tokens(after["sequence_output"],
                                before["sequence_output"],
                                inputs["input_mask"])
    for a, b in zip(after["encoder_outputs"], before["encoder_outputs"]):
        assert_close_at_real_tokens(a, b, inputs["input_mask"])

    classifier = BertClassifier(encoder, num_classes=2, pooling="mean")
    traced = tf.function(ServedModel(classifier))
    handles = [n.name for n in _nodes(traced, inputs)
               if n.op in ("Placeholder", "ReadVariableOp")]
    assert [n for n in handles if "qkv" in n], handles
    assert not [n for n in handles if "pooler" in n], handles
    np.testing.assert_allclose(traced(inputs), classifier(inputs), atol=1e-5)


def test_served_model_passes_attributes_through_without_recursing(
        tiny_config):
    import copy
    from bert_tf.tasks.classification.model import BertClassifier
    classifier = BertClassifier(BertEncoder(**tiny_config), num_classes=3)
    served = ServedModel(classifier)
    assert served.num_classes == 3
    bare = ServedModel.__new__(ServedModel)  # what copy and pickle make
    with pytest.raises(AttributeError):
        bare.model
    assert copy.copy(served).model is classifier


def test_served_encoder_multiplies_only_the_kept_token_rows(tiny_config):
    encoder = BertEncoder(**tiny_config)
    inputs = random_inputs(batch=3, length=12, pad_from=4)
    inputs["input_mask"][1, :] = 0  # a row with no real token at all
    want = encoder(inputs)
    seen = []  # the rows each feed-forward layer multiplied
    block = encoder.transformer_layers[0]
    call = block.intermediate.call
    block.intermediate.call = lambda x: seen.append(x.shape[0]) or call(x)
    try:
        got = ServedEncoder(encoder)(inputs)
    finally:
        block.intermediate.call = call
    # 12 + 4 real tokens and the masked row's first: not 3 x 12.
    assert seen == [17]
    # A row with no real token attends to nothing real: only finite.
    assert np.isfinite(got["sequence_output"]).all()
    kept = inputs["input_mask"].astype(bool)
    for name in ("sequence_output", "embedding_output"):
        np.testing.assert_allclose(np.asarray(got[name])[kept],
                                   np.asarray(want[name])[kept], atol=1e-5)
    for a, b in zip(got["encoder_outputs"], want["encoder_outputs"]):
        np.testing.assert_allclose(np.asarray(a)[kept], np.asarray(b)[kept],
                                   atol=1e-5)
    np.testing.assert_allclose(np.asarray(got["pooled_output"])[[0, 2]],
                               np.asarray(want["pooled_output"])[[0, 2]],
                               atol=1e-5)


@pytest.mark.parametrize("pooling, row_classes, last_rows", [
    ("cls", (), 3), ("cls_relu", (), 3), ("cls", ROW_CLASS_BOUNDS, 28)])
def test_served_classifier_computes_the_last_layer_at_cls_only(
        tiny_config, pooling, row_classes, last_rows):
    """A head that reads `[CLS]` alone: the last block's feed-forward
    multiplies one row per sequence, its attention one query (not with
    fp32's row classes: every token row); the logits are the Keras
    model's."""
    from bert_tf.tasks.classification.model import BertClassifier

    encoder = BertEncoder(**tiny_config)
    _random_vectors(encoder, 1)
    classifier = BertClassifier(encoder, num_classes=3, pooling=pooling)
    assert classifier.reads_first_token_only
    inputs = random_inputs(batch=3, length=12, pad_from=4)
    want = classifier(inputs)
    seen = {}  # the rows each block's feed-forward multiplied
    blocks = encoder.transformer_layers
    calls = [block.intermediate.call for block in blocks]
    for index, block in enumerate(blocks):
        block.intermediate.call = (lambda i, call: lambda x: seen.setdefault(
            i, x.shape[0]) and call(x))(index, calls[index])
    try:
        got = ServedModel(classifier, row_classes)(inputs)
    finally:
        for block, call in zip(blocks, calls):
            block.intermediate.call = call
    assert seen == {0: 12 + 12 + 4, len(blocks) - 1: last_rows}
    np.testing.assert_allclose(got, want, atol=1e-5)
    # Its `encode` signature's encoder is whole.
    full = ServedModel(classifier).encoder(inputs)["sequence_output"]
    assert full.shape == (3, 12, tiny_config["hidden_size"])


def test_served_first_token_only_matches_in_every_served_precision(
        tiny_config):
    """int8 matmuls and multiple choice take the same last-layer cut."""
    from bert_tf.tasks.classification.model import BertClassifier
    from bert_tf.tasks.multiple_choice.model import BertMultipleChoice

    encoder = BertEncoder(**tiny_config)
    choice = BertMultipleChoice(encoder)
    assert choice.reads_first_token_only
    inputs = {k: np.stack([v, v[::-1]]) for k, v in random_inputs(
        batch=3, length=10, pad_from=5).items()}
    np.testing.assert_allclose(tf.function(ServedModel(choice))(inputs),
                               choice(inputs), atol=1e-5)
    classifier = BertClassifier(encoder, num_classes=2)
    inputs = random_inputs(batch=4, length=10, pad_from=3)
    encoder.to_int8(None)
    full = ServedEncoder(encoder)(inputs)["pooled_output"]
    np.testing.assert_allclose(
        tf.function(ServedModel(classifier))(inputs),
        classifier.head(full), atol=1e-5)


def test_served_matmuls_in_column_halves_match_in_every_served_precision(
        tiny_config):
    """Exports run each block matmul as two (`SplitMatmuls`): the
    query/key/value matmul on each head group's columns, whose attention
    runs apart and whose output the attention's output layer takes on its
    kernel's row halves; the intermediate layer on its column halves, which
    the feed-forward output layer takes likewise on its row halves. No
    concatenation is left between them; float kernels become variables the
    export holds in their place, int8 layers split their own constants;
    the outputs are the unsplit ones."""
    from bert_tf.tasks.classification.model import BertClassifier

    encoder = BertEncoder(**tiny_config)
    classifier = BertClassifier(encoder, num_classes=2)
    inputs = random_inputs(batch=3, length=10, pad_from=4)
    split = ServedModel(classifier, matmul_parts=2)
    assert len(split.matmuls.kernels) == 4 * tiny_config["num_layers"]
    names = [v.name for v in split.variables]
    for v in classifier.variables:
        if id(v) in split.matmuls.kernels:
            part = "rows" if v.path.endswith("/output_dense/kernel") \
                else "heads" if v.path.endswith("/qkv/kernel") else "part"
            assert f"{v.path}_{part}0:0" in names and f"{v.path}:0" not in \
                names, v.path
    assert len(split.matmuls.row_split) == 2 * tiny_config["num_layers"]
    # Of activations; shapes aside.
    concats = [sum(n.op == "ConcatV2" and n.attr["T"].type != tf.int32
                   for n in _nodes(tf.function(served), inputs))
               for served in (split, ServedModel(classifier))]
    assert concats == [0, 0], concats
    np.testing.assert_allclose(tf.function(split)(inputs),
                               tf.function(ServedModel(classifier))(inputs),
                               atol=1e-5)
    # The same int8 codes; the row halves' products add in float32.
    encoder.to_int8(None)
    np.testing.assert_allclose(
        tf.function(ServedModel(classifier, matmul_parts=2))(inputs),
        tf.function(ServedModel(classifier))(inputs), rtol=1e-5, atol=1e-7)


def test_split_blocks_compute_their_sums_and_norms_once_per_thread(
        tiny_config):
    """Where a split block's two threads meet (each residual add and the
    norm after it), each computes its own copy and feeds its own half of
    the next matmul (`bert_tf.layers.copies`), in every served precision:
    two norms where the unsplit graph has one, the second copies marked
    apart, and the outputs unchanged (the test above)."""
    from bert_tf.layers.copies import COPY_ATTRIBUTE
    from bert_tf.tasks.classification.model import BertClassifier

    encoder = BertEncoder(**tiny_config)
    classifier = BertClassifier(encoder, num_classes=2)
    inputs = random_inputs(batch=2, length=8, pad_from=5)
    layers = tiny_config["num_layers"]
    for precision in ("fp32", "int8"):
        if precision == "int8":
            encoder.to_int8(None)
        counts = []
        for parts in (1, 2):
            nodes = _nodes(tf.function(ServedModel(
                classifier, matmul_parts=parts)), inputs)
            counts.append((
                sum(n.op == "EuclideanNorm" for n in nodes),
                sum(COPY_ATTRIBUTE in n.attr for n in nodes)))
        # The embeddings' norm, and each block's two; the last block's
        # second copies feed nothing (Grappler prunes them).
        assert counts == [(1 + 2 * layers, 0),
                          (1 + 4 * layers, 2 * layers)], (precision, counts)


def test_the_old_path_of_split_matmuls_still_works_and_warns():
    """`SplitMatmuls` and `block_matmuls` moved from `bert_tf.models.served`
    to `bert_tf.models.split_matmuls`; the old names still work and warn
    with the new path."""
    from bert_tf.models import served, split_matmuls

    for name in ("SplitMatmuls", "block_matmuls"):
        with pytest.warns(DeprecationWarning,
                          match=f"bert_tf.models.split_matmuls.{name}"):
            assert getattr(served, name) is getattr(split_matmuls, name)


def test_head_groups_are_the_query_key_value_columns_of_their_heads():
    """`head_group_columns`: each group's query, key and value columns of
    its own heads, every column once."""
    from bert_tf.layers.transformer import MultiHeadSelfAttention

    attention = MultiHeadSelfAttention(8, 4)
    first, second = attention.head_group_columns(2)
    assert first.tolist() == [0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19]
    assert sorted(first.tolist() + second.tolist()) == list(range(24))
    with pytest.raises(ValueError, match="4 heads do not split in 3"):
        attention.head_group_columns(3)


def _softmax_dtypes(function, inputs):
    """The dtypes of the softmaxes `function`'s graph computes."""
    return {tf.as_dtype(n.attr["T"].type).name
            for n in _nodes(function, inputs) if n.op == "Softmax"}


def test_int8_attention_in_bf16_stays_near_fp32(tiny_config):
    """`to_int8(attention="bfloat16")`: query/key/value leave their int8
    kernel in bf16 and the served attention (softmax included) runs in
    bf16; the outputs stay near the float32 encoder's, and the residual
    adds happen inside the int8 kernels."""
    if not cpu_has_avx512():
        pytest.skip("oneDNN's int8 kernel with a bf16 output aborts the "
                    "process on CPUs without AVX-512 (exports made there "
                    "keep the attention in fp32)")
    keras.utils.set_random_seed(0)
    encoder = BertEncoder(**tiny_config)
    inputs = random_inputs(batch=3, length=10, pad_from=4)
    want = encoder(inputs)["sequence_output"].numpy()
    encoder.to_int8(lambda: encoder(inputs), attention="bfloat16",
                    weight_limit=int8_weight_limit())
    assert encoder.transformer_layers[0].attention.qkv.output_dtype == \
        tf.bfloat16
    served = tf.function(lambda x: ServedEncoder(encoder)(x)[
        "sequence_output"])
    assert _softmax_dtypes(served, inputs) == {"bfloat16"}
    got = served(inputs).numpy()
    # Keras's graph rounds a float32 softmax to bf16, the served one
    # computes it in bf16: probabilities may differ by a bf16 step.
    assert_close_at_real_tokens(got, encoder(inputs)["sequence_output"],
                                inputs["input_mask"], atol=1e-2)
    assert_close_at_real_tokens(got, want, inputs["input_mask"], atol=0.05)


def test_int8_blocks_take_their_norms_betas_folded(tiny_config):
    """An int8 encoder's matmuls after a norm quantize its output less its
    beta (`input_shift`), which its served form leaves out of every norm,
    split into column halves or not: no norm adds a beta, and the outputs
    are the int8 encoder's own, near fp32's."""
    keras.utils.set_random_seed(1)
    encoder = BertEncoder(**tiny_config)
    _random_vectors(encoder, 3)
    for weight in encoder.weights:  # betas of a trained BERT's size
        if weight.path.endswith("beta"):
            weight.assign(weight * 0.1)
    inputs = random_inputs(batch=3, length=10, pad_from=4)
    want = encoder(inputs)["sequence_output"].numpy()
    encoder.to_int8(lambda: encoder(inputs), weight_limit=int8_weight_limit())
    first = encoder.transformer_layers[0]
    np.testing.assert_array_equal(first.attention.qkv.input_shift,
                                  encoder.embeddings.layer_norm.beta)
    np.testing.assert_array_equal(first.intermediate.input_shift,
                                  first.attention_norm.beta)
    keras_int8 = encoder(inputs)["sequence_output"].numpy()
    assert_close_at_real_tokens(keras_int8, want, inputs["input_mask"],
                                atol=0.1)
    for parts in (1, 2):
        served = tf.function(lambda x: ServedEncoder(
            encoder, matmuls=SplitMatmuls(encoder, parts))(x))
        norm_adds = [n.name for n in _nodes(served, inputs)
                     if n.op == "AddV2" and "norm" in n.name]
        assert not norm_adds, norm_adds
        assert_close_at_real_tokens(served(inputs)["sequence_output"],
                                    keras_int8, inputs["input_mask"],
                                    atol=1e-3)


def test_served_bf16_softmax_in_bf16_float32_outside(tiny_config):
    """A served bf16 encoder takes its softmax in bf16 (oneDNN's accumulates
    in float32); training keeps float32 softmaxes."""
    encoder = BertEncoder(**tiny_config, dtype="bfloat16")
    inputs = random_inputs(batch=2, length=8, pad_from=5)
    served = tf.function(lambda x: ServedEncoder(encoder)(x)[
        "sequence_output"])
    assert _softmax_dtypes(served, inputs) == {"bfloat16"}
    assert _softmax_dtypes(tf.function(lambda x: encoder(x)[
        "sequence_output"]), inputs) == {"float32"}
    assert_close_at_real_tokens(
        served(inputs), encoder(inputs)["sequence_output"],
        inputs["input_mask"], atol=0.05)
