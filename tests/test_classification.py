"""Task data: GLUE readers (mock_data), local files, the RT sample, metrics,
the input pipeline and `BertClassifier` in plain Keras."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import SPECIAL, TINY, random_inputs

from bert_tf.models.encoder import BertEncoder
from bert_tf.tasks import metrics
from bert_tf.tasks.classification.data import (GLUE_TASKS, load_glue,
                                               load_local, load_rt_sentiment,
                                               classification_dataset)
from bert_tf.tasks.classification.model import BertClassifier
from bert_tf.text.preprocessor import BertPreprocessor

# --- metrics against hand-computed values ----------------------------------

# labels 1 1 0 0 1 0, predictions 1 0 1 0 1 0: TP 2, FP 1, FN 1, TN 2.
LABELS = [1, 1, 0, 0, 1, 0]
PREDICTIONS = [1, 0, 1, 0, 1, 0]


def test_classification_metrics_match_hand_computed_values():
    assert metrics.accuracy(LABELS, PREDICTIONS) == pytest.approx(4 / 6)
    assert metrics.f1(LABELS, PREDICTIONS) == pytest.approx(2 / 3)
    # MCC = (2*2 - 1*1) / sqrt(3*3*3*3) = 3/9
    assert metrics.mcc(LABELS, PREDICTIONS) == pytest.approx(1 / 3)
    assert metrics.mcc([1, 0], [1, 1]) == 0.0  # degenerate: no negatives


def test_correlations_match_hand_computed_values():
    x, y = [1.0, 2.0, 3.0, 4.0], [1.0, 3.0, 2.0, 4.0]
    # Pearson: cov = 4 / var 5 -> 0.8; ranks equal values -> Spearman 0.8.
    assert metrics.pearson(x, y) == pytest.approx(0.8)
    assert metrics.spearman(x, y) == pytest.approx(0.8)
    # Ties share the average rank: ranks of [1, 1, 2] are [1.5, 1.5, 3].
    np.testing.assert_allclose(metrics._ranks([1, 1, 2]), [1.5, 1.5, 3])
    assert metrics.spearman([1, 2, 3], [10, 100, 1000]) == pytest.approx(1)
    with pytest.raises(ValueError, match="Unknown metric"):
        metrics.compute(("auc",), [1], [1])


# --- GLUE through TFDS mock data ---------------------------------------------

@pytest.mark.parametrize("name", sorted(GLUE_TASKS))
def test_glue_reader_yields_typed_examples(name):
    tfds = pytest.importorskip("tensorflow_datasets")
    spec = GLUE_TASKS[name]
    with tfds.testing.mock_data(num_examples=5):
        task = load_glue(name)
        examples = list(task.split("train").take(3))
        validation = list(task.split("validation").take(1))
    assert task.name == f"glue/{name}" and task.pair == bool(spec.text_b)
    assert task.labels == spec.labels and task.metrics == spec.metrics
    assert len(examples) == 3 and validation
    for example in examples:
        assert example["text"].dtype == tf.string
        assert ("text_b" in example) == task.pair
        if task.is_regression:
            assert example["label"].dtype == tf.float32
        else:
            assert example["label"].dtype == tf.int64
            assert 0 <= int(example["label"]) < task.num_classes
    if name == "mnli":
        assert "validation_mismatched" in task.splits


def test_glue_metric_on_a_fixture():
    """Each task's metric set over a small fixture equals hand values."""
    expected = {"mcc": 1 / 3, "accuracy": 4 / 6, "f1": 2 / 3}
    for name, spec in GLUE_TASKS.items():
        if spec.labels:
            got = metrics.compute(spec.metrics, LABELS, PREDICTIONS)
            assert got == pytest.approx({m: expected[m]
                                         for m in spec.metrics}), name
    got = metrics.compute(GLUE_TASKS["stsb"].metrics, [1.0, 2.0, 3.0, 4.0],
                          [1.0, 3.0, 2.0, 4.0])
    assert got == pytest.approx({"pearson": 0.8, "spearman": 0.8})


