import keras
import numpy as np
import pytest

from bert_tf.layers.embeddings import BertEmbeddings
from bert_tf.layers.heads import (ClassificationHead, MaskedLMHead,
                                  NextSentenceHead)
from bert_tf.layers.token_rows import PackedRows, TokenRows
from bert_tf.layers.transformer import (MultiHeadSelfAttention,
                                        TransformerBlock)
from bert_tf.models.served import served_block
from conftest import cpu_has_avx512, int8_weight_limit


def _x(batch=2, length=6, width=16, seed=0):
    return np.random.default_rng(seed).normal(
        size=(batch, length, width)).astype("float32")


@pytest.mark.parametrize("layer", [
    BertEmbeddings(vocab_size=50, hidden_size=16, max_position_embeddings=32,
                   dropout=0.2, layer_norm_eps=1e-6),
    MultiHeadSelfAttention(hidden_size=16, num_heads=4, dropout=0.0,
                           causal=True),
    TransformerBlock(hidden_size=16, num_heads=2, intermediate_size=32,
                     hidden_act="gelu_exact"),
    MaskedLMHead(vocab_size=50, hidden_size=16, hidden_act="relu"),
    ClassificationHead(num_classes=3, dropout=0.3),
    NextSentenceHead(initializer_range=0.05),
])
def test_get_config_round_trip(layer):
    config = layer.get_config()
    clone = layer.__class__.from_config(config)
    assert clone.get_config() == config


def test_attention_ignores_masked_keys():
    layer = MultiHeadSelfAttention(hidden_size=16, num_heads=2, dropout=0.0)
    x = _x()
    mask = np.array([[1, 1, 1, 1, 0, 0]] * 2, "int32")
    changed = x.copy()
    changed[:, 4:] = 100.0  # garbage in the padded positions
    a = layer(x, mask).numpy()
    b = layer(changed, mask).numpy()
    np.testing.assert_allclose(a[:, :4], b[:, :4], atol=1e-6)


def test_causal_attention_does_not_look_ahead():
    layer = MultiHeadSelfAttention(hidden_size=16, num_heads=2, dropout=0.0,
                                   causal=True)
    x = _x()
    mask = np.ones((2, 6), "int32")
    changed = x.copy()
    changed[:, 3:] += 1.0
    a, b = layer(x, mask).numpy(), layer(changed, mask).numpy()
    np.testing.assert_allclose(a[:, :3], b[:, :3], atol=1e-6)
    assert np.abs(a[:, 3:] - b[:, 3:]).max() > 1e-3
    bidirectional = MultiHeadSelfAttention(hidden_size=16, num_heads=2,
                                           dropout=0.0)
    a, b = bidirectional(x, mask).numpy(), bidirectional(changed, mask).numpy()
    assert np.abs(a[:, :3] - b[:, :3]).max() > 1e-3


def test_embeddings_sum_of_three_tables():
    layer = BertEmbeddings(vocab_size=10, hidden_size=4,
                           max_position_embeddings=8, dropout=0.0)
    ids = np.array([[3, 4, 5]], "int32")
    types = np.array([[0, 0, 1]], "int32")
    out = layer(ids, types).numpy()
    raw = (layer.word_embeddings.embeddings.numpy()[ids[0]] +
           layer.type_embeddings.embeddings.numpy()[types[0]] +
           layer.position_embeddings.embeddings.numpy()[:3])
    expected = (raw - raw.mean(-1, keepdims=True)) / np.sqrt(
        raw.var(-1, keepdims=True) + 1e-12)
    np.testing.assert_allclose(out[0], expected, atol=1e-5)


def test_gelu_variants_differ_as_expected():
    from bert_tf.layers.transformer import activation
    x = np.linspace(-3, 3, 7).astype("float32")
    tanh, erf = activation("gelu")(x).numpy(), activation("gelu_exact")(x)
    assert 0 < np.abs(tanh - erf.numpy()).max() < 1e-3


