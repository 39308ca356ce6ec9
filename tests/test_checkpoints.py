"""Weight import/export against real weights and independent references."""

import json
import pickle
import shutil
import zipfile

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import checkpoints
from bert_tf.models.encoder import BertEncoder
from bert_tf.models.pretrainer import BertPretrainer
from bert_tf.text.preprocessor import BertPreprocessor
from conftest import FIXTURES, SPECIAL, TINY, random_inputs

QUIET = dict(log=lambda *a: None)


@pytest.fixture(scope="module")
def reference():
    return np.load(FIXTURES / "minilm_reference.npz")


def _encode(pretrained, reference):
    sentences = [str(s) for s in reference["sentences"]]
    pre = BertPreprocessor(pretrained.vocab,
                           seq_length=reference["input_word_ids"].shape[1])
    inputs = pre(tf.constant(sentences))
    return inputs, pretrained.encoder(inputs)


@pytest.mark.slow
def test_minilm_tokens_and_outputs_match_hf_reference(minilm, reference):
    assert len(reference["sentences"]) >= 10
    inputs, out = _encode(minilm, reference)
    for key in ("input_word_ids", "input_mask", "input_type_ids"):
        np.testing.assert_array_equal(inputs[key], reference[key])
    mask = reference["input_mask"][..., None]
    seq_delta = np.abs((out["sequence_output"].numpy() -
                        reference["sequence_output"]) * mask).max()
    pooled_delta = np.abs(out["pooled_output"].numpy() -
                          reference["pooled_output"]).max()
    assert seq_delta <= 1e-4 and pooled_delta <= 1e-4, (seq_delta,
                                                         pooled_delta)
    # The long sentence was truncated to the full length, [SEP] last.
    assert reference["input_mask"].sum(1).max() == mask.shape[1]


