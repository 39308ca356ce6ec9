"""Distillation: a tiny fine-tuned teacher teaches a tinier student."""

import dataclasses
import re

import numpy as np
import pytest
import tensorflow as tf
import yaml

from bert_tf import distill
from toy_task import ENCODER, toy_config


def distill_config(teacher_dir, toy_dir, out, **overrides):
    base = toy_config(toy_dir)
    data = {
        "teacher": str(teacher_dir),
        "init": "",
        "vocab": str(toy_dir / "vocab.txt"),
        "encoder": {**ENCODER, "intermediate_size": 32},
        "seq_length": base.seq_length, "batch_size": 32, "epochs": 12,
        "optimizer": {"learning_rate": 3e-3},
        "temperature": 2.0, "alpha": 0.5,
        "trainer": {"model_dir": str(out), "steps_per_loop": 5, "seed": 1},
    }
    for key, value in overrides.items():
        data[key] = value
    return distill.load_dict(data)


def agreement(model_a, model_b, x):
    return float(np.mean(np.argmax(model_a(x), -1) ==
                         np.argmax(model_b(x), -1)))


@pytest.mark.slow
def test_student_learns_the_teacher(toy_run, tmp_path):
    from bert_tf.tasks import load_finetuned
    from bert_tf.text.preprocessor import BertPreprocessor
    toy_dir, _ = toy_run
    teacher_dir = toy_dir / "run"
    cfg = distill_config(teacher_dir, toy_dir, tmp_path / "student")
    lines = []
    result = distill.run(cfg, log=lines.append)
    assert any("teacher outputs for 320 texts" in line for line in lines)
    losses = [h["loss"] for h in result.history]
    assert losses[-1] < losses[0] * 0.8, losses
    # The student's best/ is an ordinary run: it loads, and agrees with
    # the teacher far more than chance.
    _, teacher, vocab, _ = load_finetuned(teacher_dir)
    _, student, _, best = load_finetuned(tmp_path / "student")
    assert student.encoder.config.intermediate_size == 32  # the tinier
    texts = [line.split("\t")[0] for line in
             (toy_dir / "test.tsv").read_text().splitlines()[1:]]
    x = BertPreprocessor(vocab, 16)(tf.constant(texts))
    assert agreement(student, teacher, x) >= 0.9
    assert result.test["accuracy"] >= 0.85


@pytest.mark.slow
def test_truncated_teacher_encoder_unlabeled_augmented_and_matched(
        toy_run, tmp_path):
    """Every source of the transfer set at once (the training split,
    unlabeled lines, augmented copies) and intermediate matching of the
    student's block to the teacher's."""
    toy_dir, _ = toy_run
    cfg = distill_config(toy_dir / "run", toy_dir, tmp_path / "s",
                         init="teacher", layers=[0], epochs=1,
                         encoder=dict(ENCODER), augment=1,
                         hidden_weight=1.0, attention_weight=1.0,
                         unlabeled=[f"lines:{tmp_path / 'more.txt'}"])
    (tmp_path / "more.txt").write_text(
        "\n".join(["the film was great and new"] * 40 +
                  ["the film was dull"] * 40) + "\n")
    lines = []
    result = distill.run(cfg, log=lines.append)
    text = "\n".join(lines)
    assert re.search(r"teacher outputs for 720 texts \(320 labeled, 80 "
                     r"unlabeled, 320 augmented; 720 rows\)", text), text
    assert "blocks [0]" in text
    assert "teacher blocks [0] (hidden x1, attention x1)" in text
    assert result.test["accuracy"] >= 0.9  # starts from the teacher


def test_augmented_copies_keep_words_and_replace_some():
    from bert_tf.distill.transfer import augmented_texts
    texts = ["the film was great and new", "dull", ""]
    copies = augmented_texts(texts, 3, 0.3, ["alpha", "beta"], seed=0)
    assert len(copies) == 6  # the empty text has no copy
    for copy, source in zip(copies, [texts[0]] * 3 + [texts[1]] * 3):
        words, original = copy.split(), source.split()
        assert len(words) == len(original)
        changed = [w for w, o in zip(words, original) if w != o]
        assert changed and set(changed) <= {"[MASK]", "alpha", "beta"}