def test_unknown_glue_task():
    with pytest.raises(ValueError, match="Unknown GLUE task 'sst3'"):
        load_glue("sst3")


# --- local files ---------------------------------------------------------------

def test_local_tsv_csv_jsonl(tmp_path):
    (tmp_path / "train.tsv").write_text(
        "sentence\tother\tlabel\nfine film\tx\tpos\nawful\ty\tneg\n")
    (tmp_path / "dev.csv").write_text(
        'question,answer,label\n"a, b",c,neg\n')
    rows = [{"a": "x", "b": "y", "score": 0.5},
            {"a": "p", "b": "q", "score": 2}]
    (tmp_path / "reg.jsonl").write_text(
        "\n".join(json.dumps(r) for r in rows) + "\n")
    task = load_local(tmp_path / "train.tsv", text="sentence")
    assert task.labels == ("neg", "pos") and task.metrics == ("accuracy",
                                                              "f1")
    first = next(iter(task.split("train")))
    assert first["text"].numpy() == b"fine film" and int(first["label"]) == 1
    pair = load_local(tmp_path / "dev.csv", text="question",
                      text_b="answer", labels=["neg", "pos"])
    example = next(iter(pair.split("train")))
    assert example["text"].numpy() == b"a, b" and pair.pair
    reg = load_local(tmp_path / "reg.jsonl", text="a", text_b="b",
                     label="score", regression=True)
    assert reg.is_regression and reg.num_classes == 1
    assert [float(e["label"]) for e in reg.split("train")] == [0.5, 2.0]


def test_local_files_bad_input(tmp_path):
    (tmp_path / "t.tsv").write_text("text\tlabel\nok\tpos\n")
    with pytest.raises(ValueError, match="no column 'sentence'.*text, label"):
        load_local(tmp_path / "t.tsv", text="sentence")
    with pytest.raises(ValueError, match=r"label\(s\) \['pos'\] are not"):
        load_local(tmp_path / "t.tsv", labels=["a", "b"])
    with pytest.raises(FileNotFoundError, match="missing.tsv"):
        load_local(tmp_path / "missing.tsv")
    (tmp_path / "bad.jsonl").write_text('{"text": "a"\n')
    with pytest.raises(ValueError, match="bad.jsonl:1: not valid JSON"):
        load_local(tmp_path / "bad.jsonl")
    (tmp_path / "r.tsv").write_text("text\tlabel\nok\thigh\n")
    with pytest.raises(ValueError, match="regression labels must be numbers"):
        load_local(tmp_path / "r.tsv", regression=True)


# --- the real RT sentiment sample ----------------------------------------------

def test_rt_sentiment_sample_split():
    task = load_rt_sentiment()
    # 10,605 sentences, 37 neutral dropped: 80/10/10 of 10,568.
    assert task.sizes == {"train": 8454, "validation": 1057, "test": 1057}
    assert task.labels == ("negative", "positive")
    texts = {}
    for split in task.splits:
        batch = next(iter(task.split(split).batch(20000)))
        texts[split] = set(batch["text"].numpy())
        assert 0.45 < batch["label"].numpy().mean() < 0.55
    assert not texts["train"] & texts["test"]
    again = load_rt_sentiment()
    first = next(iter(again.split("test")))
    assert first["text"].numpy() == next(iter(task.split("test")))[
        "text"].numpy()


# --- pipeline and model --------------------------------------------------------

VOCAB = SPECIAL + ["good", "bad", "film", "the", "very"]


def _toy_task(tmp_path, n=40, pair=False):
    rng = np.random.default_rng(0)
    lines = ["text\ttext_b\tlabel"]
    for i in range(n):
        good = rng.random() < 0.5
        words = " ".join(["very"] * int(rng.integers(0, 12)))
        lines.append(f"the film {words} {'good' if good else 'bad'}\tthe "
                     f"film\t{'pos' if good else 'neg'}")
    (tmp_path / "toy.tsv").write_text("\n".join(lines) + "\n")
    return load_local(tmp_path / "toy.tsv", tmp_path / "toy.tsv",
                      text_b="text_b" if pair else "")


