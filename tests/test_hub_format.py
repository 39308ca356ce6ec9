"""TF Hub-format export: the preprocessing model and the encoder load with
tf.saved_model.load, keras.layers.TFSMLayer and hub.KerasLayer, match the
Keras encoder and run the TF Hub BERT tutorial's model shape."""

import json

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import checkpoints
from bert_tf.models.encoder import BertEncoder
from bert_tf.serving import export as export_lib
from bert_tf.serving.hub import export_hub, word_pieces
from bert_tf.text.preprocessor import BertPreprocessor
from bert_tf.text.tokenizer import BertTokenizer
from conftest import SPECIAL, save_tiny_checkpoint

TOKENS = SPECIAL + ["the", "film", "play", "##ing", "##ed", "was", "good",
                    "!", "a", "plot", "caf", "##e"]
TEXTS = ["The film was good!", "playing played", "", "Café plot",
         "the " * 40]
HOSTILE = ["", "   \t\n ", "film " * 10000, "\x00\x01 bell\x07",
           "🎸 中文 ünïcödé", "\u200b\u200d"]
QUIET = dict(log=lambda *a: None)


def test_tokenize_groups_pieces_into_words():
    tokenizer = BertTokenizer(TOKENS)
    words = word_pieces(tokenizer, tf.constant(["playing played!", "",
                                                "the film"]))
    name = dict(enumerate(TOKENS))
    assert [[[name[i] for i in word] for word in row]
            for row in words.to_list()] == [
        [["play", "##ing"], ["play", "##ed"], ["!"]], [],
        [["the"], ["film"]]]
    assert words.merge_dims(1, 2).to_list() == tokenizer(
        tf.constant(["playing played!", "", "the film"])).to_list()


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    import tensorflow_text  # noqa: F401 (registers the tf-text ops)

    root = tmp_path_factory.mktemp("hub")
    encoder, _ = save_tiny_checkpoint(root / "ckpt", TOKENS, 2)
    report = export_hub(root / "ckpt", root / "hub", seq_length=24, **QUIET)
    return encoder, report


@pytest.mark.slow
def test_saved_model_load_matches_keras(exported):
    encoder, report = exported
    preprocess = tf.saved_model.load(str(report["preprocess"]))
    hub_encoder = tf.saved_model.load(str(report["encoder"]))
    texts = tf.constant(TEXTS)
    inputs = preprocess(texts)
    expected = BertPreprocessor(TOKENS, 24)(texts)
    for name in expected:
        np.testing.assert_array_equal(inputs[name], expected[name])
    # tokenize + bert_pack_inputs: pairs, another length, and the default.
    tokens = preprocess.tokenize(texts)
    assert tokens.shape.rank == 3
    pair = preprocess.bert_pack_inputs([tokens, tokens[::-1]], seq_length=12)
    expected_pair = BertPreprocessor(TOKENS, 12)((texts, texts[::-1]))
    for name in expected_pair:
        np.testing.assert_array_equal(pair[name], expected_pair[name])
    assert preprocess.bert_pack_inputs([tokens])["input_mask"].shape == (5, 24)
    special = {k: int(v) for k, v in
               preprocess.tokenize.get_special_tokens_dict().items()}
    assert special == {"vocab_size": len(TOKENS), "start_of_sequence_id": 2,
                       "end_of_segment_id": 3, "padding_id": 0, "mask_id": 4}

    ours = encoder(expected, training=False)
    theirs = hub_encoder(inputs, training=False)
    states = [ours["embedding_output"], *ours["encoder_outputs"]]
    assert len(theirs["encoder_outputs"]) == 3
    for got, want in zip(theirs["encoder_outputs"], states):
        np.testing.assert_allclose(got, want, atol=1e-5)
    for name in ("pooled_output", "sequence_output"):
        np.testing.assert_allclose(theirs[name], ours[name], atol=1e-5)
    np.testing.assert_array_equal(theirs["default"], theirs["pooled_output"])
    served = hub_encoder.signatures["serving_default"](**inputs)
    np.testing.assert_allclose(served["encoder_outputs"],
                               np.stack(states, axis=1), atol=1e-5)
    assert len(hub_encoder.trainable_variables) == len(
        encoder.trainable_variables)
    info = json.loads((report["encoder"] / "assets.extra" /
                       "bert_tf.json").read_text())
    assert info["part"] == "encoder" and info["num_layers"] == 2
    assert report["ops"]["encoder"]["tf_text"] == {}