@pytest.mark.slow
def test_bad_setups_fail_before_training(toy_run, tmp_path):
    toy_dir, _ = toy_run
    teacher = toy_dir / "run"
    other_vocab = tmp_path / "vocab.txt"
    tokens = (toy_dir / "vocab.txt").read_text().splitlines()
    other_vocab.write_text("\n".join(tokens + ["extra"]) + "\n")
    cases = [
        ({"vocab": str(other_vocab),
          "encoder": {**ENCODER, "vocab_size": len(tokens) + 1}},
         "differs from the teacher's"),
        ({"init": "teacher", "layers": [0, 3]},
         "the init encoder has 1 blocks"),
    ]
    for overrides, message in cases:
        cfg = distill_config(teacher, toy_dir, tmp_path / "x", **overrides)
        with pytest.raises(ValueError, match=message):
            distill.run(cfg, log=lambda *a: None)
        assert not (tmp_path / "x").exists()
    chooser = tmp_path / "chooser" / "best"
    chooser.mkdir(parents=True)
    (chooser / "task.yaml").write_text(yaml.safe_dump(
        {"kind": "multiple_choice", "name": "sample:next_sentence"}))
    cfg = distill_config(chooser.parent, toy_dir, tmp_path / "x")
    with pytest.raises(ValueError, match="supports classification, "
                                         "span_qa, tagging"):
        distill.run(cfg, log=lambda *a: None)
    # An export of an older bert_tf: no encoder shape recorded.
    old_export = tmp_path / "old_export" / "1"
    (old_export / "assets.extra").mkdir(parents=True)
    (old_export / "saved_model.pb").write_bytes(b"")
    (old_export / "assets.extra" / "bert_tf.json").write_text(
        '{"kind": "classification", "name": "local"}')
    cfg = distill_config(old_export, toy_dir, tmp_path / "x")
    with pytest.raises(ValueError, match="older bert_tf.*export the run "
                                         "again"):
        distill.run(cfg, log=lambda *a: None)
    # Intermediate matching: a block past the teacher's, or attention
    # across head counts.
    for overrides, message in [
            ({"hidden_weight": 1.0, "layer_map": [3]},
             r"layer_map = \[3\]: one teacher block \(0 to 0\)"),
            ({"attention_weight": 1.0,
              "encoder": {**ENCODER, "num_heads": 1}},
             "equal head counts")]:
        cfg = distill_config(teacher, toy_dir, tmp_path / "x", **overrides)
        with pytest.raises(ValueError, match=message):
            distill.run(cfg, log=lambda *a: None)
        assert not (tmp_path / "x").exists()
    empty = tmp_path / "empty.tsv"
    empty.write_text("sentence\tlabel\n")
    cfg = distill_config(teacher, toy_dir, tmp_path / "x",
                         task={"train_file": str(empty)})
    with pytest.raises(ValueError, match="empty|no examples|holds no"):
        distill.run(cfg, log=lambda *a: None)
    with pytest.raises(ValueError, match="alpha = 2"):
        distill_config(teacher, toy_dir, tmp_path / "x", alpha=2.0)


@pytest.mark.slow
def test_tagging_teacher_teaches_a_shallower_student(tmp_path_factory):
    """A 2-block toy tagger into a student that keeps its block 1 only:
    the student's entity F1 and agreement with the teacher are high, and
    its loss falls."""
    from conftest import finetune_toy
    from toy_tagging import toy_tagging_config, write_toy_tagging
    directory, teacher = finetune_toy(tmp_path_factory, "tag_teacher",
                                      write_toy_tagging, toy_tagging_config)
    out = tmp_path_factory.mktemp("tag_student") / "run"
    cfg = distill.load_dict({
        "teacher": str(directory / "run"), "init": "teacher",
        "layers": [1], "seq_length": 16, "batch_size": 32, "epochs": 4,
        "optimizer": {"learning_rate": 3e-3}, "temperature": 2.0,
        "alpha": 0.5,
        "trainer": {"model_dir": str(out), "steps_per_loop": 5, "seed": 1}})
    lines = []
    result = distill.run(cfg, log=lines.append)
    assert any("rows) in" in line for line in lines), lines
    losses = [h["loss"] for h in result.history]
    assert losses[-1] < losses[0], losses
    assert result.test["f1"] >= teacher.test["f1"] - 0.15, (
        result.test, teacher.test)