@pytest.mark.slow
def test_task_dataset_fixed_and_dynamic_length(tmp_path):
    task = _toy_task(tmp_path, pair=True)
    pre = BertPreprocessor(VOCAB, seq_length=24)
    fixed = list(classification_dataset(task, "train", pre, 8))
    assert fixed[0][0]["input_word_ids"].shape == (8, 24)
    dynamic = list(classification_dataset(task, "train", pre, 8,
                                          dynamic_length=True))
    assert sum(len(y) for _, y in dynamic) == 40
    for x, _ in dynamic:  # each batch cut to its longest row
        lengths = x["input_mask"].numpy().sum(1)
        assert x["input_word_ids"].shape[1] == lengths.max() <= 24
    # Same examples, same ids, whatever the batching.
    def rows(batches):
        return sorted(tuple(r[r > 0]) for x, _ in batches
                      for r in x["input_word_ids"].numpy())
    assert rows(fixed) == rows(dynamic)


@pytest.mark.slow
@pytest.mark.parametrize("num_classes", [3, 1])
def test_classifier_fits_with_standard_keras_losses(num_classes):
    model = BertClassifier(BertEncoder(**TINY), num_classes)
    x = random_inputs(batch=8, length=10)
    if num_classes == 1:
        y = np.linspace(0, 5, 8).astype("float32")
        model.compile(optimizer=keras.optimizers.Adam(3e-3), loss="mse")
    else:
        y = np.arange(8) % 3
        model.compile(optimizer=keras.optimizers.Adam(1e-3),
                      loss=keras.losses.SparseCategoricalCrossentropy(
                          from_logits=True), metrics=["accuracy"])
    history = model.fit(x, y, epochs=30, batch_size=8, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < losses[0] * 0.7
    assert model.predict(x, verbose=0).shape == (8, num_classes)
    restored = BertClassifier.from_config(model.get_config())
    assert restored.num_classes == num_classes
    with pytest.raises(ValueError, match="num_classes = 0"):
        BertClassifier(BertEncoder(**TINY), 0)


def test_mean_pooling_reads_the_mean_of_real_tokens():
    keras.utils.set_random_seed(0)
    encoder = BertEncoder(**TINY)
    model = BertClassifier(encoder, 3, dropout=0.0, pooling="mean")
    x = random_inputs(batch=2, length=8, pad_from=5)
    sequence = encoder(x)["sequence_output"].numpy()
    mask = x["input_mask"][..., None]  # the last row is padded from 5 on
    mean = (sequence * mask).sum(axis=1) / mask.sum(axis=1)
    want = model.head(mean).numpy()
    np.testing.assert_allclose(model(x).numpy(), want, atol=1e-5)
    restored = BertClassifier.from_config(model.get_config())
    assert restored.pooling == "mean"
    with pytest.raises(ValueError, match="pooling = 'max'"):
        BertClassifier(encoder, 2, pooling="max")


def test_frozen_layers_keep_their_weights():
    keras.utils.set_random_seed(0)
    encoder = BertEncoder(**TINY)
    encoder.freeze(1)
    model = BertClassifier(encoder, 2)
    frozen = [v.numpy().copy() for v in
              encoder.embeddings.weights +
              encoder.transformer_layers[0].weights]
    trained = [v.numpy().copy() for v in
               encoder.transformer_layers[1].weights]
    model.compile(optimizer=keras.optimizers.Adam(1e-2),
                  loss=keras.losses.SparseCategoricalCrossentropy(
                      from_logits=True))
    model.fit(random_inputs(batch=4, length=8), np.array([0, 1, 0, 1]),
              epochs=2, verbose=0)
    after = encoder.embeddings.weights + encoder.transformer_layers[0].weights
    for before, variable in zip(frozen, after):
        np.testing.assert_array_equal(before, variable.numpy())
    assert any(np.abs(b - v.numpy()).max() > 0 for b, v in zip(
        trained, encoder.transformer_layers[1].weights))
    with pytest.raises(ValueError, match="freeze_layers = 3: must be in"):
        encoder.freeze(3)
