"""TFLite export: raw strings in with tf-text's TFLite kernels (no Flex),
the same answers as the SavedModel, int8 variant, hostile strings, and
`bert-tf export --format tflite` / `bert-tf predict` on the file."""

import numpy as np
import pytest
import tensorflow as tf
from bert_tf import cli
from bert_tf.serving import export as export_lib
from bert_tf.serving.tflite import TFLiteModel, custom_ops, export_tflite
from conftest import save_pair_classifier
from test_export import HOSTILE
from toy_task import ENCODER, VOCAB

TEXTS = ["the film was good and long", "the film was awful", "", "dull",
         "The FILM was GOOD!"]
QUIET = dict(log=lambda *a: None)
# The custom ops tf-text's TFLite registrar provides that the graph uses.
TFLITE_TEXT_OPS = {"FastBertNormalize", "FastWordpieceTokenizeWithOffsets",
                   "RaggedTensorToTensor"}


@pytest.fixture(scope="module")
def saved_and_tflite(toy_run, tmp_path_factory):
    directory, _ = toy_run
    root = tmp_path_factory.mktemp("tflite")
    saved = export_lib.export_model(directory / "run", root / "toy" / "1",
                                    **QUIET)["path"]
    files = {q: export_tflite(directory / "run", root / f"{q}.tflite", q,
                              **QUIET) for q in ("none", "dynamic_int8")}
    return export_lib.load_exported(saved), files, directory / "run"


@pytest.mark.slow
def test_tflite_answers_like_the_saved_model(saved_and_tflite):
    loaded, files, _ = saved_and_tflite
    expected = export_lib.predict_texts(loaded, TEXTS)
    got = TFLiteModel(files["none"]["path"])(TEXTS)
    np.testing.assert_allclose(got["probabilities"],
                               expected["probabilities"], atol=1e-5)
    assert got["label"].tolist() == expected["label"].tolist()
    # Only builtins plus tf-text's registered kernels: no Flex ops.
    for report in files.values():
        assert set(report["custom_ops"]) == TFLITE_TEXT_OPS
        assert not any(op.startswith("Flex") for op in report["custom_ops"])
        assert custom_ops(report["path"]) == report["custom_ops"]
    int8 = TFLiteModel(files["dynamic_int8"]["path"])(TEXTS)
    assert int8["probabilities"].shape == (len(TEXTS), 2)


@pytest.mark.slow
def test_a_tflite_file_records_its_kind_and_older_files_still_load(
        saved_and_tflite, tmp_path):
    """The kind is read from the file's `bert_tf` metadata; a file written
    before (no metadata) is told by its outputs, through the registry."""
    from tensorflow.lite.tools import flatbuffer_utils

    from bert_tf.serving.tflite import TFLiteModel, read_metadata
    _, files, _ = saved_and_tflite
    path = files["none"]["path"]
    assert read_metadata(path) == {"kind": "classification"}
    model = flatbuffer_utils.read_model(str(path))
    model.metadata = [m for m in model.metadata if m.name != b"bert_tf"]
    legacy = tmp_path / "legacy.tflite"
    flatbuffer_utils.write_model(model, str(legacy))
    assert read_metadata(legacy) == {}
    assert TFLiteModel(legacy).kind == "classification"
    assert TFLiteModel(legacy)(["dull"])["probabilities"].shape == (1, 2)


@pytest.mark.slow
def test_tflite_takes_hostile_strings(saved_and_tflite):
    loaded, files, _ = saved_and_tflite
    for report in files.values():
        classifier = TFLiteModel(report["path"])
        out = classifier(HOSTILE)
        probabilities = out["probabilities"]
        assert probabilities.shape == (len(HOSTILE), 2)
        assert np.isfinite(probabilities).all()
        np.testing.assert_allclose(probabilities.sum(1), 1, atol=1e-5)
        for i, text in enumerate(HOSTILE):  # alone as in the batch
            np.testing.assert_allclose(classifier([text])["probabilities"][0],
                                       probabilities[i], atol=1e-5)
    # Plain text (and over-long text, cut at seq_length) as the SavedModel.
    plain = [HOSTILE[0], HOSTILE[1], HOSTILE[2]]
    np.testing.assert_allclose(
        TFLiteModel(files["none"]["path"])(plain)["probabilities"],
        loaded.signatures["serving_default"](
            text=tf.constant(plain))["probabilities"], atol=1e-5)
    with pytest.raises(ValueError, match="texts is empty"):
        TFLiteModel(files["none"]["path"])([])
    # The SavedModel's limits on rows and bytes, before the graph runs.
    with pytest.raises(ValueError, match="`text` holds 1025 texts in one "
                                         "call, over the limit of 1024"):
        TFLiteModel(files["none"]["path"])([""] * 1025)
    with pytest.raises(ValueError, match="`text` holds a text of 4,000,001 "
                                         "bytes, over the 4,000,000"):
        TFLiteModel(files["none"]["path"])([b"\x80" * 4_000_001])