def test_intermediate_losses_vanish_for_the_teachers_own_blocks():
    """A student that is a copy of the 2-block teacher matches it
    exactly: with the identity map both intermediate losses are 0, and a
    differently initialised student's are not. `head_on` gives the
    model's own outputs."""
    import keras

    from bert_tf.models.distiller import Distiller
    from bert_tf.models.encoder import BertEncoder
    from bert_tf.tasks.classification.model import BertClassifier

    def classifier(seed):
        keras.utils.set_random_seed(seed)
        return BertClassifier(BertEncoder(
            vocab_size=50, hidden_size=16, num_layers=2, num_heads=2,
            intermediate_size=32, max_position_embeddings=16), 2,
            pooling="mean")

    teacher, copy, other = classifier(0), classifier(0), classifier(1)
    ids = np.random.default_rng(0).integers(5, 50, (4, 8)).astype("int32")
    mask = np.ones_like(ids)
    mask[:, 6:] = 0
    x = {"input_word_ids": ids, "input_mask": mask,
         "input_type_ids": np.zeros_like(ids)}
    states = teacher.encoder(x)
    np.testing.assert_allclose(teacher.head_on(states, x), teacher(x),
                               atol=1e-6)
    losses = {}
    for name, student in (("copy", copy), ("other", other)):
        distiller = Distiller(student, teacher, hidden_weight=1.0,
                              attention_weight=1.0, layer_map=[0, 1])
        losses[name] = float(distiller.intermediate_loss(
            student.encoder(x), states, mask))
    assert losses["copy"] == pytest.approx(0.0, abs=1e-6)
    assert losses["other"] > 0.1, losses


def _teacher_and_student(tmp_path, task, encoder, **student):
    """(the teacher's `FinetuneResult`, the student's `DistillConfig`): a
    toy teacher of `task` fine-tuned in tmp_path/teacher, and a student
    with half its feed-forward width (`student`: more distill keys)."""
    from toy_task import finetune_config
    from bert_tf import finetune
    common = {"vocab": str(tmp_path / "vocab.txt"), "seq_length": 16,
              "batch_size": 32, "epochs": 6,
              "optimizer": {"learning_rate": 3e-3}}
    teacher = finetune.run(finetune_config({
        **common, "task": task, "encoder": encoder,
        "trainer": {"model_dir": str(tmp_path / "teacher"),
                    "steps_per_loop": 5, "seed": 1}}, {}),
        log=lambda *a: None)
    return teacher, distill.load_dict({
        **common, "teacher": str(tmp_path / "teacher"), "init": "",
        "encoder": {**encoder, "intermediate_size": 32}, **student,
        "trainer": {"model_dir": str(tmp_path / "student"),
                    "steps_per_loop": 5, "seed": 1}})