def test_masked_lm_head_gathers_positions_and_ties_weights():
    table = keras.layers.Embedding(30, 8)
    table.build(None)
    head = MaskedLMHead(vocab_size=30, hidden_size=8, token_embedding=table)
    seq = _x(2, 5, 8)
    logits = head(seq, np.array([[0, 4], [2, 2]], "int32")).numpy()
    assert logits.shape == (2, 2, 30) and logits.dtype == np.float32
    np.testing.assert_allclose(logits[1, 0], logits[1, 1], atol=1e-6)
    # The output matrix is the embedding table: not a weight of the head.
    assert all(w is not table.embeddings for w in head.weights)
    kernel, bias = (w.numpy() for w in head.transform.weights)
    transformed = head.layer_norm(keras.activations.gelu(
        seq[:1, :1] @ kernel + bias, approximate=True)).numpy()
    expected = transformed[0, 0] @ table.embeddings.numpy().T
    np.testing.assert_allclose(logits[0, 0], expected, atol=1e-4)


def _reference_block(block, x, mask):
    """The post-LN block written with einsums on [batch, seq, H] (the
    formulation before token rows), from the block's own weights."""
    def dense(layer, v):
        kernel, bias = (w.numpy() for w in layer.weights)
        return v @ kernel + bias

    def norm(layer, v):
        gamma, beta = (w.numpy() for w in layer.weights)
        mean = v.mean(-1, keepdims=True)
        var = ((v - mean) ** 2).mean(-1, keepdims=True)
        return (v - mean) / np.sqrt(var + block.layer_norm_eps) * gamma + beta

    attention = block.attention
    b, n, h = x.shape
    a, d = attention.num_heads, attention.head_size
    qkv = dense(attention.qkv, x).reshape(b, n, 3, a, d)
    q, k, v = qkv[:, :, 0] / np.sqrt(d), qkv[:, :, 1], qkv[:, :, 2]
    logits = np.einsum("bqhd,bkhd->bhqk", q, k) + np.where(
        mask[:, None, None, :] > 0, 0.0, -1e9)
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    context = np.einsum("bhqk,bkhd->bqhd", probs, v).reshape(b, n, h)
    x = norm(block.attention_norm, x + dense(attention.output_dense, context))
    hidden = np.asarray(keras.activations.gelu(
        dense(block.intermediate, x), approximate=True))
    return norm(block.output_norm, x + dense(block.output_dense, hidden))


