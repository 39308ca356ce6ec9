"""Multiple choice: readers (TFDS hellaswag / copa through mock data, SWAG
CSV, JSONL, the real next-sentence set), features, the model, fine-tuning
on a toy task, and the export from raw strings to the chosen answer."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import (assert_bf16_export_agrees, assert_int8_export_agrees,
                      finetune_toy)
from test_export import HOSTILE, run_serving_check
from toy_choices import (ENCODER, VOCAB, toy_choices, toy_choices_config,
                         write_swag_csv, write_toy_choices)

from bert_tf import cli
from bert_tf.models.encoder import BertEncoder
from bert_tf.serving import export as export_lib
from bert_tf.tasks.multiple_choice import data as swag
from bert_tf.tasks.multiple_choice.model import BertMultipleChoice
from bert_tf.tasks.multiple_choice.task import choice_features, choose
from bert_tf.text.preprocessor import BertPreprocessor


def test_jsonl_and_swag_csv_readers(tmp_path):
    examples = toy_choices(5, np.random.default_rng(0))
    write_swag_csv(tmp_path / "train.csv", examples)
    with open(tmp_path / "train.jsonl", "w") as f:
        for context, choices, label in examples:
            f.write(json.dumps({"context": context, "choices": choices,
                                "label": label}) + "\n")
    from_csv = swag.load_local_choices(tmp_path / "train.csv")
    from_jsonl = swag.load_local_choices(tmp_path / "train.jsonl")
    assert from_csv.num_choices == 4
    assert from_csv.splits["train"] == from_jsonl.splits["train"] == [
        (c, list(x), y) for c, x, y in examples]
    # The SWAG layout: choice i is sent2 + ending<i>.
    (tmp_path / "swag.csv").write_text(
        "video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,"
        "ending1,label\nv,0,x,She opens the door.,She,gold,walks in.,"
        "flies away.,0\n")
    assert swag.read_swag_csv(tmp_path / "swag.csv") == [
        ("She opens the door.", ["She walks in.", "She flies away."], 0)]
    # Bad files: the error names the file and line or example.
    (tmp_path / "bad.jsonl").write_text('{"context": "a", "label": 0}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:1: expected"):
        swag.read_choices_jsonl(tmp_path / "bad.jsonl")
    (tmp_path / "uneven.jsonl").write_text(
        '{"context": "a", "choices": ["x", "y"], "label": 0}\n'
        '{"context": "b", "choices": ["x", "y", "z"], "label": 2}\n')
    with pytest.raises(ValueError, match="example 0: 2 choices"):
        swag.load_local_choices(tmp_path / "uneven.jsonl")
    (tmp_path / "label.jsonl").write_text(
        '{"context": "a", "choices": ["x", "y"], "label": 2}\n')
    with pytest.raises(ValueError, match="label 2 is not a choice index"):
        swag.load_local_choices(tmp_path / "label.jsonl")
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="not the SWAG layout"):
        swag.read_swag_csv(tmp_path / "other.csv")


def test_tfds_hellaswag_and_copa_through_mock_data():
    import tensorflow_datasets as tfds

    def hellaswag(self, split, **kwargs):
        return tf.data.Dataset.from_tensors({
            "context": "A man is on a roof.", "activity_label": "Roofing",
            "endings": ["He pulls up shingles.", "He swims.", "He naps.",
                        "He sings."],
            "label": 0, "split_type": "indomain",
            "source_id": "x"}).repeat(3)

    with tfds.testing.mock_data(as_dataset_fn=hellaswag):
        data = swag.load_choices("hellaswag")
    assert data.num_choices == 4 and set(data.splits) == {
        "train", "validation", "test"}
    assert data.splits["train"][0] == ("A man is on a roof.", [
        "He pulls up shingles.", "He swims.", "He naps.", "He sings."], 0)

    def copa(self, split, **kwargs):
        return tf.data.Dataset.from_tensors({
            "premise": "My body cast a shadow.", "choice1": "The sun rose.",
            "choice2": "The grass was cut.", "question": "cause",
            "label": 0, "idx": 0}).repeat(2)

    with tfds.testing.mock_data(as_dataset_fn=copa):
        data = swag.load_choices("super_glue/copa")
    assert data.splits["validation"][0] == (
        "My body cast a shadow.", ["because the sun rose.",
                                   "because the grass was cut."], 0)


def test_next_sentence_set_is_fixed_and_split_by_document():
    documents = [[f"d{d} s{s} ." for s in range(5)] for d in range(40)]
    splits = swag.next_sentence_examples(documents, seed=0)
    assert {k: len(v) for k, v in splits.items()} == {
        "train": 128, "validation": 16, "test": 16}
    assert splits == swag.next_sentence_examples(documents, seed=0)
    owner = {}
    for split, examples in splits.items():
        for context, choices, label in examples:
            document, sentence = context.split()[:2]
            assert choices[label] == f"{document} s{int(sentence[1:]) + 1} ."
            others = [c.split()[0] for i, c in enumerate(choices)
                      if i != label]
            assert document not in others
            for d in [document] + others:  # no document in two splits
                assert owner.setdefault(d, split) == split


def test_choice_features_pair_the_context_with_each_choice():
    pre = BertPreprocessor(VOCAB, 16)
    context = tf.constant(["ann has a dog .", "bob has a cat ."])
    choices = tf.constant([["the dog is happy .", "the cat ."],
                           ["the fish .", "the cat sleeps today ."]])
    features = choice_features(pre, context, choices)
    assert features["input_word_ids"].shape == (2, 2, 16)
    for b in range(2):
        for c in range(2):
            expected = pre((context[b:b + 1], choices[b, c:c + 1]))
            for name in expected:
                np.testing.assert_array_equal(features[name][b, c],
                                              expected[name][0])
    cut = choice_features(pre, context, choices, fixed_length=False)
    longest = int(np.asarray(features["input_mask"]).sum(-1).max())
    assert longest < 16 and cut["input_mask"].shape == (2, 2, longest)
    np.testing.assert_array_equal(cut["input_word_ids"],
                                  features["input_word_ids"][..., :longest])


def test_choose_masks_padding_choices():
    logits = tf.constant([[1.0, 3.0, 9.0], [0.0, 0.0, 0.0]])
    choices = tf.constant([["a", "b", "pad"], ["x", "y", "z"]])
    out = choose(logits, choices, tf.constant([2, 0]))
    np.testing.assert_allclose(out["probabilities"][0],
                               [0.1192029, 0.8807971, 0], atol=1e-6)
    assert out["choice"].numpy().tolist() == [1, -1]
    assert out["text"].numpy().tolist() == [b"b", b""]
    assert out["probabilities"].numpy()[1].sum() == 0


def test_multiple_choice_model_saves_and_loads(tmp_path):
    model = BertMultipleChoice(BertEncoder(**ENCODER))
    x = {"input_word_ids": np.full((2, 3, 9), 6, "int32"),
         "input_mask": np.ones((2, 3, 9), "int32"),
         "input_type_ids": np.zeros((2, 3, 9), "int32")}
    expected = model(x)
    assert expected.shape == (2, 3)
    model.save(tmp_path / "mc.keras")
    loaded = keras.saving.load_model(tmp_path / "mc.keras")
    np.testing.assert_allclose(loaded(x), expected, atol=1e-6)
    assert set(model.checkpoint_heads()) == {"multiple_choice"}
    # Five choices work with the same weights.
    five = {k: np.concatenate([v, v[:, :2]], axis=1) for k, v in x.items()}
    assert model(five).shape == (2, 5)


@pytest.fixture(scope="module")
def mc_run(tmp_path_factory):
    return finetune_toy(tmp_path_factory, "mc", write_toy_choices,
                        toy_choices_config)


@pytest.fixture(scope="module")
def mc_export(mc_run, tmp_path_factory):
    directory, _ = mc_run
    out = tmp_path_factory.mktemp("export") / "mc" / "1"
    export_lib.export_model(directory / "run", out, log=lambda *a: None)
    return out, export_lib.load_exported(out)


@pytest.mark.slow
def test_fine_tuning_learns_the_toy_task(mc_run):
    _, result = mc_run
    assert result.best["metric"] == "accuracy"
    assert result.test["accuracy"] >= 0.7, result.test  # chance 0.25


@pytest.mark.slow
def test_export_answers_like_evaluation(mc_run, mc_export):
    directory, _ = mc_run
    out, loaded = mc_export
    examples = [json.loads(line) for line in
                (directory / "test.jsonl").read_text().splitlines()]
    serve = loaded.signatures["serving_default"]
    answers = serve(context=tf.constant([e["context"] for e in examples]),
                    choices=tf.constant([e["choices"] for e in examples]))
    accuracy = np.mean(answers["choice"].numpy() ==
                       [e["label"] for e in examples])
    _, result = mc_run
    assert accuracy == pytest.approx(result.test["accuracy"], abs=1e-9)
    best = answers["choice"].numpy()
    assert [t.decode() for t in answers["text"].numpy()] == [
        e["choices"][i] for e, i in zip(examples, best)]
    np.testing.assert_allclose(answers["probabilities"].numpy().sum(1), 1,
                               atol=1e-5)
    # with_count: the padded choice gets nothing; count 0 answers -1.
    padded = loaded.signatures["with_count"](
        context=tf.constant([examples[0]["context"]] * 2),
        choices=tf.constant([examples[0]["choices"]] * 2),
        count=tf.constant([2, 0]))
    assert padded["probabilities"].numpy()[0, 2:].sum() == 0
    assert padded["choice"].numpy()[1] == -1
    # The C API program serves it with no Python.
    lines = run_serving_check(out, ["\t".join(
        [e["context"], *e["choices"]]) for e in examples[:3]], out.parent)
    assert [int(line.split("choice=")[1].split("\t")[0]) for line in lines] \
        == best[:3].tolist()


@pytest.mark.slow
def test_hostile_and_wrong_inputs(mc_export):
    _, loaded = mc_export
    serve = loaded.signatures["serving_default"]
    texts = [t.decode("utf-8", "replace") if isinstance(t, bytes) else t
             for t in HOSTILE]
    out = serve(context=tf.constant(HOSTILE),
                choices=tf.constant([[t, "the dog ."] for t in HOSTILE]))
    assert out["probabilities"].shape == (len(texts), 2)
    assert np.isfinite(out["probabilities"].numpy()).all()
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="same batch size"):
        serve(context=tf.constant(["a", "b"]),
              choices=tf.constant([["x", "y"]]))
    with pytest.raises((tf.errors.InvalidArgumentError, ValueError)):
        serve(context=tf.constant(["a"]), choices=tf.constant(["x", "y"]))


@pytest.mark.slow
def test_bf16_export_agrees_with_fp32(mc_run, mc_export, tmp_path):
    request = {"context": ["ann has a dog .", ""],
               "choices": [["the cat is happy .", "the dog is happy ."],
                           ["", "x"]]}
    shares = assert_bf16_export_agrees(mc_run[0] / "run", mc_export[0],
                                       tmp_path, [request])
    assert shares == {"choice": 1.0, "text": 1.0}


@pytest.mark.slow
def test_int8_export_agrees_with_fp32(mc_run, mc_export, tmp_path):
    request = {"context": ["ann has a dog .", "", HOSTILE[3]],
               "choices": [["the cat is happy .", "the dog is happy ."],
                           ["", "x"], [HOSTILE[2], HOSTILE[5]]]}
    shares = assert_int8_export_agrees(mc_run[0] / "run", mc_export[0],
                                       tmp_path, [request], atol=2e-2)
    assert shares == {"choice": 1.0, "text": 1.0}


@pytest.mark.slow
def test_predict_cli(mc_export, capsys):
    out, _ = mc_export
    assert cli.main(["predict", "--model", str(out), "--context",
                     "ann has a dog .", "--choice", "the cat is happy .",
                     "--choice", "the dog is happy ."]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and sum(line.startswith("*") for line in lines) \
        == 1
    assert cli.main(["predict", "--model", str(out), "--context", "a"]) == 2
    assert "--choice" in capsys.readouterr().err


@pytest.mark.slow
def test_multiple_choice_tflite_answers_like_the_saved_model(
        mc_run, mc_export, tmp_path, capsys):
    from bert_tf import cli
    from bert_tf.serving.tflite import TFLiteModel, export_tflite
    from test_export import HOSTILE
    from test_tflite import TFLITE_TEXT_OPS

    directory, _ = mc_run
    _, loaded = mc_export
    context = ["ann has a dog .", "bob has a cat .", ""]
    choices = [["the dog is happy .", "the cat .", "the fish ."],
               ["the fish .", "the cat sleeps today .", "a cow"],
               ["", "the bird", "cleo"]]
    want = loaded.signatures["serving_default"](
        context=tf.constant(context), choices=tf.constant(choices))
    for quantize in ("none", "dynamic_int8"):
        report = export_tflite(directory / "run",
                               tmp_path / f"{quantize}.tflite", quantize,
                               log=lambda *a: None)
        path = report["path"]
        # Builtins plus tf-text's registered kernels only: no Flex.
        assert set(report["custom_ops"]) <= TFLITE_TEXT_OPS
        model = TFLiteModel(path)
        assert model.kind == "multiple_choice"
        assert model.inputs == ["choices", "context"]
        got = model(context=context, choices=choices)
        if quantize == "none":
            np.testing.assert_allclose(got["probabilities"],
                                       want["probabilities"], atol=1e-5)
            assert got["choice"].tolist() == want["choice"].numpy().tolist()
        # Hostile strings as contexts and as choices: no crash.
        hostile = model(context=HOSTILE, choices=[[h, "the cat ."]
                                                  for h in HOSTILE])
        assert np.isfinite(hostile["probabilities"]).all()
        np.testing.assert_allclose(hostile["probabilities"].sum(1), 1,
                                   atol=1e-5)
    with pytest.raises(ValueError, match="must be as many"):
        model(context=context[:2], choices=choices)
    assert cli.main(["predict", "--model", str(path), "--context",
                     "ann has a dog .", "--choice", "the dog is happy .",
                     "--choice", "the cat ."]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and sum(line.startswith("*") for line in lines) == 1


@pytest.mark.slow
def test_rest_and_grpc_client_requests(mc_run, mc_export):
    from serving_requests import answers, assert_same_answers
    directory, _ = mc_run
    examples = [json.loads(line) for line in
                (directory / "test.jsonl").read_text().splitlines()][:4]
    direct = assert_same_answers(answers(mc_export[0], {
        "context": [e["context"] for e in examples],
        "choices": [e["choices"] for e in examples]}))
    assert [t.decode() for t in direct["text"]] == [
        e["choices"][i] for e, i in zip(examples, direct["choice"])]
