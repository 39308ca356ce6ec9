"""The similarity kind (a bi-encoder, one folder): scored pairs are read,
the model learns cosine scores, and the export takes two strings and
returns their score, equal to evaluation's."""

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import cli, tasks
from bert_tf.serving import export as export_lib
from bert_tf.tasks.similarity.data import load_local_pairs
from bert_tf.tasks.similarity.model import BertBiEncoder
from bert_tf.text.vocab import Vocab
from conftest import (assert_bf16_export_agrees, assert_int8_export_agrees,
                      finetune_toy)
from test_export import HOSTILE, run_serving_check
from toy_task import ENCODER, VOCAB, finetune_config

POSITIVE, NEGATIVE = ["good", "great", "fine"], ["bad", "awful", "dull"]


def write_toy_pairs(directory, seed=0):
    """Pairs of toy reviews scored 1.0 when both adjectives share a
    sentiment, 0.0 when they differ."""
    rng = np.random.default_rng(seed)

    def review():
        good = rng.random() < 0.5
        word = rng.choice(POSITIVE if good else NEGATIVE)
        filler = " ".join(rng.choice(["long", "short", "new"],
                                     int(rng.integers(0, 4))))
        return good, f"the film was {word} and {filler}".strip()

    for split, n in (("train", 320), ("dev", 64), ("test", 64)):
        lines = ["a\tb\tscore"]
        for _ in range(n):
            (good_a, a), (good_b, b) = review(), review()
            lines.append(f"{a}\t{b}\t{1.0 if good_a == good_b else 0.0}")
        (directory / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    Vocab(tuple(VOCAB)).save(directory / "vocab.txt")


def toy_pairs_config(directory, **overrides):
    return finetune_config({
        "task": {"kind": "similarity", "name": "local",
                 "train_file": str(directory / "train.tsv"),
                 "validation_file": str(directory / "dev.tsv"),
                 "test_file": str(directory / "test.tsv"),
                 "text": "a", "text_b": "b", "label": "score"},
        "vocab": str(directory / "vocab.txt"), "encoder": dict(ENCODER),
        "seq_length": 16, "batch_size": 32, "epochs": 6,
        "optimizer": {"learning_rate": 3e-3},
        "trainer": {"model_dir": str(directory / "run"),
                    "steps_per_loop": 5, "seed": 1}}, overrides)


def test_kind_is_found_by_its_folder():
    assert "similarity" in tasks.fine_tuned_kinds()
    assert tasks.get_task_class("similarity").__name__ == "Similarity"


def test_local_pairs_are_read_and_checked(tmp_path):
    write_toy_pairs(tmp_path)
    data = load_local_pairs(tmp_path / "train.tsv", text="a", text_b="b",
                            label="score")
    texts, texts_b, scores = data.split("train")
    assert data.size("train") == 320 and set(scores) == {0.0, 1.0}
    (tmp_path / "bad.tsv").write_text("a\tb\tscore\nx\ty\t3\n")
    with pytest.raises(ValueError, match=r"bad.tsv: scores must be in"):
        load_local_pairs(tmp_path / "bad.tsv", text="a", text_b="b",
                         label="score")
    with pytest.raises(ValueError, match="no column 'text_b'"):
        load_local_pairs(tmp_path / "train.tsv", text="a", label="score")


def test_bi_encoder_scores_are_cosines():
    from bert_tf.models.encoder import BertEncoder

    model = BertBiEncoder(BertEncoder.from_preset("bert_tiny"))
    rng = np.random.default_rng(0)
    ids = rng.integers(1000, 2000, (3, 2, 8)).astype("int32")
    x = {"input_word_ids": ids, "input_mask": np.ones_like(ids),
         "input_type_ids": np.zeros_like(ids)}
    flat = {k: v.reshape(6, 8) for k, v in x.items()}
    vectors = model.embed(flat).numpy().reshape(3, 2, -1)
    np.testing.assert_allclose(model(x).numpy(),
                               (vectors[:, 0] * vectors[:, 1]).sum(-1),
                               atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=-1), 1.0,
                               atol=1e-5)


@pytest.fixture(scope="module")
def pairs_run(tmp_path_factory):
    return finetune_toy(tmp_path_factory, "pairs", write_toy_pairs,
                        toy_pairs_config)


@pytest.mark.slow
def test_finetune_learns_the_scores(pairs_run):
    _, result = pairs_run
    spearman = [e["spearman"] for e in result.eval_history]
    assert result.best["value"] == max(spearman) > 0.8
    assert spearman[-1] > spearman[0]
    assert result.test["spearman"] > 0.8


@pytest.mark.slow
def test_export_scores_two_strings_like_evaluation(pairs_run, tmp_path,
                                                   capsys):
    directory, _ = pairs_run
    out = tmp_path / "export" / "similarity" / "1"
    report = export_lib.export_model(directory / "run", out,
                                     log=lambda *a: None)
    assert report["kind"] == "similarity"
    assert report["signatures"] == ["serving_default", "embed"]
    assert "FastBertNormalize" in report["ops"]["tf_text"] or \
        report["ops"]["tf_text"]  # tokenization inside the graph
    loaded = export_lib.load_exported(out)
    serve = loaded.signatures["serving_default"]
    a = ["the film was good", "the film was bad and long", ""]
    b = ["the film was great and new", "the film was fine", "the film"]
    scores = serve(text=tf.constant(a), text_b=tf.constant(b))["score"]
    task, model, vocab, _ = tasks.load_finetuned(directory / "run")
    np.testing.assert_allclose(scores.numpy(),
                               task.scores(model, a, b, vocab), atol=1e-5)
    assert scores.numpy()[0] > scores.numpy()[1]
    embed = loaded.signatures["embed"](text=tf.constant(a))["embedding"]
    np.testing.assert_allclose(
        (embed.numpy()[:2] * loaded.signatures["embed"](
            text=tf.constant(b[:2]))["embedding"].numpy()).sum(-1),
        scores.numpy()[:2], atol=1e-5)
    # The C API program serves it with no Python in the path.
    lines = run_serving_check(out, [f"{x}\t{y}" for x, y in zip(a, b)],
                              tmp_path)
    np.testing.assert_allclose([float(line.split("score=")[1])
                                for line in lines], scores.numpy(),
                               atol=1e-5)
    hostile = serve(text=tf.constant(HOSTILE),
                    text_b=tf.constant(HOSTILE[::-1]))["score"].numpy()
    assert hostile.shape == (len(HOSTILE),) and np.isfinite(hostile).all()
    with pytest.raises(tf.errors.InvalidArgumentError, match="same number"):
        serve(text=tf.constant(a), text_b=tf.constant(b[:2]))
    assert cli.main(["predict", "--model", str(out),
                     "the film was good\tthe film was great"]) == 0
    assert "the film was good\tthe film was great" in capsys.readouterr().out
    assert cli.main(["predict", "--model", str(out), "no tab here"]) == 2
    assert "two texts separated by a TAB" in capsys.readouterr().err


@pytest.mark.slow
def test_bf16_export_agrees_with_fp32(pairs_run, tmp_path):
    directory, _ = pairs_run
    fp32 = tmp_path / "fp32" / "similarity" / "1"
    export_lib.export_model(directory / "run", fp32, log=lambda *a: None)
    request = {"text": ["the film was good", ""],
               "text_b": ["the film was great and new", "the film"]}
    assert_bf16_export_agrees(directory / "run", fp32, tmp_path, [request])
    hostile = {"text": HOSTILE, "text_b": HOSTILE[::-1]}
    assert_int8_export_agrees(directory / "run", fp32, tmp_path,
                              [request, hostile], atol=3e-2)