@pytest.mark.slow
def test_pair_classifier_tflite(tmp_path):
    best = save_pair_classifier(tmp_path / "pairs" / "best", ["no", "yes"],
                                ENCODER, VOCAB)
    path = export_tflite(best, tmp_path / "pairs.tflite", **QUIET)["path"]
    loaded = export_lib.load_exported(export_lib.export_model(
        best, tmp_path / "export" / "pairs" / "1", **QUIET)["path"])
    a = ["the film was good the film was good", "bad", ""]
    b = ["the film", "dull film was bad and long and dull", "film"]
    np.testing.assert_allclose(
        TFLiteModel(path)(a, b)["probabilities"],
        export_lib.predict_texts(loaded, a, b)["probabilities"], atol=1e-5)
    with pytest.raises(ValueError, match="takes text, text_b; got text"):
        TFLiteModel(path)(a)


@pytest.mark.slow
def test_cli_writes_and_predicts_tflite(saved_and_tflite, tmp_path, capsys):
    _, _, run_dir = saved_and_tflite
    out = tmp_path / "sentiment.tflite"
    assert cli.main(["export", "--format", "tflite", "--run",
                     str(run_dir), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"wrote {out}" in printed and "no Flex" in printed
    assert cli.main(["predict", "--model", str(out), "the film was good",
                     "dull"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and lines[0].endswith("the film was good")
    # Errors name the input: an existing file, a wrong suffix, a wrong kind.
    assert cli.main(["export", "--format", "tflite", "--run",
                     str(run_dir), "--out", str(out)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert cli.main(["export", "--format", "tflite", "--run",
                     str(run_dir), "--out", str(tmp_path / "x.bin")]) == 2
    assert ".tflite" in capsys.readouterr().err
    assert cli.main(["export", "--format", "tflite", "--kind", "fill_mask",
                     "--checkpoint", str(run_dir), "--out",
                     str(tmp_path / "y.tflite")]) == 2
    assert "a fine-tuning run (no --kind) or --kind embeddings" in \
        capsys.readouterr().err


@pytest.fixture(scope="module")
def embedding_files(tmp_path_factory):
    """A tiny encoder's embeddings as a SavedModel and as TFLite files."""
    from conftest import save_tiny_checkpoint

    from bert_tf.serving import write_export
    root = tmp_path_factory.mktemp("tflite_embeddings")
    save_tiny_checkpoint(root / "encoder", VOCAB, num_layers=1)
    saved = export_lib.export("embeddings", root / "encoder",
                              root / "export" / "emb" / "1", seq_length=32,
                              word_seq_length=32, doc_stride=16,
                              **QUIET)["path"]
    files = {q: write_export("tflite", "embeddings", root / "encoder",
                             root / f"emb_{q}.tflite", quantize=q,
                             seq_length=32, **QUIET)
             for q in ("none", "dynamic_int8")}
    return export_lib.load_exported(saved), files, root / "encoder"


@pytest.mark.slow
def test_embeddings_tflite_gives_the_saved_models_vectors(embedding_files):
    from bert_tf.serving.tflite import TFLiteModel
    loaded, files, _ = embedding_files
    plain = TEXTS + ["the film was good " * 20]  # cut at seq_length 32
    want = loaded.signatures["serving_default"](
        text=tf.constant(plain))["embedding"].numpy()
    fp32 = TFLiteModel(files["none"]["path"])
    assert fp32.kind == "embeddings" and fp32.inputs == ["text"]
    got = fp32(text=plain)["embedding"]
    np.testing.assert_allclose(got, want, atol=1e-5)
    int8 = TFLiteModel(files["dynamic_int8"]["path"])(text=plain)["embedding"]
    cosine = (int8 * want).sum(1)  # both L2-normalised
    assert cosine.min() > 0.98, cosine
    for report in files.values():
        assert set(report["custom_ops"]) <= TFLITE_TEXT_OPS
        vectors = TFLiteModel(report["path"])(text=HOSTILE)["embedding"]
        assert vectors.shape == (len(HOSTILE), 16)
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1,
                                   atol=1e-4)


@pytest.mark.slow
def test_cli_exports_and_predicts_embeddings_tflite(embedding_files,
                                                    tmp_path, capsys):
    _, _, encoder = embedding_files
    out = tmp_path / "embeddings.tflite"
    assert cli.main(["export", "--format", "tflite", "--kind", "embeddings",
                     "--checkpoint", str(encoder), "--seq-length", "32",
                     "--out", str(out)]) == 0
    assert "sentence embeddings of" in capsys.readouterr().out
    assert cli.main(["predict", "--model", str(out), "the film was good",
                     "dull"]) == 0
    printed = capsys.readouterr().out
    assert "norm 1.000" in printed and "cosine similarity:" in printed
    assert cli.main(["export", "--format", "tflite", "--kind", "hub",
                     "--checkpoint", str(encoder), "--out", str(out)]) == 2
    assert "cannot be combined with --format tflite" in \
        capsys.readouterr().err