def test_block_matches_the_einsum_formulation():
    """Token rows and batched matmuls (what oneDNN fuses) compute what the
    einsum formulation computes, within 1e-5."""
    block = TransformerBlock(hidden_size=16, num_heads=4,
                             intermediate_size=64)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 7, 16)).astype("float32")
    mask = np.ones((3, 7), "int32")
    mask[1, 4:] = 0
    got = block(x, mask).numpy()
    np.testing.assert_allclose(got, _reference_block(block, x, mask),
                               atol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_served_block_fuses_matmul_bias_gelu(tmp_path, dtype):
    """Loaded as TF Serving loads a SavedModel (a TF1 session, Grappler on),
    the block's feed-forward runs as one oneDNN kernel: MatMul + BiasAdd +
    GELU (docs/benchmarks.md: the op names decide whether Grappler sees it);
    in float32 each residual add joins the matmul before it, the
    attention's packed rows (`PackedRows`) included.
    """
    import platform

    import tensorflow as tf

    from tensorflow.python.util import _pywrap_util_port

    if platform.machine() != "x86_64" or \
            not _pywrap_util_port.IsMklEnabled():
        pytest.skip("TensorFlow turns oneDNN and its fusions on only on x86 "
                    "CPUs with AVX-512 VNNI, AVX512_BF16 or AMX (or with "
                    "TF_ENABLE_ONEDNN_OPTS=1)")
    if dtype == "bfloat16" and not cpu_has_avx512():
        pytest.skip("TensorFlow fuses bf16 matmuls only on AVX-512 CPUs")
    block = TransformerBlock(hidden_size=32, num_heads=2,
                             intermediate_size=64, dtype=dtype)
    block.build((None, None, 32))
    # Three texts of 5, 3 and 2 tokens: the last two share a packed row.
    x, mask = _x(3, 5, 32), np.ones((3, 5), "int32")
    mask[1, 3:] = 0
    mask[2, 2:] = 0
    trained = tf.cast(block(x, mask), tf.float32).numpy()

    def serve(x, mask):  # on the kept rows, as the served encoder runs them
        token_rows = TokenRows(mask)
        packed = PackedRows(token_rows)
        rows = token_rows.compact(tf.reshape(x, [-1, 32]))
        out, _ = served_block(block, rows, None, packed, tf.shape(rows), {},
                              fold=False, token_rows=token_rows)
        return tf.reshape(tf.cast(token_rows.padded(out), tf.float32),
                          tf.shape(x))

    module = tf.Module()
    module.variables_ = [w.value for w in block.weights]
    module.serve = tf.function(
        serve,
        input_signature=[tf.TensorSpec([None, None, 32]),
                         tf.TensorSpec([None, None], tf.int32)])
    tf.saved_model.save(module, str(tmp_path), signatures=module.serve)
    graph = tf.Graph()
    with tf.compat.v1.Session(graph=graph) as session:
        meta = tf.compat.v1.saved_model.loader.load(session, ["serve"],
                                                    str(tmp_path))
        signature = meta.signature_def["serving_default"]
        feeds = {graph.get_tensor_by_name(signature.inputs[k].name): v
                 for k, v in (("x", x), ("mask", mask))}
        metadata = tf.compat.v1.RunMetadata()
        served, = session.run([graph.get_tensor_by_name(t.name)
                               for t in signature.outputs.values()], feeds,
                              options=tf.compat.v1.RunOptions(
                                  output_partition_graphs=True),
                              run_metadata=metadata)
    fused = ["+".join(f.decode() for f in node.attr["fused_ops"].list.s)
             for graph_def in metadata.partition_graphs
             for node in graph_def.node if "MatMul" in node.op]
    assert "BiasAdd+GeluApproximate" in fused, fused
    if dtype == "float32":  # both residual adds, in their matmuls
        assert fused.count("BiasAdd+Add") == 2, fused
    # The heads move by one gather each way, their transposes folded into
    # the gathers' indices (`bert_tf.layers.token_rows`); the block
    # computes what it trained to (the fused kernels round differently).
    ops = [node.op for graph_def in metadata.partition_graphs
           for node in graph_def.node]
    assert not {"Transpose", "_MklTranspose", "Bitcast"} & set(ops), ops
    real = mask.astype(bool)  # a padded position's output means nothing
    np.testing.assert_allclose(served[real], trained[real],
                               atol=1e-5 if dtype == "float32" else 5e-2)


def test_served_layer_norm_equals_the_trained_form():
    """The served form (EuclideanNorm, two ops less) equals Keras's layer
    norm to float32 rounding, a constant row included; a nearly constant
    row stays bounded; a larger epsilon keeps the trained form."""
    import tensorflow as tf

    from bert_tf.layers.norm import LayerNorm, served_layer_norm

    x = _x(4, 6, 48) * 3.0
    x[0, 0] = 0.25  # a constant row: beta out, not NaN
    for epsilon, served_ops in ((1e-12, "EuclideanNorm"), (1e-3, "Rsqrt")):
        norm = LayerNorm(epsilon=epsilon)
        norm.build((None, None, 48))
        rng = np.random.default_rng(1)
        norm.gamma.assign(rng.normal(size=48).astype("float32"))
        norm.beta.assign(rng.normal(size=48).astype("float32"))
        trained = norm(x).numpy()
        served = tf.function(lambda x: served_layer_norm(norm, x))
        graph = served.get_concrete_function(
            tf.TensorSpec([None, None, 48])).graph
        assert served_ops in {op.type for op in graph.get_operations()}
        np.testing.assert_allclose(served(x).numpy(), trained, atol=2e-6)
        np.testing.assert_allclose(trained[0, 0], norm.beta.numpy(),
                                   atol=1e-6)
        nearly = np.full((1, 48), 0.25, "float32")
        nearly[0, 0] += 1e-7
        bound = np.abs(norm.gamma.numpy()).max() * 48 ** 0.5 + \
            np.abs(norm.beta.numpy()).max()
        assert np.abs(served(nearly).numpy()).max() <= bound


def test_int8_dense_follows_its_float_layer():
    """Per-call ranges, and calibrated ranges with outlier channels
    smoothed into the weights: both near the float layer; the calibrated
    one nearer on inputs with an outlier channel, as in BERT."""
    from bert_tf.layers.int8 import Int8Dense, served_parameter_count

    # Seeded: the bounds below hold for most weights, not all.
    dense = keras.layers.Dense(64, activation="gelu", kernel_initializer=(
        keras.initializers.GlorotUniform(seed=0)))
    dense.build((None, 32))
    x = _x(batch=1, length=40, width=32)[0]
    x[:, 3] *= 30  # an outlier channel
    want = dense(x).numpy()
    scale = np.abs(want).max()
    limit = int8_weight_limit()  # 7-bit weights: twice the step
    dynamic = Int8Dense.from_dense(dense, weight_limit=limit)
    calibrated = Int8Dense.from_dense(dense, x.min(0), x.max(0),
                                      weight_limit=limit)
    dynamic_error = np.abs(dynamic(x).numpy() - want).max() / scale
    calibrated_error = np.abs(calibrated(x).numpy() - want).max() / scale
    # Its weights are constants: counted as served, as the float layer's.
    assert served_parameter_count(calibrated) == dense.count_params()
    step = 127 / limit  # the weights' step against 8-bit ones
    assert calibrated_error < 0.01 * step < dynamic_error < 0.05 * step
    again = Int8Dense.from_config(calibrated.get_config())
    np.testing.assert_allclose(again(x).numpy(), calibrated(x).numpy(),
                               atol=1e-6)
    for layer in (dynamic, calibrated):
        assert layer(np.zeros((0, 32), "float32")).shape == (0, 64)
        assert layer(x[None]).shape == (1, 40, 64)


def test_int8_dense_adds_its_residual_and_dequantizes_to_bf16_in_kernel():
    """A residual handed to an int8 layer is added inside its one kernel
    (no AddV2 in the graph); a bf16 output comes out of the kernel as is
    (no Cast), near the float32 output."""
    import tensorflow as tf

    from bert_tf.layers.int8 import Int8Dense

    dense = keras.layers.Dense(16, kernel_initializer=(
        keras.initializers.GlorotUniform(seed=0)))
    dense.build((None, 32))
    x = _x(batch=1, length=10, width=32)[0]
    residual = _x(batch=1, length=10, width=16)[0] * 5
    limit = int8_weight_limit()
    layer = Int8Dense.from_dense(dense, x.min(0), x.max(0),
                                 weight_limit=limit)
    plain = layer(x).numpy()
    function = tf.function(lambda x, r: layer(x, residual=r))
    np.testing.assert_allclose(function(x, residual).numpy(),
                               plain + residual, atol=1e-5)
    graph = function.get_concrete_function(x, residual).graph.as_graph_def()
    ops = {node.op for f in graph.library.function for node in f.node_def}
    assert "_QuantizedMatMul" in ops and "AddV2" not in ops
    if not cpu_has_avx512():  # its bf16 output aborts the process there
        return
    bf16 = Int8Dense.from_dense(dense, x.min(0), x.max(0),
                                output_dtype="bfloat16", weight_limit=limit)
    out = bf16(x)
    assert out.dtype == tf.bfloat16
    assert np.abs(tf.cast(out, tf.float32).numpy() - plain).max() <= \
        np.abs(plain).max() / 128
    assert Int8Dense.from_config(bf16.get_config())(x).dtype == tf.bfloat16
    with pytest.raises(ValueError, match="float32 or bfloat16"):
        Int8Dense.from_dense(dense, output_dtype="float16")


def test_int8_dense_takes_its_norms_beta_folded():
    """Converted with the beta of the norm before it (`input_shift`), an
    int8 layer quantizes its input less that beta, near the float layer;
    given the input already less it (`shifted`), or a residual less a
    vector (`residual_lacks`), it gives the same outputs."""
    from bert_tf.layers.int8 import Int8Dense

    dense = keras.layers.Dense(16, kernel_initializer=(
        keras.initializers.GlorotUniform(seed=0)))
    dense.build((None, 32))
    beta = np.linspace(-2.0, 3.0, 32).astype("float32")
    x = _x(batch=1, length=20, width=32)[0] + beta
    residual = _x(batch=1, length=20, width=16)[0]
    lacks = np.linspace(1.0, -1.0, 16).astype("float32")
    want = dense(x).numpy()
    layer = Int8Dense.from_dense(dense, x.min(0), x.max(0), input_shift=beta,
                                 weight_limit=int8_weight_limit())
    got = layer(x).numpy()
    assert np.abs(got - want).max() < 0.02 * np.abs(want).max()
    np.testing.assert_allclose(layer(x - beta, shifted=True), got, atol=1e-5)
    np.testing.assert_allclose(
        layer(x, residual=residual - lacks, residual_lacks=lacks),
        got + residual, atol=1e-5)
    again = Int8Dense.from_config(layer.get_config())
    np.testing.assert_allclose(again(x).numpy(), got, atol=1e-6)
    with pytest.raises(ValueError, match="residual_lacks takes a residual"):
        layer(x, residual_lacks=lacks)


def test_int8_dense_in_column_parts_gives_the_same_outputs():
    """A matmul run as one kernel per half of its output columns (served
    encoders: `SplitMatmuls`) gives the one kernel's outputs, calibrated or
    per-call range, with a residual or an activation; a width that does not
    split is refused in one line."""
    import tensorflow as tf

    from bert_tf.layers.int8 import Int8Dense

    x = _x(batch=1, length=12, width=32)[0]
    residual = _x(batch=1, length=12, width=16)[0]
    for activation in (None, "gelu"):
        dense = keras.layers.Dense(16, activation=activation,
                                   kernel_initializer=(
                                       keras.initializers.GlorotUniform(
                                           seed=1)))
        dense.build((None, 32))
        for layer in (Int8Dense.from_dense(dense),
                      Int8Dense.from_dense(dense, x.min(0), x.max(0))):
            split = tf.function(lambda x: layer(x, column_parts=2))
            np.testing.assert_array_equal(split(x).numpy(),
                                          layer(x).numpy())
            graph = split.get_concrete_function(x).graph.as_graph_def()
            kernels = [n for f in graph.library.function
                       for n in f.node_def if n.op == "_QuantizedMatMul"]
            assert len(kernels) == 2
            if activation is None:
                np.testing.assert_array_equal(
                    layer(x, residual=residual, column_parts=2).numpy(),
                    layer(x, residual=residual).numpy())
    with pytest.raises(ValueError, match="16 outputs do not split in 3"):
        layer(x, column_parts=3)


def test_int8_dense_on_input_slices_adds_their_products():
    """A matmul given its input as column slices (the feed-forward output
    layer of a served encoder takes the intermediate layer's halves so)
    runs one kernel per slice on its rows of the kernel and adds them:
    the one kernel's outputs to float32 rounding, calibrated or per-call
    range, with a residual; a layer with an activation, or slices that do
    not add up to its inputs, are refused in one line."""
    import tensorflow as tf

    from bert_tf.layers.int8 import Int8Dense

    x = _x(batch=1, length=12, width=32)[0]
    residual = _x(batch=1, length=12, width=16)[0]
    dense = keras.layers.Dense(16, kernel_initializer=(
        keras.initializers.GlorotUniform(seed=1)))
    dense.build((None, 32))
    halves = [x[:, :16], x[:, 16:]]
    for layer in (Int8Dense.from_dense(dense),
                  Int8Dense.from_dense(dense, x.min(0), x.max(0))):
        sliced = tf.function(lambda *parts: layer(list(parts)))
        np.testing.assert_allclose(sliced(*halves).numpy(),
                                   layer(x).numpy(), rtol=1e-5, atol=1e-6)
        graph = sliced.get_concrete_function(*halves).graph.as_graph_def()
        assert sum(n.op == "_QuantizedMatMul" for f in graph.library.function
                   for n in f.node_def) == 2
        np.testing.assert_allclose(
            layer(halves, residual=residual).numpy(),
            layer(x, residual=residual).numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="do not add up to its 32 inputs"):
        layer([x[:, :16], x[:, :8]])
    gelu = keras.layers.Dense(16, activation="gelu")
    gelu.build((None, 32))
    with pytest.raises(ValueError, match="without an activation"):
        Int8Dense.from_dense(gelu)(halves)
    outs = Int8Dense.from_dense(gelu)(x, column_parts=2, output_parts=True)
    np.testing.assert_array_equal(tf.concat(outs, -1).numpy(),
                                  Int8Dense.from_dense(gelu)(x).numpy())


def test_int8_dense_runs_one_column_part_alone_and_returns_copies_of_sums():
    """`part`: one column part of the matmul, from its own input (each
    thread of a served block reads its own copy of the rows); `copies`:
    the sum of the row halves' products, once per thread."""
    import tensorflow as tf

    from bert_tf.layers.int8 import Int8Dense

    x = _x(batch=1, length=7, width=32)[0]
    residual = _x(batch=1, length=7, width=16, seed=1)[0]
    dense = keras.layers.Dense(16, activation="gelu")
    dense.build((None, 32))
    layer = Int8Dense.from_dense(dense, x.min(0), x.max(0))
    whole = layer(x).numpy()
    for part in (0, 1):
        np.testing.assert_array_equal(
            layer(x, column_parts=2, part=part).numpy(),
            whole[:, 8 * part:8 * (part + 1)])
    columns = ((1, 3, 5, 7, 9, 11, 13, 15), (0, 2, 4, 6, 8, 10, 12, 14))
    np.testing.assert_array_equal(
        layer(x, column_parts=columns, part=1).numpy(), whole[:, 0::2])
    plain = keras.layers.Dense(16)
    plain.build((None, 32))
    linear = Int8Dense.from_dense(plain, x.min(0), x.max(0))
    sums = tf.function(lambda a, b, r: linear([a, b], residual=r, copies=2))(
        x[:, :16], x[:, 16:], residual)
    assert len(sums) == 2
    np.testing.assert_array_equal(sums[0].numpy(), sums[1].numpy())
    np.testing.assert_allclose(sums[0].numpy(),
                               linear(x, residual=residual).numpy(),
                               rtol=1e-5, atol=1e-6)


def test_copies_kept_apart_survive_grappler_and_plain_ones_merge():
    """Grappler merges identical nodes; a copy marked by `kept_apart`
    stays a node of its own where TensorFlow runs the graph (a TF1
    session, as TF Serving), and so does everything computed from it."""
    import tensorflow as tf

    from bert_tf.layers.copies import kept_apart

    def executed(mark):
        graph = tf.Graph()
        with graph.as_default():
            a = tf.compat.v1.placeholder(tf.float32, (None, 4))
            b = tf.compat.v1.placeholder(tf.float32, (None, 4))
            first = a * 2.0 + b
            second = kept_apart(a * 2.0 + b, 1) if mark else a * 2.0 + b
            outs = [tf.reduce_mean(first, -1), tf.reduce_mean(second, -1)]
        metadata = tf.compat.v1.RunMetadata()
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(outs, {a: np.ones((2, 4)), b: np.ones((2, 4))},
                        options=tf.compat.v1.RunOptions(
                            output_partition_graphs=True),
                        run_metadata=metadata)
        return sorted(n.op for g in metadata.partition_graphs
                      for n in g.node if n.op in ("AddV2", "Mean"))

    assert executed(mark=True) == ["AddV2", "AddV2", "Mean", "Mean"]
    assert executed(mark=False) == ["AddV2", "Mean"]


def test_int8_input_codes_are_exact_in_graphs():
    """A calibrated matmul's input codes in a traced graph (Grappler and
    oneDNN's rewrites on) are round(x * s) - round(low * s): TF's own
    QuantizeV2 kernel. oneDNN's `_MklQuantizeV2` rounded one code in five
    the other way and cost 78 against 23 us a call at batch 1."""
    import tensorflow as tf

    from bert_tf.layers.quantized_ops import quantize_min_first as _quantize_min_first

    x = _x(batch=1, length=64, width=48)[0] * 3
    low, high = -2.7, 5.1
    codes = tf.function(lambda x: tf.bitcast(
        _quantize_min_first(x, low, high), tf.uint8))(x).numpy()
    scale = 255 / (high - low)
    want = np.clip(np.round(x.astype(np.float64) * scale) -
                   np.round(low * scale), 0, 255)
    np.testing.assert_array_equal(codes, want)