@pytest.mark.slow
def test_bf16_encoder_agrees_with_fp32(exported, tmp_path):
    encoder, report = exported
    bf16 = export_hub(report["encoder"].parent.parent / "ckpt",
                      tmp_path / "hub", seq_length=24, precision="bf16",
                      **QUIET)
    info = json.loads((bf16["encoder"] / "assets.extra" /
                       "bert_tf.json").read_text())
    assert info["precision"] == "bf16"
    inputs = tf.saved_model.load(str(report["preprocess"]))(
        tf.constant(TEXTS))
    fp32, half = (tf.saved_model.load(str(r["encoder"]))(inputs)
                  for r in (report, bf16))
    for name in ("pooled_output", "sequence_output"):
        assert half[name].dtype == tf.float32
        np.testing.assert_allclose(half[name], fp32[name], atol=5e-2)
    loaded = tf.saved_model.load(str(bf16["encoder"]))
    assert tf.bfloat16 in {v.dtype for v in loaded.variables}
    int8 = export_hub(report["encoder"].parent.parent / "ckpt",
                      tmp_path / "hub_int8", seq_length=24, precision="int8",
                      **QUIET)
    quantized = tf.saved_model.load(str(int8["encoder"]))(inputs)
    for name in ("pooled_output", "sequence_output"):
        assert quantized[name].dtype == tf.float32
        np.testing.assert_allclose(quantized[name], fp32[name], atol=5e-2)
    assert export_lib.graph_op_types(int8["encoder"]).get(
        "_QuantizedMatMul", 0) >= 4


@pytest.mark.slow
def test_tfsm_layer_in_a_keras_3_model(exported):
    import keras

    encoder, report = exported
    text = keras.Input(shape=(), dtype="string")
    inputs = keras.layers.TFSMLayer(str(report["preprocess"]))(text)
    outputs = keras.layers.TFSMLayer(str(report["encoder"]))(inputs)
    model = keras.Model(text, outputs["pooled_output"])
    expected = encoder(BertPreprocessor(TOKENS, 24)(tf.constant(TEXTS)),
                       training=False)["pooled_output"]
    np.testing.assert_allclose(model(tf.constant(TEXTS)), expected,
                               atol=1e-5)
    hostile = model(tf.constant(HOSTILE)).numpy()
    assert hostile.shape == (len(HOSTILE), 16) and np.isfinite(hostile).all()


@pytest.mark.slow
def test_hub_keras_layer_tutorial_fine_tunes(exported):
    """The TF Hub BERT tutorial's shape under tf_keras: preprocess ->
    trainable encoder -> dense head, fit a few steps."""
    hub = pytest.importorskip("tensorflow_hub")
    import tf_keras

    _, report = exported
    tf_keras.utils.set_random_seed(0)  # the head's init and the dropout
    text = tf_keras.layers.Input(shape=(), dtype=tf.string)
    inputs = hub.KerasLayer(str(report["preprocess"]))(text)
    encoder = hub.KerasLayer(str(report["encoder"]), trainable=True)
    pooled = encoder(inputs)["pooled_output"]
    logits = tf_keras.layers.Dense(2)(pooled)
    model = tf_keras.Model(text, logits)
    model.compile(tf_keras.optimizers.Adam(3e-3), loss=tf_keras.losses.
                  SparseCategoricalCrossentropy(from_logits=True))
    before = [w.numpy().copy() for w in encoder.trainable_weights]
    texts = np.array(["the film was good", "the plot was bad"] * 8)
    labels = np.array([1, 0] * 8)
    history = model.fit(texts, labels, batch_size=8, epochs=8, verbose=0)
    losses = history.history["loss"]
    assert max(losses[-2:]) < losses[0] and np.isfinite(losses).all()
    changed = sum(not np.array_equal(b, w.numpy()) for b, w in
                  zip(before, encoder.trainable_weights))
    assert changed == len(before)
    # The tutorial's pair form: tokenize, then bert_pack_inputs.
    preprocess = hub.load(str(report["preprocess"]))
    a = tf_keras.layers.Input(shape=(), dtype=tf.string)
    b = tf_keras.layers.Input(shape=(), dtype=tf.string)
    tokenize = hub.KerasLayer(preprocess.tokenize)
    pack = hub.KerasLayer(preprocess.bert_pack_inputs,
                          arguments=dict(seq_length=10))
    pairs = tf_keras.Model([a, b], pack([tokenize(a), tokenize(b)]))
    got = pairs([tf.constant(TEXTS), tf.constant(TEXTS[::-1])])
    expected = BertPreprocessor(TOKENS, 10)((tf.constant(TEXTS),
                                            tf.constant(TEXTS[::-1])))
    np.testing.assert_array_equal(got["input_type_ids"],
                                  expected["input_type_ids"])


def _tf1_checkpoint(directory):
    encoder = BertEncoder(vocab_size=len(TOKENS), hidden_size=16,
                          num_layers=1, num_heads=2, intermediate_size=32,
                          max_position_embeddings=64)
    checkpoints.save_tf1_checkpoint(checkpoints.export_weights(encoder),
                                    encoder.config, directory)
    (directory / "vocab.txt").write_text("\n".join(TOKENS) + "\n")
    return encoder