@pytest.mark.slow
def test_pair_teacher_teaches_from_text_pairs(tmp_path):
    """A toy sentence-pair classifier (the label is the second text's
    sentiment) teaches a student with half its feed-forward width: the
    transfer set holds the pairs, and the student learns them."""
    from toy_task import WORDS
    from bert_tf.text.vocab import SPECIAL_TOKENS, Vocab
    rng = np.random.default_rng(0)
    for split, n in (("train", 320), ("dev", 64), ("test", 64)):
        lines = ["first\tsecond\tlabel"]
        for _ in range(n):
            good = rng.random() < 0.5
            word = rng.choice(["good", "great"] if good else ["bad", "dull"])
            other = rng.choice(["good", "bad", "new"])
            lines.append(f"the film was {other}\tit was {word}\t"
                         f"{'positive' if good else 'negative'}")
        (tmp_path / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    Vocab(tuple(SPECIAL_TOKENS) + tuple(WORDS) + ("it",)).save(
        tmp_path / "vocab.txt")
    task = {"name": "local", "text": "first", "text_b": "second",
            **{f"{s}_file": str(tmp_path / f"{f}.tsv") for s, f in (
                ("train", "train"), ("validation", "dev"),
                ("test", "test"))}}
    encoder = {**ENCODER, "vocab_size": len(SPECIAL_TOKENS) + len(WORDS) + 1}
    teacher, cfg = _teacher_and_student(tmp_path, task, encoder)
    lines = []
    result = distill.run(cfg, log=lines.append)
    assert any("teacher outputs for 320 texts" in line for line in lines)
    assert any("pairs" in line for line in lines), lines
    assert teacher.test["accuracy"] >= 0.9, teacher.test
    assert result.test["accuracy"] >= 0.9, result.test
    with pytest.raises(ValueError, match="a pair teacher reads text pairs"):
        distill.run(dataclasses.replace(cfg, augment=1),
                    log=lambda *a: None)


@pytest.mark.slow
def test_regression_teacher_teaches_scores(tmp_path):
    """A toy regression teacher (a score per adjective) teaches a student
    with half its feed-forward width the squared error to its scores;
    an augmented copy of each text joins the transfer set unlabeled."""
    from toy_task import write_toy_task
    write_toy_task(tmp_path)
    score = {"great": 1.0, "good": 0.8, "fine": 0.6, "dull": 0.3,
             "bad": 0.2, "awful": 0.0}
    for split in ("train", "dev", "test"):
        rows = (tmp_path / f"{split}.tsv").read_text().splitlines()[1:]
        (tmp_path / f"{split}.tsv").write_text("sentence\tscore\n" + "".join(
            f"{text}\t{score[text.split()[3]]}\n"
            for text in (r.split("\t")[0] for r in rows)))
    task = {"name": "local", "text": "sentence", "label": "score",
            "regression": True,
            **{f"{s}_file": str(tmp_path / f"{f}.tsv") for s, f in (
                ("train", "train"), ("validation", "dev"),
                ("test", "test"))}}
    teacher, cfg = _teacher_and_student(tmp_path, task, dict(ENCODER),
                                        augment=1)
    lines = []
    result = distill.run(cfg, log=lines.append)
    assert any("320 labeled, 320 augmented" in line for line in lines)
    losses = [h["loss"] for h in result.history]
    assert losses[-1] < losses[0] * 0.5, losses
    assert teacher.test["pearson"] >= 0.9, teacher.test
    assert result.test["pearson"] >= 0.9, result.test



def test_the_soft_loss_is_scaled_by_the_temperature_squared():
    """Hinton et al.'s T^2: the soft term at temperature T is T^2 times the
    KL divergence of the softened distributions (checked at T > 1, where
    leaving the factor out changes the value)."""
    from bert_tf.models.distiller import distillation_loss

    rng = np.random.default_rng(0)
    student = rng.normal(size=(6, 4)).astype("float32")
    teacher = rng.normal(size=(6, 4)).astype("float32") * 3

    def log_softmax(x):
        x = x - x.max(-1, keepdims=True)
        return x - np.log(np.exp(x).sum(-1, keepdims=True))

    for temperature in (1.0, 2.0, 4.0):
        soft_teacher = log_softmax(teacher / temperature)
        kl = (np.exp(soft_teacher) * (soft_teacher - log_softmax(
            student / temperature))).sum(-1).mean()
        got = float(distillation_loss(np.array([0, 1, 2, 3, -1, -1]),
                                      student, teacher, temperature, 0.0))
        np.testing.assert_allclose(got, temperature ** 2 * kl, rtol=1e-5)