def test_minilm_live_against_pytorch(minilm, minilm_dir):
    """Optional: re-computes the reference with torch + transformers."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from transformers.models.bert.tokenization_bert_legacy import \
        BertTokenizerLegacy
    sentences = ["Zoë's 2nd café-bar opened at 9:30 p.m. — finally!",
                 "Ünïcödé everywhere; «quotes» and 'apostrophes'.",
                 "x" * 120, "A pair", "of sentences."]
    hf_tok = BertTokenizerLegacy(str(minilm_dir / "vocab.txt"))
    enc = hf_tok(sentences[:3], sentences[2:], padding="max_length",
                 truncation=True, max_length=24, return_tensors="pt",
                 return_token_type_ids=True)
    model = transformers.BertModel.from_pretrained(str(minilm_dir)).eval()
    with torch.no_grad():
        ref = model(**enc)
    pre = BertPreprocessor(minilm.vocab, seq_length=24)
    inputs = pre((tf.constant(sentences[:3]), tf.constant(sentences[2:])))
    np.testing.assert_array_equal(inputs["input_word_ids"],
                                  enc["input_ids"].numpy())
    np.testing.assert_array_equal(inputs["input_type_ids"],
                                  enc["token_type_ids"].numpy())
    out = minilm.encoder(inputs)
    np.testing.assert_allclose(out["pooled_output"],
                               ref.pooler_output.numpy(), atol=1e-4)


@pytest.mark.slow
def test_tf1_round_trip_is_exact(minilm, reference, tmp_path):
    weights = checkpoints.export_weights(minilm.encoder)
    prefix = checkpoints.save_tf1_checkpoint(weights, minilm.config,
                                             tmp_path / "tf1")
    names = dict(tf.train.list_variables(str(prefix)))
    assert names["bert/encoder/layer_0/attention/self/query/kernel"] == [
        384, 384]
    assert names["bert/embeddings/LayerNorm/gamma"] == [384]
    minilm.vocab.save(tmp_path / "tf1" / "vocab.txt")
    back = checkpoints.convert("tf1", tmp_path / "tf1", tmp_path / "ours",
                               **QUIET)
    assert back.config == minilm.config
    _, a = _encode(minilm, reference)
    _, b = _encode(back, reference)
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_array_equal(a[key], b[key])


def test_tf1_with_pretraining_heads_and_optimizer_slots(tmp_path):
    encoder = BertEncoder(**TINY)
    model = BertPretrainer(encoder)
    weights = checkpoints.export_weights(encoder, model.masked_lm,
                                         model.next_sentence)
    assert weights["cls/seq_relationship/output_weights"].shape == (2, 32)
    # The original checkpoints also carry Adam slots and global_step.
    weights["bert/pooler/dense/kernel/adam_m"] = np.zeros((32, 32),
                                                          np.float32)
    weights["global_step"] = np.int64(7)
    config = encoder.config
    checkpoints.save_tf1_checkpoint(weights, config, tmp_path / "tf1")
    _write_vocab(tmp_path / "tf1", TINY["vocab_size"])
    back = checkpoints.convert("tf1", tmp_path / "tf1", tmp_path / "ours",
                               **QUIET)
    batch = dict(random_inputs(), masked_lm_positions=np.array(
        [[1, 2]] * 3, "int32"))
    for key in ("mlm_logits", "nsp_logits"):
        np.testing.assert_array_equal(model(batch)[key],
                                      back.pretrainer(batch)[key])
    loaded = checkpoints.load_pretrained(tmp_path / "ours")
    np.testing.assert_array_equal(model(batch)["nsp_logits"],
                                  loaded.pretrainer(batch)["nsp_logits"])


@pytest.mark.slow
def test_model_garden_parity(minilm, reference):
    pytest.importorskip("official.nlp.modeling")
    inputs, ours = _encode(minilm, reference)
    garden = checkpoints.to_garden_encoder(minilm.encoder)
    theirs = garden({k: tf.constant(v) for k, v in inputs.items()})
    mask = reference["input_mask"][..., None]
    seq_delta = np.abs((ours["sequence_output"].numpy() -
                        theirs["sequence_output"].numpy()) * mask).max()
    pooled_delta = np.abs(ours["pooled_output"].numpy() -
                          theirs["pooled_output"].numpy()).max()
    assert seq_delta <= 1e-5 and pooled_delta <= 1e-5, (seq_delta,
                                                         pooled_delta)


def test_model_garden_checkpoint_import(tmp_path):
    pytest.importorskip("official.nlp.modeling")
    encoder = BertEncoder(**TINY)
    garden = checkpoints.to_garden_encoder(encoder)
    directory = tmp_path / "garden"
    tf.train.Checkpoint(encoder=garden).save(str(directory / "ckpt"))
    (directory / "bert_config.json").write_text(json.dumps(
        checkpoints.encoder_config_to_tf1_json(encoder.config)))
    _write_vocab(directory, TINY["vocab_size"])
    back = checkpoints.convert("garden", directory, tmp_path / "ours",
                               **QUIET)
    inputs = random_inputs(pad_from=5)
    expected = garden({k: tf.constant(v) for k, v in inputs.items()})
    np.testing.assert_allclose(back.encoder(inputs)["sequence_output"],
                               expected["sequence_output"], atol=1e-5)
    # Wrong config for this checkpoint: a clear error naming the variable.
    config = json.loads((directory / "bert_config.json").read_text())
    config["num_hidden_layers"] = 3
    (directory / "bert_config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"_transformer_layers/2/.*3-layer"):
        checkpoints.convert("garden", directory, tmp_path / "x", **QUIET)


@pytest.mark.slow
def test_minilm_under_mixed_bfloat16_and_xla(minilm, reference):
    """bf16 compute keeps real-model outputs close to fp32; XLA is exact."""
    import keras
    inputs, fp32 = _encode(minilm, reference)
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        mixed = BertEncoder.from_config_object(minilm.config)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    mixed.set_weights(minilm.encoder.get_weights())
    mask = reference["input_mask"][..., None]
    bf16 = tf.cast(mixed(inputs)["sequence_output"], tf.float32).numpy()
    delta = np.abs(bf16 - fp32["sequence_output"].numpy()) * mask
    # Stated tolerance (measured: max 0.039 on values up to 6.3, mean 0.003).
    assert delta.max() < 0.1 and delta.sum() / (mask.sum() * 384) < 0.01

    def sentence(h):
        e = (h * mask).sum(1) / mask.sum(1)
        return e / np.linalg.norm(e, axis=1, keepdims=True)

    cosine = (sentence(bf16) * sentence(fp32["sequence_output"].numpy())).sum(1)
    assert cosine.min() > 0.999
    xla = tf.function(lambda x: minilm.encoder(x)["sequence_output"],
                      jit_compile=True)(inputs).numpy()
    assert np.abs((xla - fp32["sequence_output"].numpy()) * mask).max() < 1e-4


@pytest.mark.slow
def test_antiberty_masked_lm_head(antiberty_dir, tmp_path):
    pretrained = checkpoints.convert("hf", antiberty_dir, tmp_path, **QUIET)
    assert pretrained.pretrainer is not None and not pretrained.pretrainer.nsp
    ref = np.load(FIXTURES / "antiberty_reference.npz")
    logits = pretrained.pretrainer(
        {k: ref[k] for k in ("input_word_ids", "input_mask", "input_type_ids",
                             "masked_lm_positions")})["mlm_logits"].numpy()
    assert np.abs(logits - ref["mlm_logits"]).max() <= 1e-3
    np.testing.assert_array_equal(logits.argmax(-1),
                                  ref["mlm_logits"].argmax(-1))


def test_torch_reader_matches_torch_load(antiberty_dir):
    torch = pytest.importorskip("torch")
    ours = checkpoints.read_torch_state_dict(
        antiberty_dir / "pytorch_model.bin")
    theirs = torch.load(antiberty_dir / "pytorch_model.bin",
                        map_location="cpu", weights_only=True)
    assert set(ours) == set(theirs)
    for name, tensor in theirs.items():
        np.testing.assert_array_equal(ours[name], tensor.numpy())


@pytest.mark.slow
def test_saved_directory_loads_back(minilm, reference):
    loaded = checkpoints.load_pretrained(minilm.directory)
    assert loaded.pretrainer is None
    _, a = _encode(minilm, reference)
    _, b = _encode(loaded, reference)
    np.testing.assert_array_equal(a["pooled_output"], b["pooled_output"])


# --- bad input ------------------------------------------------------------

def _write_vocab(directory, size):
    tokens = SPECIAL + [f"w{i}" for i in range(size - len(SPECIAL))]
    (directory / "vocab.txt").write_text("\n".join(tokens) + "\n")


def _hf_copy(minilm_dir, tmp_path, **config_changes):
    directory = tmp_path / "hf"
    directory.mkdir()
    (directory / "model.safetensors").symlink_to(
        minilm_dir / "model.safetensors")
    shutil.copy(minilm_dir / "vocab.txt", directory)
    config = json.loads((minilm_dir / "config.json").read_text())
    config.update(config_changes)
    (directory / "config.json").write_text(json.dumps(config))
    return directory


def test_missing_variable_is_named(minilm_dir, tmp_path):
    directory = _hf_copy(minilm_dir, tmp_path, num_hidden_layers=7)
    with pytest.raises(ValueError, match=r"no variable 'bert/encoder/layer_6/"
                                         r"attention/self/query/kernel'"):
        checkpoints.convert("hf", directory, tmp_path / "out", **QUIET)
    assert not (tmp_path / "out").exists()


def test_shape_mismatch_is_named(minilm_dir, tmp_path):
    directory = _hf_copy(minilm_dir, tmp_path, intermediate_size=1024)
    with pytest.raises(ValueError, match=r"'bert/encoder/layer_0/intermediate/"
                                         r"dense/kernel' has shape \(384, "
                                         r"1536\).*\(384, 1024\)"):
        checkpoints.convert("hf", directory, tmp_path / "out", **QUIET)


def test_vocab_size_mismatch_names_the_file(minilm_dir, tmp_path):
    directory = _hf_copy(minilm_dir, tmp_path)
    _write_vocab(directory, 1000)
    with pytest.raises(ValueError, match=r"vocab.txt has 1000 tokens but the "
                                         r"model's token embedding has 30522"):
        checkpoints.convert("hf", directory, tmp_path / "out", **QUIET)


def test_loading_a_directory_with_a_foreign_vocab(minilm, tmp_path):
    directory = tmp_path / "copy"
    shutil.copytree(minilm.directory, directory)
    _write_vocab(directory, 500)
    with pytest.raises(ValueError, match="500 tokens"):
        checkpoints.load_pretrained(directory)


def test_unreadable_inputs(tmp_path, minilm_dir):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        checkpoints.convert("hf", tmp_path / "nothing", tmp_path / "o",
                            **QUIET)
    with pytest.raises(ValueError, match="Unknown checkpoint source"):
        checkpoints.convert("onnx", tmp_path, tmp_path / "o", **QUIET)
    directory = tmp_path / "broken"
    directory.mkdir()
    shutil.copy(minilm_dir / "config.json", directory)
    (directory / "model.safetensors").write_bytes(b"\x00\x01 not a file")
    with pytest.raises(ValueError, match=r"model.safetensors is not a "
                                         r"readable safetensors file"):
        checkpoints.read_hf(directory)
    (directory / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="No HF weights file"):
        checkpoints.read_hf(directory)
    (directory / "config.json").write_text('{"hidden_size": 8}')
    (directory / "model.safetensors").symlink_to(
        minilm_dir / "model.safetensors")
    with pytest.raises(ValueError, match="lacks vocab_size"):
        checkpoints.read_hf(directory)
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "bert_config.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match=r"No TensorFlow checkpoint"):
        checkpoints.read_tf1(empty)


def test_torch_reader_refuses_code(tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    path = tmp_path / "evil.bin"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", pickle.dumps({"w": Evil()}))
    with pytest.raises(pickle.UnpicklingError, match="refusing to load "
                                                     "builtins.print"):
        checkpoints.read_torch_state_dict(path)


def test_cli_convert(minilm_dir, tmp_path, capsys):
    from bert_tf import cli
    assert cli.main(["convert", "--from", "hf", "--input", str(minilm_dir),
                     "--output", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert f"wrote {tmp_path / 'out' / 'config.yaml'}" in printed
    assert (tmp_path / "out" / "model.ckpt.index").is_file()
    assert cli.main(["convert", "--from", "tf1", "--input",
                     str(tmp_path / "none"), "--output",
                     str(tmp_path / "o")]) == 2
    assert "error" in capsys.readouterr().err
