"""Features without fine-tuning: layer choices, per-word features with
offsets, sentence embeddings (sentence-transformers parity), the
embeddings export and `bert-tf features`.

The tiny encoder has 4 layers (H 16) so that every "last four" choice
exists."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from conftest import (assert_bf16_export_agrees, assert_int8_export_agrees,
                      save_tiny_checkpoint)
from test_export import HOSTILE, run_serving_check

from bert_tf import checkpoints, cli
from bert_tf.serving import export as export_lib
from bert_tf.tasks.embeddings.extract import (LAYER_CHOICES, FeatureExtractor,
                                              SentenceEmbedder, check_layers,
                                              combine_layers, hidden_states)
from bert_tf.text.preprocessor import BertPreprocessor

ROOT = Path(__file__).resolve().parents[1]
TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "film",
          "was", "good", "ann", "lives", "in", "oslo", "##w", "cafe", "a"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tiny_encoder")
    encoder, _ = save_tiny_checkpoint(directory, TOKENS, 4)
    return encoder, directory


def test_layer_choices_combine_the_hidden_states():
    states = [tf.fill([2, 3], float(i)) for i in range(5)]  # L = 4
    value = {c: combine_layers(states, c).numpy() for c in LAYER_CHOICES}
    assert (value["embeddings"] == 0).all() and (value["last"] == 4).all()
    assert (value["second_to_last"] == 3).all()
    assert (value["sum_last_four"] == 1 + 2 + 3 + 4).all()
    assert value["concat_last_four"].shape == (2, 12)
    assert value["concat_last_four"][0].tolist() == [1] * 3 + [2] * 3 + \
        [3] * 3 + [4] * 3
    assert value["all"].shape == (2, 5, 3)
    assert np.allclose(value["weighted_sum_all"], 2.0)  # equal weights
    heavy = combine_layers(states, "weighted_sum_all",
                           tf.constant([0, 0, 0, 0, 50.0]))
    assert np.allclose(heavy, 4.0, atol=1e-5)
    assert (combine_layers(states, "layer_2").numpy() == 2).all()


@pytest.mark.parametrize("choice, layers, rule", [
    ("layer_5", 4, "layer_N with N in 0..4"),
    ("mean", 4, "must be one of embeddings"),
    ("concat_last_four", 2, "needs 4 layers"),
])
def test_bad_layer_choices_are_named(choice, layers, rule):
    with pytest.raises(ValueError, match=rule) as error:
        check_layers(choice, layers)
    assert repr(choice) in str(error.value)


@pytest.mark.slow
def test_word_features_are_each_words_first_piece(tiny):
    encoder, _ = tiny
    text = "the film  was good oslow"
    out = FeatureExtractor(encoder, TOKENS, "all", 16, 4)([text])[0]
    assert out["words"] == ["the", "film", "was", "good", "oslow"]
    assert out["start"].tolist() == [0, 4, 10, 14, 19]
    assert out["features"].shape == (5, 5, 16)
    inputs = BertPreprocessor(TOKENS, 16)(tf.constant([text]))
    states = np.stack([s.numpy()[0] for s in hidden_states(
        encoder(inputs, training=False))], axis=1)    # [positions, 5, H]
    # [CLS] the film was good oslo ##w [SEP]: words start at 1..5.
    np.testing.assert_allclose(out["features"], states[1:6], atol=1e-5)
    concat = FeatureExtractor(encoder, TOKENS, "concat_last_four", 16, 4)(
        [text])[0]["features"]
    np.testing.assert_allclose(
        concat, states[1:6, 1:].reshape(5, -1), atol=1e-5)


@pytest.mark.slow
def test_long_text_gives_every_word_one_row_with_offsets(tiny):
    encoder, _ = tiny
    words = ["the", "film", "was", "good", "ann", "lives", "in", "oslow"]
    text = " ".join(words[i % len(words)] for i in range(300))
    hard = "Café 😀 東京 oslow"
    out = FeatureExtractor(encoder, TOKENS, "last", 16, 4)(
        [text, hard, "", "   "], batch_size=3)
    assert len(out[0]["words"]) == 300 and out[0]["words"] == text.split()
    assert out[0]["features"].shape == (300, 16)
    assert np.isfinite(out[0]["features"]).all()
    assert (np.abs(out[0]["features"]).sum(1) > 0).all()
    assert out[1]["words"] == hard.split()  # code points, not bytes
    assert [hard[a:b] for a, b in zip(out[1]["start"], out[1]["end"])] == \
        hard.split()
    assert out[2]["features"].shape == (0, 16) and out[3]["words"] == []


@pytest.mark.slow
def test_sentence_embeddings_are_normalised_mean_pools(tiny):
    encoder, _ = tiny
    texts = ["the film was good", "", "ann lives in oslow"]
    vectors = SentenceEmbedder(encoder, TOKENS, 32)(texts)
    inputs = BertPreprocessor(TOKENS, 32)(tf.constant(texts))
    hidden = encoder(inputs, training=False)["sequence_output"].numpy()
    mask = inputs["input_mask"].numpy()[..., None]
    mean = (hidden * mask).sum(1) / mask.sum(1)
    want = mean / np.linalg.norm(mean, axis=1, keepdims=True)
    np.testing.assert_allclose(vectors, want, atol=1e-5)
    raw = SentenceEmbedder(encoder, TOKENS, 32, normalize=False)(texts)
    np.testing.assert_allclose(raw, mean, atol=1e-5)
    assert SentenceEmbedder(encoder, TOKENS, 32)([]).shape == (0, 16)


@pytest.mark.slow
def test_minilm_embeddings_match_sentence_transformers(minilm_dir):
    fixture = np.load(ROOT / "examples" / "reference" /
                      "minilm_sentence_embeddings.npz")
    sentences = [str(s) for s in fixture["sentences"]]
    assert len(sentences) >= 10
    pretrained = checkpoints.load_encoder(f"hf:{minilm_dir}")
    ours = SentenceEmbedder(pretrained.encoder, pretrained.vocab)(sentences)
    assert np.abs(ours - fixture["embeddings"]).max() <= 1e-4


@pytest.mark.slow
def test_live_sentence_transformers_parity(minilm_dir):
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("torch")
    spec = importlib.util.spec_from_file_location(
        "make_reference_fixtures",
        ROOT / "scripts" / "make_reference_fixtures.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    reference, _ = script.minilm_sentence_embeddings()
    pretrained = checkpoints.load_encoder(f"hf:{minilm_dir}")
    ours = SentenceEmbedder(pretrained.encoder, pretrained.vocab)(
        script.SENTENCES)
    assert np.abs(ours - reference).max() <= 1e-4


@pytest.fixture(scope="module")
def embeddings_export(tiny, tmp_path_factory):
    _, directory = tiny
    out = tmp_path_factory.mktemp("export") / "tiny_embeddings" / "1"
    report = export_lib.export(
        "embeddings", directory, out, log=lambda *a: None, seq_length=64,
        word_seq_length=16, doc_stride=4)
    return out, report


@pytest.mark.slow
def test_embeddings_export_answers_like_the_python_api(tiny,
                                                       embeddings_export):
    encoder, _ = tiny
    out, report = embeddings_export
    assert report["kind"] == "embeddings" and set(report["signatures"]) == {
        "serving_default", "word_features"}
    assert export_lib.exported_kind(out) == "embeddings"
    loaded = export_lib.load_exported(out)
    texts = ["the film was good", "ann lives in oslow oslow", ""]
    served = loaded.signatures["serving_default"](text=tf.constant(texts))
    np.testing.assert_allclose(
        served["embedding"], SentenceEmbedder(encoder, TOKENS, 64)(texts),
        atol=1e-5)
    words = loaded.signatures["word_features"](text=tf.constant(texts))
    want = FeatureExtractor(encoder, TOKENS, "all", 16, 4)(texts)
    assert words["encoder_outputs"].shape[2:] == (5, 16)  # L + 1 states
    for i, expected in enumerate(want):
        n = int(words["count"][i])
        assert n == len(expected["words"])
        np.testing.assert_allclose(words["encoder_outputs"][i, :n],
                                   expected["features"], atol=1e-5)
        assert words["start"][i, :n].numpy().tolist() == \
            expected["start"].tolist()


@pytest.mark.slow
def test_embeddings_export_takes_hostile_strings(embeddings_export):
    loaded = export_lib.load_exported(embeddings_export[0])
    batch = tf.constant(HOSTILE)
    vectors = loaded.signatures["serving_default"](text=batch)[
        "embedding"].numpy()
    assert vectors.shape == (len(HOSTILE), 16) and np.isfinite(vectors).all()
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0,
                               atol=1e-5)
    words = loaded.signatures["word_features"](text=batch)
    assert words["count"].numpy().tolist()[:3] == [0, 0, 10_000]
    assert np.isfinite(words["encoder_outputs"].numpy()).all()
    with pytest.raises((tf.errors.InvalidArgumentError, ValueError,
                        TypeError)):
        loaded.signatures["serving_default"](text=tf.constant("a"))


@pytest.mark.slow
def test_embeddings_export_runs_from_c_and_predict(embeddings_export,
                                                   tmp_path, capsys):
    out = embeddings_export[0]
    texts = ["the film was good", ""]
    rows = [np.array(line.split("=", 1)[1].split(","), float)
            for line in run_serving_check(out, texts, tmp_path)]
    served = export_lib.load_exported(out).signatures["serving_default"](
        text=tf.constant(texts))["embedding"].numpy()
    np.testing.assert_allclose(np.stack(rows), served, atol=1e-5)
    assert cli.main(["predict", "--model", str(out), "the film was good",
                     "ann lives in oslow"]) == 0
    printed = capsys.readouterr().out
    assert "norm 1.000" in printed and "cosine similarity" in printed


@pytest.mark.slow
def test_features_command_writes_npz_and_tfrecord(tiny, tmp_path, capsys):
    _, directory = tiny
    lines = ["the film was good", "", "ann lives in oslow"]
    source = tmp_path / "texts.txt"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "features.npz"
    assert cli.main(["features", "--checkpoint", str(directory), "--input",
                     str(source), "--layers", "concat_last_four",
                     "embeddings", "--seq-length", "16", "--doc-stride",
                     "4", "--out", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    data = np.load(out)
    assert data["features_concat_last_four"].shape == (8, 64)
    assert data["features_embeddings"].shape == (8, 16)
    assert data["row_splits"].tolist() == [0, 4, 4, 8]
    assert data["words"].tolist()[4:] == ["ann", "lives", "in", "oslow"]
    assert data["text_index"].tolist() == [0] * 4 + [2] * 4
    record = tmp_path / "features.tfrecord"
    assert cli.main(["features", "--checkpoint", str(directory), "--input",
                     str(source), "--layers", "last", "--seq-length", "16",
                     "--doc-stride", "4", "--out", str(record)]) == 0
    examples = [tf.train.Example.FromString(r.numpy())
                for r in tf.data.TFRecordDataset(str(record))]
    assert len(examples) == 3
    third = examples[2].features.feature
    assert list(third["shape_last"].int64_list.value) == [4, 16]
    np.testing.assert_allclose(
        np.array(third["features_last"].float_list.value).reshape(4, 16),
        data["features_concat_last_four"][4:, 48:], atol=1e-6)
    assert cli.main(["features", "--checkpoint", str(directory), "--input",
                     str(source), "--layers", "layer_9", "--out",
                     str(tmp_path / "x.npz")]) == 2
    assert "layer_N with N in 0..4" in capsys.readouterr().err


@pytest.mark.slow
def test_bf16_export_agrees_with_fp32(tiny, embeddings_export, tmp_path):
    _, directory = tiny
    assert_bf16_export_agrees(  # embeddings within 1e-2
        None, embeddings_export[0], tmp_path,
        [{"text": ["the film was good", "", "a film " * 40]}],
        export=lambda out: export_lib.export(
            "embeddings", directory, out, log=lambda *a: None, seq_length=64,
            word_seq_length=16, doc_stride=4, precision="bf16"))
    assert_int8_export_agrees(  # embeddings within 3e-2
        None, embeddings_export[0], tmp_path,
        [{"text": ["the film was good", "", "a film " * 40]},
         {"text": HOSTILE}],
        atol=3e-2, export=lambda out: export_lib.export(
            "embeddings", directory, out, log=lambda *a: None, seq_length=64,
            word_seq_length=16, doc_stride=4, precision="int8"))



@pytest.mark.slow
def test_rest_and_grpc_client_requests(tiny, embeddings_export):
    from serving_requests import answers, assert_same_answers
    encoder, _ = tiny
    texts = ["the film was good", ""]
    direct = assert_same_answers(answers(embeddings_export[0],
                                         {"text": texts}))
    np.testing.assert_allclose(direct["embedding"], SentenceEmbedder(
        encoder, TOKENS, 64)(texts), atol=1e-5)
