"""Classification of documents longer than the model: windows, pooled
logits, per-document labels, and the export."""

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.tasks.classification.long_document import (DocumentWindows,
                                                        pool_windows)
from toy_task import VOCAB, toy_config

FILLER = ["the", "film", "was", "long", "short", "new", "and"]


def write_long_toy(directory, seed=0):
    """Documents of 20-30 words whose one adjective (the label) sits
    anywhere, mostly past the first window of 14 pieces."""
    from bert_tf.text.vocab import Vocab
    rng = np.random.default_rng(seed)
    for split, n in (("train", 320), ("dev", 64), ("test", 96)):
        lines = ["sentence\tlabel"]
        for _ in range(n):
            good = rng.random() < 0.5
            words = list(rng.choice(FILLER, int(rng.integers(20, 30))))
            words.insert(int(rng.integers(0, len(words))), str(rng.choice(
                ["good", "great", "fine"] if good else
                ["bad", "awful", "dull"])))
            lines.append(" ".join(words) +
                         f"\t{'positive' if good else 'negative'}")
        (directory / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    Vocab(tuple(VOCAB)).save(directory / "vocab.txt")


def long_config(directory, long_document=True, pooling="max"):
    # One evaluation per epoch (10 steps), not two: the runs are the
    # file's cost.
    return toy_config(directory, epochs=8, **{
        "trainer.steps_per_loop": 10, "task.pooling": "mean",
        "trainer.model_dir": str(directory / f"run_{long_document}"
                                 f"_{pooling}"),
        "task.long_document": long_document,
        "task.window_pooling": pooling})


def test_windows_cover_every_piece_once_without_overlap():
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"]
    layer = DocumentWindows(vocab, seq_length=6)
    text = tf.constant(["a b " * 10, "", "   ", "b"])
    x = layer(text)
    assert x["windows"].numpy().tolist() == [5, 1, 1, 1]
    ids = x["input_word_ids"].numpy()
    first = ids[x["window_document"].numpy() == 0]
    pieces = [t for row in first for t in row if t in (5, 6)]
    assert pieces == [5, 6] * 10  # every piece once, in order
    assert x["input_mask"].numpy()[5].tolist() == [1, 1, 0, 0, 0, 0]


def test_pooling_per_document():
    logits = tf.constant([[1.0, 0.0], [3.0, 2.0], [5.0, -1.0]])
    document = tf.constant([0, 0, 1])
    assert pool_windows(logits, document, "mean").numpy().tolist() == [
        [2.0, 1.0], [5.0, -1.0]]
    assert pool_windows(logits, document, "max").numpy().tolist() == [
        [3.0, 2.0], [5.0, -1.0]]
    scores = tf.constant([0.0, 100.0, 0.0])  # window 1 takes all weight
    np.testing.assert_allclose(pool_windows(
        logits, document, "attention", scores).numpy(),
        [[3.0, 2.0], [5.0, -1.0]], atol=1e-6)
    empty = pool_windows(tf.zeros([0, 2]), tf.zeros([0], tf.int32), "mean")
    assert empty.shape == (0, 2)


def test_long_document_refuses_pairs():
    from bert_tf.tasks import get_config_class
    config = get_config_class("classification")(
        name="local", train_file="x.tsv", text_b="b", long_document=True)
    with pytest.raises(ValueError, match="long_document takes single"):
        config.validate()


@pytest.fixture(scope="module")
def long_runs(tmp_path_factory):
    from bert_tf import finetune
    directory = tmp_path_factory.mktemp("long")
    write_long_toy(directory)
    runs = {}
    for long_document, pooling in ((True, "max"), (True, "attention"),
                                   (False, "max")):
        runs[long_document, pooling] = finetune.run(
            long_config(directory, long_document, pooling),
            log=lambda *a: None)
    return directory, runs


@pytest.mark.slow
def test_windows_read_what_truncation_misses(long_runs):
    """The label word is mostly past the first window: windows learn the
    task, truncation to the first window cannot."""
    _, runs = long_runs
    windows = runs[True, "max"].test["accuracy"]
    attention = runs[True, "attention"].test["accuracy"]
    truncated = runs[False, "max"].test["accuracy"]
    assert windows >= 0.9 and attention >= 0.85, (windows, attention)
    # About 45% of the label words are past the first window: truncation
    # guesses those (expected accuracy ~0.78).
    assert truncated <= 0.85 and truncated <= windows - 0.08, \
        (truncated, windows)


@pytest.mark.slow
def test_export_pools_windows_as_evaluation(long_runs, tmp_path):
    import tensorflow_text  # noqa: F401  (the tokenizer's ops)

    from bert_tf.serving.export import export_model
    from bert_tf.tasks.classification.data import load_classification
    from bert_tf.tasks.classification.task import (Classification,
                                                   load_classifier,
                                                   predict_logits)
    directory, runs = long_runs
    best = runs[True, "attention"].best_dir
    model, spec, vocab = load_classifier(best)
    out = export_model(best, tmp_path / "export" / "1",
                       log=lambda *a: None)["path"]
    serve = tf.saved_model.load(str(out)).signatures["serving_default"]
    texts = [line.split("\t")[0] for line in
             (directory / "test.tsv").read_text().splitlines()[1:17]]
    result = serve(text=tf.constant(texts))
    assert set(result) == {"probabilities", "logits", "label", "windows"}
    assert result["windows"].numpy().min() >= 2
    # The same logits as evaluation's pooled ones.
    from bert_tf.tasks.classification.task_data import classification_dataset
    data = load_classification("local", train=str(directory / "test.tsv"),
                     text="sentence")
    data.splits["train"] = data.split("train").take(16)
    preprocessor = Classification(spec).preprocessor(vocab)
    logits, _ = predict_logits(model, classification_dataset(data, "train",
                                                   preprocessor, 16))
    np.testing.assert_allclose(result["logits"].numpy(), logits, atol=1e-4)

    # 20,000 words in one request, and hostile strings beside it.
    hostile = ["", "   ", "\x00\x01", "😀" * 50, "文字" * 200,
               "שלום " * 100, "good " * 20_000]
    result = serve(text=tf.constant(hostile))
    assert np.isfinite(result["probabilities"].numpy()).all()
    windows = result["windows"].numpy().tolist()
    assert windows[:2] == [1, 1] and windows[-1] == -(-20_000 // 14)
    bad = tf.constant([b"\xff\xfe good"])
    assert serve(text=bad)["label"].shape == (1,)


@pytest.mark.slow
def test_tflite_refuses_a_long_document_classifier(long_runs, tmp_path):
    """No TFLite file that would cut documents short."""
    from bert_tf.serving.tflite import export_tflite
    _, runs = long_runs
    with pytest.raises(ValueError, match="reads long documents in windows"):
        export_tflite(runs[True, "max"].best_dir, tmp_path / "x.tflite",
                      log=lambda *a: None)
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
def test_long_document_teacher_teaches_pooled_logits(long_runs, tmp_path):
    """The windows-max run teaches a student with half its feed-forward
    width: a transfer-set row is a document, the soft loss is on the
    pooled logits, and the hidden states of every window are matched."""
    from bert_tf import distill
    from bert_tf.tasks import read_spec
    from toy_task import ENCODER
    directory, runs = long_runs
    teacher = runs[True, "max"]
    cfg = distill.load_dict({
        "teacher": str(teacher.best_dir.parent), "init": "",
        "vocab": str(directory / "vocab.txt"),
        "encoder": {**ENCODER, "intermediate_size": 32},
        "seq_length": 16, "batch_size": 32, "epochs": 8,
        "optimizer": {"learning_rate": 3e-3}, "alpha": 0.5,
        "hidden_weight": 1.0,
        "trainer": {"model_dir": str(tmp_path / "student"),
                    "steps_per_loop": 10, "seed": 1}})
    lines = []
    result = distill.run(cfg, log=lines.append)
    assert any("teacher outputs for 320 texts (320 labeled; 320 rows)"
               in line for line in lines), lines
    assert result.test["accuracy"] >= 0.85, (result.test, teacher.test)
    _, spec = read_spec(tmp_path / "student")
    assert spec.long_document and spec.window_pooling == "max"