@pytest.mark.slow
def test_any_checkpoint_exports_and_bad_input_is_named(tmp_path):
    encoder = _tf1_checkpoint(tmp_path / "tf1")
    report = export_hub(f"tf1:{tmp_path / 'tf1'}", tmp_path / "hub",
                        seq_length=8, max_input_chars=60_000,
                        max_batch_chars=100_000, **QUIET)
    import tensorflow_text  # noqa: F401

    preprocess = tf.saved_model.load(str(report["preprocess"]))
    hub_encoder = tf.saved_model.load(str(report["encoder"]))
    inputs = preprocess(tf.constant(HOSTILE))
    assert inputs["input_mask"].numpy()[:, 0].all()  # [CLS] in every row
    np.testing.assert_allclose(
        hub_encoder(inputs)["sequence_output"],
        encoder(inputs, training=False)["sequence_output"], atol=1e-5)
    with pytest.raises(tf.errors.InvalidArgumentError, match="seq_length"):
        preprocess.bert_pack_inputs([preprocess.tokenize(["film"])] * 2,
                                    seq_length=3)
    # The export's limits, in every entry that takes text.
    over = tf.constant(["film " * 12_001])
    for entry in (preprocess, preprocess.tokenize,
                  preprocess.signatures["serving_default"]):
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match="`text` holds a text of 60005 characters, "
                                 "over the limit of 60000"):
            entry(text=over) if entry is not preprocess else entry(over)
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="over the limit of 100000 set by"):
        preprocess(tf.constant(["film " * 10_000] * 3))
    info = json.loads((report["preprocess"] / "assets.extra" /
                       "bert_tf.json").read_text())
    assert (info["max_input_chars"], info["max_batch_chars"]) == (
        60_000, 100_000)
    with pytest.raises(ValueError, match="already exists"):
        export_hub(f"tf1:{tmp_path / 'tf1'}", tmp_path / "hub", **QUIET)
    with pytest.raises(ValueError, match="seq_length = 65"):
        export_hub(f"tf1:{tmp_path / 'tf1'}", tmp_path / "h2",
                   seq_length=65, **QUIET)
    assert not (tmp_path / "h2").exists()


@pytest.mark.slow
def test_model_garden_checkpoint_exports(tmp_path):
    pytest.importorskip("official.nlp.modeling")
    encoder = BertEncoder(vocab_size=len(TOKENS), hidden_size=16,
                          num_layers=1, num_heads=2, intermediate_size=32,
                          max_position_embeddings=64)
    garden = checkpoints.to_garden_encoder(encoder)
    directory = tmp_path / "garden"
    tf.train.Checkpoint(encoder=garden).save(str(directory / "ckpt"))
    (directory / "bert_config.json").write_text(json.dumps(
        checkpoints.encoder_config_to_tf1_json(encoder.config)))
    (directory / "vocab.txt").write_text("\n".join(TOKENS) + "\n")
    report = export_hub(f"garden:{directory}", tmp_path / "hub",
                        seq_length=16, **QUIET)
    import tensorflow_text  # noqa: F401

    inputs = tf.saved_model.load(str(report["preprocess"]))(
        tf.constant(TEXTS))
    theirs = garden(dict(inputs))
    ours = tf.saved_model.load(str(report["encoder"]))(inputs)
    np.testing.assert_allclose(ours["pooled_output"],
                               theirs["pooled_output"], atol=1e-5)


@pytest.mark.slow
def test_cli_exports_minilm_in_hub_format(minilm, minilm_dir, tmp_path,
                                          capsys):
    from bert_tf import cli
    from conftest import FIXTURES

    out = tmp_path / "minilm_hub"
    assert cli.main(["export", "--format", "hub", "--checkpoint",
                     f"hf:{minilm_dir}", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"{out / 'preprocess'}: strings" in printed
    assert f"{out / 'encoder'}: those inputs" in printed
    import tensorflow_text  # noqa: F401

    reference = np.load(FIXTURES / "minilm_reference.npz")
    sentences = tf.constant([str(s) for s in reference["sentences"]])
    preprocess = tf.saved_model.load(str(out / "preprocess"))
    length = reference["input_word_ids"].shape[1]
    tokens = preprocess.tokenize(sentences)
    inputs = preprocess.bert_pack_inputs([tokens], seq_length=length)
    np.testing.assert_array_equal(inputs["input_word_ids"],
                                  reference["input_word_ids"])
    theirs = tf.saved_model.load(str(out / "encoder"))(inputs)
    ours = minilm.encoder(inputs, training=False)
    # The saved graph runs oneDNN's fused MatMul + bias (+ GELU) kernels,
    # eager Keras the ops one by one: a few of 147,456 values differ by up
    # to 8e-5 where they are about 4.5 (float32 rounding of another
    # summation order; relative 2e-5).
    for name in ("pooled_output", "sequence_output"):
        np.testing.assert_allclose(theirs[name], ours[name], atol=1e-4)
