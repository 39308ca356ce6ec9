"""Span QA: windows and offsets, the in-graph decoder against the plain
reference, official SQuAD metrics, readers, the model, fine-tuning, the
export (signature, ops, warm-up, C API) and hostile inputs."""

import json
import subprocess

import keras
import numpy as np
import pytest
import tensorflow as tf
import yaml
from conftest import (assert_bf16_export_agrees, assert_int8_export_agrees,
                      assert_trimmed_matches_fixed_length, finetune_toy)
from squad_reference import reference_answers
from test_export import _compile_serving_check
from toy_qa import ENCODER, toy_qa_config, write_toy_qa

from bert_tf import cli
from bert_tf.samples import readers as wnut
from bert_tf.models.encoder import BertEncoder
from bert_tf.serving import export as export_lib
from bert_tf.tasks import load_finetuned
from bert_tf.tasks.span_qa import data as squad
from bert_tf.tasks.span_qa.decoding import decode_answers
from bert_tf.tasks.span_qa.features import QAPreprocessor
from bert_tf.tasks.span_qa.metrics import f1_score, squad_v1, squad_v2
from bert_tf.tasks.span_qa.model import BertSpanLabeler, SharedSpanLoss
from bert_tf.tasks.span_qa.task import SpanQA

OUTPUTS = {"answer", "score", "start", "end", "has_answer", "null_score",
           "top_answers", "top_scores", "top_starts", "top_ends", "count"}


# --- windows and offsets ------------------------------------------------------

def test_windows_cover_the_whole_context_once(bert_vocab):
    words = " ".join(f"word{i % 7} w{i}" for i in range(150))
    pre = QAPreprocessor(bert_vocab, seq_length=40, doc_stride=12,
                         max_query_length=6)
    out = {k: v.numpy() for k, v in pre(
        tf.constant(["a question that is far too long to keep whole", "q"]),
        tf.constant([words, "short one"])).items()}
    pieces = len(bert_vocab_tokens(bert_vocab, words))
    room = 40 - 6 - 3
    windows = int(np.ceil((pieces - room) / 12)) + 1
    assert list(out["example_index"]) == [0] * windows + [1]
    first = out["example_index"] == 0
    # Every context piece is in some window and max-context in exactly one.
    starts = out["token_char_start"][first]
    is_max = out["token_is_max_context"][first]
    held = sorted(set(starts[starts >= 0].tolist()))
    assert len(held) == pieces
    assert sorted(starts[is_max].tolist()) == held
    # The question keeps 6 pieces: [CLS] q*6 [SEP] then context (type 1).
    assert (out["input_type_ids"][0, :8] == 0).all()
    assert out["input_type_ids"][0, 8] == 1 and starts[0, 8] == 0
    assert out["input_mask"].sum(1).max() == 40


@pytest.mark.parametrize("featurizer", ["saved_model", "tflite"])
def test_type_ids_mark_the_context_and_its_sep(bert_vocab, featurizer):
    """Every window is [CLS] question [SEP] (type 0), context [SEP] (type
    1), then padding (type 0), whatever the question's and window's
    lengths: 0 for [CLS], the question and its [SEP]; 1 for the context
    and the final [SEP]."""
    questions = ["who", "where was the film shot", ""]
    contexts = [" ".join(f"w{i}" for i in range(40)), "in paris", "x"]
    if featurizer == "saved_model":
        out = QAPreprocessor(bert_vocab, seq_length=24, doc_stride=6,
                             max_query_length=4)(tf.constant(questions),
                                                 tf.constant(contexts))
    else:
        from bert_tf.tasks.span_qa.tflite import tflite_features
        from bert_tf.text.tokenizer import BertTokenizer
        out = tflite_features(BertTokenizer(bert_vocab), bert_vocab,
                              tf.constant(questions), tf.constant(contexts),
                              24, 6, 4)
    ids, types, mask = (out[k].numpy() for k in (
        "input_word_ids", "input_type_ids", "input_mask"))
    assert len(ids) > 3
    for row_ids, row_types, row_mask in zip(ids, types, mask):
        seps = np.flatnonzero(row_ids == bert_vocab.sep_id)
        assert row_ids[0] == bert_vocab.cls_id and len(seps) == 2
        length = int(row_mask.sum())
        assert seps[1] == length - 1
        expected = np.zeros_like(row_types)
        expected[seps[0] + 1:length] = 1
        np.testing.assert_array_equal(row_types, expected)


def bert_vocab_tokens(vocab, text):
    from bert_tf.text.tokenizer import BertTokenizer
    return BertTokenizer(vocab)(tf.constant([text]))[0].numpy()


def test_offsets_are_code_points_of_the_original_text(bert_vocab):
    context = "Zoë met Ünal in 東京 😀 at Café Déjà-vu."
    pre = QAPreprocessor(bert_vocab, seq_length=64, doc_stride=16,
                         max_query_length=8)
    out = {k: v.numpy()[0] for k, v in pre(tf.constant(["who?"]),
                                           tf.constant([context])).items()}
    ids = out["input_word_ids"]
    pieces = [(bert_vocab.tokens[i], s, e) for i, s, e in zip(
        ids, out["token_char_start"], out["token_char_end"]) if s >= 0]
    assert [(t, context[s:e]) for t, s, e in pieces] == [
        ("zoe", "Zoë"), ("met", "met"), ("una", "Üna"), ("##l", "l"),
        ("in", "in"), ("東", "東"), ("京", "京"), ("[UNK]", "😀"),
        ("at", "at"), ("cafe", "Café"), ("de", "Dé"), ("##ja", "jà"),
        ("-", "-"), ("vu", "vu"), (".", ".")]
    # Byte offsets slice the same text out of the UTF-8 bytes.
    raw = context.encode()
    for (_, s, e), bs, be in zip(pieces, out["token_byte_start"][
            out["token_byte_start"] >= 0], out["token_byte_end"][
            out["token_byte_end"] >= 0]):
        assert raw[bs:be].decode() == context[s:e]


def test_answer_labels_point_at_the_answer_in_each_window(bert_vocab):
    context = " ".join(["filler"] * 40) + " the answer is Paris , France ."
    start = context.index("Paris")
    pre = QAPreprocessor(bert_vocab, seq_length=24, doc_stride=6,
                         max_query_length=4)
    out = {k: v.numpy() for k, v in pre(
        tf.constant(["where?", "where?"]), tf.constant([context, context]),
        tf.constant([start, -1]), tf.constant([start + 5, -1])).items()}
    inside = out["start_positions"] > 0
    assert inside.any() and not inside[out["example_index"] == 1].any()
    for w in np.flatnonzero(inside):
        s, e = out["start_positions"][w], out["end_positions"][w]
        assert context[out["token_char_start"][w, s]:
                       out["token_char_end"][w, e]] == "Paris"
    # Windows that cut the answer off point at [CLS].
    assert (out["end_positions"][~inside] == 0).all()


# --- shared normalization ------------------------------------------------------


def _logsumexp(values):
    return float(np.log(np.exp(np.asarray(values, "float64")).sum()))


def test_shared_span_loss_hand_computed():
    loss = SharedSpanLoss()
    logits = np.array([[0.5, 1.0, -1.0], [2.0, 0.0, 3.0],   # question 0
                       [1.0, 0.0, 0.0],                     # question 1
                       [0.0, 2.0, 1.0], [1.5, 0.5, 0.0]],   # question 2
                      "float32")
    # Question 0 answered at position 2 of its second window; question 1
    # alone and unanswerable; question 2 unanswerable in two windows.
    labels = np.array([[0, 0], [2, 0], [0, 1], [0, 2], [0, 2]])
    q0 = _logsumexp(logits[:2]) - 3.0
    q1 = _logsumexp(logits[2]) - 1.0
    total2 = _logsumexp(logits[3:])
    q2 = ((total2 - 0.0) + (total2 - 1.5)) / 2
    assert float(loss(labels, logits)) == pytest.approx((q0 + q1 + q2) / 5,
                                                        rel=1e-5)
    # A question in one window: the paper's per-window cross-entropy.
    plain = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    alone = np.array([[1, 0], [0, 1], [2, 2]])
    assert float(loss(alone, logits[:3])) == pytest.approx(
        float(plain(alone[:, 0], logits[:3])), rel=1e-5)


def _toy_task(directory, **overrides):
    from bert_tf import finetune
    from bert_tf.text.vocab import read_vocab
    write_toy_qa(directory)
    cfg = toy_qa_config(directory, **overrides)
    task_cls, task_config = finetune.task_of(cfg)
    data = task_cls.load_data(task_config)
    vocab = read_vocab(directory / "vocab.txt")
    return task_cls(task_cls.make_spec(cfg, task_config, data, cfg.encoder,
                                       vocab)), data, vocab


@pytest.mark.parametrize("dynamic_length", [False, True])
def test_shared_norm_batches_hold_whole_questions(tmp_path, dynamic_length):
    task, data, vocab = _toy_task(tmp_path, **{"task.shared_norm": True})
    pre = task.preprocessor(vocab)
    train = data.split("train")
    spans = np.array([squad.answer_span(e) for e in train])
    out = {k: v.numpy() for k, v in pre(
        tf.constant([e["question"] for e in train]),
        tf.constant([e["context"] for e in train]),
        tf.constant(spans[:, 0]), tf.constant(spans[:, 1])).items()}
    by_text = {}  # windows of every training question, by its first
    for i in range(len(train)):
        rows = np.flatnonzero(out["example_index"] == i)
        by_text.setdefault(tuple(out["input_word_ids"][rows[0]]), []).append(
            (len(rows), out["start_positions"][rows].tolist()))
    x, y = next(iter(task.train_dataset(data, vocab, 8, seed=3,
                                        dynamic_length=dynamic_length)))
    ids, start = x["input_word_ids"].numpy(), y["start_logits"].numpy()
    questions = start[:, 1]
    assert sorted(set(questions.tolist())) == list(range(8))
    assert (np.diff(questions) >= 0).all()  # each question's windows in a row
    for q in range(8):
        rows = np.flatnonzero(questions == q)
        first = ids[rows[0]]
        key = tuple(np.pad(first, (0, pre.seq_length - len(first))))
        assert (len(rows), start[rows, 0].tolist()) in by_text[key]
    assert y["end_logits"].numpy()[:, 1].tolist() == questions.tolist()


def test_shared_norm_is_refused_on_tpu(tmp_path):
    with pytest.raises(ValueError, match="task.shared_norm.*tpu"):
        _toy_task(tmp_path, **{"task.shared_norm": True, "strategy": "tpu"})


@pytest.mark.slow
def test_shared_norm_fine_tunes_and_saves(tmp_path):
    from bert_tf import finetune
    write_toy_qa(tmp_path)
    result = finetune.run(toy_qa_config(tmp_path, **{
        "task.shared_norm": True}), log=lambda *a: None)
    # As the per-window loss (test_finetune_learns_and_stores_the_threshold).
    assert result.best["value"] >= 75 and result.test["f1"] >= 75
    task, model, vocab, _ = load_finetuned(tmp_path / "run")
    assert task.spec.shared_norm
    task.compile(model)
    model.save(tmp_path / "qa.keras")
    loaded = keras.saving.load_model(tmp_path / "qa.keras")
    assert isinstance(loaded.loss["start_logits"], SharedSpanLoss)


# --- decoding -----------------------------------------------------------------

def _wnut_pairs(count=300):
    sentences = wnut.read_wnut()[:count]
    contexts = [" ".join(t) for t, _ in sentences]
    return [squad.QUESTIONS[wnut.TYPES[i % 10]] for i in
            range(len(contexts))], contexts


@pytest.mark.parametrize("version_2", [False, True])
def test_decoder_matches_the_reference_on_real_tweets(bert_vocab,
                                                      version_2):
    questions, contexts = _wnut_pairs()
    pre = QAPreprocessor(bert_vocab, seq_length=32, doc_stride=8,
                         max_query_length=10)
    features = pre(tf.constant(questions), tf.constant(contexts))
    rng = np.random.default_rng(0)
    shape = features["input_word_ids"].shape
    start = rng.normal(size=shape).astype("float32")
    end = rng.normal(size=shape).astype("float32")
    assert shape[0] > 2 * len(contexts)  # many multi-window contexts
    options = dict(n_best_size=5, max_answer_length=6, null_threshold=1.0,
                   version_2=version_2)
    ours = {k: v.numpy() for k, v in decode_answers(
        features, start, end, tf.constant(contexts), **options).items()}
    ref = reference_answers({k: v.numpy() for k, v in features.items()},
                            start, end, contexts, doc_stride=8, **options)
    same = [ours["answer"][i] == r["answer"] and ours["start"][i] ==
            r["start"] and ours["end"][i] == r["end"] and
            ours["count"][i] == len(r["nbest"]) and
            [a for a in ours["top_answers"][i][:ours["count"][i]]] ==
            [n["text"] for n in r["nbest"]]
            for i, r in enumerate(ref)]
    assert np.mean(same) >= 0.99, np.flatnonzero(~np.array(same))[:5]
    np.testing.assert_allclose(ours["null_score"],
                               [r["null_score"] for r in ref], rtol=1e-6)
    assert ours["has_answer"].sum() > 0
    if version_2:
        assert 0 < ours["has_answer"].mean() < 1


def test_max_context_rule_decides_the_answer(bert_vocab):
    """The best-scoring span starts on a piece that two windows hold; in
    the window that gives it the higher logit it sits at the edge (not its
    max context), so the original rule drops it there and the answer is
    the runner-up span, in the window where its piece is max context."""
    pre = QAPreprocessor(bert_vocab, seq_length=12, doc_stride=4,
                         max_query_length=2)
    context = "one two three four five six seven eight nine ten eleven"
    features = {k: v.numpy() for k, v in pre(
        tf.constant(["q"]), tf.constant([context])).items()}
    starts = features["token_char_start"]
    assert len(starts) >= 2
    words = {s: context[s:].split()[0] for s in starts[0] if s >= 0}
    # A piece held by windows 0 and 1, last in window 0 (so not its max
    # context there), and a piece that only window 1 holds.
    edge = max(p for p in range(12) if starts[0, p] >= 0)
    shared = starts[0, edge]
    inner = max(p for p in range(12) if starts[1, p] >= 0)
    assert shared in starts[1] and starts[1, inner] not in starts[0]
    assert not features["token_is_max_context"][0, edge]
    start = np.zeros(starts.shape, np.float32)
    end = np.zeros(starts.shape, np.float32)
    start[0, edge] = end[0, edge] = 10.0        # best, but not max context
    start[1, inner] = end[1, inner] = 5.0       # max context in window 1
    options = dict(n_best_size=3, max_answer_length=1)
    ours = decode_answers(features, start, end, tf.constant([context]),
                          **options)
    ref = reference_answers(features, start, end, [context], doc_stride=4,
                            **options)
    assert ref[0]["start"] == starts[1, inner] != shared, words
    assert int(ours["start"][0]) == ref[0]["start"]
    assert ours["answer"][0].numpy() == ref[0]["answer"]


# --- metrics ------------------------------------------------------------------

def test_official_squad_metrics_hand_computed():
    assert squad_v1([["The Eiffel Tower", "Eiffel Tower"], ["1889"]],
                    ["eiffel tower!", "in 1889"]) == {
        "exact_match": 50.0, "f1": pytest.approx(100 * (1 + 2 / 3) / 2)}
    assert f1_score("x b c", "b c d") == pytest.approx(2 / 3)
    assert f1_score("a b c", "b c d") == pytest.approx(0.8)  # "a" dropped
    assert f1_score("", "") == 1.0 and f1_score("x", "") == 0.0
    result = squad_v2([["Paris"], [], ["Rome"], []],
                      ["Paris", "", "", "Oslo"],
                      no_answer_diffs=[-1.0, 2.0, 0.5, 0.1],
                      spans=["Paris", "Lima", "Rome", "Oslo"])
    assert result["exact"] == 50.0 and result["HasAns_exact"] == 50.0
    assert result["NoAns_exact"] == 50.0 and result["NoAns_total"] == 2
    # By difference: answering q0 (Paris, right) lifts 2 -> 3 at -1.0;
    # q3 (Oslo, unanswerable) drops to 2, q2 (Rome) back to 3 at 0.5: not
    # higher, so the first threshold that reached 3 of 4 stays.
    assert result["best_exact"] == 75.0
    assert result["best_exact_thresh"] == -1.0


# --- readers --------------------------------------------------------------------

def test_local_squad_json_reports_answers_not_at_their_start(tmp_path):
    data = {"data": [{"title": "t", "paragraphs": [{
        "context": "Ann met Bob in Oslo.",
        "qas": [
            {"id": "good", "question": "Who?", "answers": [
                {"text": "Bob", "answer_start": 8}]},
            {"id": "bad", "question": "Where?", "answers": [
                {"text": "Oslo", "answer_start": 3}]},
            {"id": "none", "question": "Why?", "answers": [],
             "is_impossible": True}]}]}]}
    (tmp_path / "train.json").write_text(json.dumps(data))
    qa = squad.load_local_squad(tmp_path / "train.json")
    assert [e["id"] for e in qa.splits["train"]] == ["good", "none"]
    assert qa.version_2 and qa.skipped["train"][0][0] == "bad"
    assert "not at answer_start 3" in qa.skipped["train"][0][1]
    plan = SpanQA({"seq_length": 64, "doc_stride": 16}).describe(qa)
    assert "1 questions skipped (train bad: answer 'Oslo' is not at" in plan
    with pytest.raises(ValueError, match="is not SQuAD JSON"):
        (tmp_path / "x.json").write_text("[1, 2]")
        squad.read_squad_json(tmp_path / "x.json")


@pytest.mark.parametrize("version", ["v1.1", "v2.0"])
def test_tfds_squad_through_mock_data(version):
    import tensorflow_datasets as tfds

    def as_dataset(self, split, **kwargs):
        example = {"id": "q1", "title": "t", "question": "Who met Bob?",
                   "context": "Ann met Bob.",
                   "answers": {"text": ["Ann"], "answer_start": [0]}}
        if version == "v2.0":
            example.update(is_impossible=False, plausible_answers={
                "text": [], "answer_start": tf.zeros([0], tf.int32)})
        return tf.data.Dataset.from_tensors(example).repeat(3)

    with tfds.testing.mock_data(as_dataset_fn=as_dataset):
        qa = squad.load_squad_tfds(version)
    assert qa.name == f"squad/{version}" and qa.version_2 == (
        version == "v2.0")
    assert len(qa.splits["train"]) == 3
    assert qa.splits["validation"][0]["answers"] == ["Ann"]


def test_wnut_qa_split_is_fixed():
    qa = squad.load_wnut_qa()
    sizes = {k: len(v) for k, v in qa.splits.items()}
    assert sizes == {"train": 2884, "validation": 354, "test": 368}
    answerable = sum(not e["is_impossible"] for v in qa.splits.values()
                     for e in v)
    assert answerable == 1212
    example = next(e for e in qa.splits["train"] if e["answers"])
    start = example["answer_starts"][0]
    assert example["context"][start:].startswith(example["answers"][0])
    threads = squad.load_qa("sample:wnut_qa_threads")
    assert threads.splits["test"] == qa.splits["test"]
    assert threads.splits["train"][:2884] == qa.splits["train"]
    extra = threads.splits["train"][2884:]
    assert len(extra) == 1162 and all("\n\n" in e["context"] for e in extra)
    # Every gold answer of every tweet sits at its start in the thread.
    assert squad.check_examples(extra) == (extra, [])
    tweets = [e for e in extra if not e["is_impossible"]]
    assert max(len(e["answers"]) for e in tweets) > 1


# --- model, fine-tuning, export -----------------------------------------------

def test_span_labeler_saves_and_loads(tmp_path):
    model = BertSpanLabeler(BertEncoder(**ENCODER))
    x = {"input_word_ids": np.full((2, 9), 6, "int32"),
         "input_mask": np.ones((2, 9), "int32"),
         "input_type_ids": np.zeros((2, 9), "int32")}
    expected = model(x)
    model.save(tmp_path / "qa.keras")
    loaded = keras.saving.load_model(tmp_path / "qa.keras")
    for name in ("start_logits", "end_logits"):
        np.testing.assert_allclose(loaded(x)[name], expected[name],
                                   atol=1e-6)
    assert set(model.checkpoint_heads()) == {"span_labeler"}


@pytest.fixture(scope="module")
def qa_run(tmp_path_factory):
    return finetune_toy(tmp_path_factory, "qa", write_toy_qa,
                        toy_qa_config)


@pytest.fixture(scope="module")
def qa_export(qa_run, tmp_path_factory):
    directory, _ = qa_run
    out = tmp_path_factory.mktemp("qa_export") / "toy_qa" / "1"
    lines = []
    report = export_lib.export_model(directory / "run", out,
                                     log=lines.append, server_config=True)
    return out, report, lines


@pytest.mark.slow
def test_finetune_learns_and_stores_the_threshold(qa_run):
    directory, result = qa_run
    # The toy's chance level (always "no answer") is about 15 F1.
    assert result.best["metric"] == "best_f1" and result.best["value"] >= 75
    assert result.test["f1"] >= 75 and result.test["NoAns_total"] > 0
    spec = yaml.safe_load((result.best_dir / "task.yaml").read_text())
    assert spec["kind"] == "span_qa" and spec["version_2"]
    assert spec["null_threshold"] == pytest.approx(
        result.best["results"]["best_f1_thresh"])
    task, model, vocab, _ = load_finetuned(directory / "run")
    assert task.spec.null_threshold == spec["null_threshold"]


@pytest.mark.slow
def test_export_signature_ops_and_warmup(qa_export):
    out, report, lines = qa_export
    assert report["kind"] == "span_qa"
    text = "\n".join(lines)
    assert "serving_default(context: string[None], question: string[None])" \
        in text
    loaded = export_lib.load_exported(out)
    signature = loaded.signatures["serving_default"]
    assert set(signature.structured_outputs) == OUTPUTS
    assert set(signature.structured_input_signature[1]) == {"question",
                                                            "context"}
    ops = export_lib.audit_ops(out)
    assert "FastWordpieceTokenizeWithOffsets" in ops["tf_text"]
    assert (out / "assets.extra" / "tf_serving_warmup_requests").is_file()
    assert 'name: "toy_qa"' in (out.parent.parent / "models.config"
                                ).read_text()
    for record in tf.data.TFRecordDataset(
            str(out / "assets.extra" / "tf_serving_warmup_requests")):
        assert b"question" in record.numpy()


def _answer(loaded, questions, contexts):
    out = loaded.signatures["serving_default"](
        question=tf.constant(questions), context=tf.constant(contexts))
    return {k: v.numpy() for k, v in out.items()}


@pytest.mark.slow
def test_export_answers_like_evaluation_and_slices_the_context(
        qa_run, qa_export):
    directory, _ = qa_run
    loaded = export_lib.load_exported(qa_export[0])
    task, model, vocab, _ = load_finetuned(directory / "run")
    questions = ["Where was the film made?", "Who made the film?",
                 "Where was the film made?", "Who made the film?"]
    # Accented names read as the toy vocab's (uncased, accents stripped);
    # offsets count code points of the original, bytes would differ.
    contexts = ["The film was made by Cleo in Rome . a day",
                "a day . The film was made by Éve . it rained later",
                "The film was made by Eve . and it rained later",
                "The film was made by Dan in Lima ."]
    served = _answer(loaded, questions, contexts)
    direct = task.answer(model, vocab, questions, contexts)
    for key in ("answer", "start", "end", "has_answer"):
        np.testing.assert_array_equal(served[key], direct[key])
    np.testing.assert_allclose(served["score"], direct["score"], atol=1e-5)
    assert served["top_answers"][1, 0].decode() == "Éve"
    assert served["top_starts"][1, 0] == 29 and served["top_ends"][1, 0] == 32
    for i in range(len(contexts)):
        for j in range(served["count"][i]):
            assert contexts[i][served["top_starts"][i, j]:served["top_ends"][
                i, j]] == served["top_answers"][i, j].decode()
        if served["has_answer"][i]:
            assert served["answer"][i] == served["top_answers"][i, 0]
    assert served["top_answers"].shape == (4, 20)
    assert (served["count"] <= 20).all()


@pytest.mark.slow
def test_trimmed_graph_answers_like_the_fixed_length_graph(
        qa_run, qa_export, tmp_path):
    questions = ["Who made the film?", "Where was the film made?", "Who?"]
    contexts = ["The film was made by Cleo in Rome .",
                "a day . " * 30 + "The film was made by Eve in Lima .", ""]
    requests = [{"question": [q], "context": [c]}
                for q, c in zip(questions, contexts)]
    requests.append({"question": questions, "context": contexts})
    assert_trimmed_matches_fixed_length(qa_run[0] / "run", qa_export[0],
                                      tmp_path, requests)


@pytest.mark.slow
def test_bf16_export_agrees_with_fp32(qa_run, qa_export, tmp_path):
    questions = ["Who made the film?", "Where was the film made?", "Who?"]
    contexts = ["The film was made by Cleo in Rome .",
                "a day . " * 30 + "The film was made by Eve in Lima .", ""]
    requests = [{"question": questions, "context": contexts}]
    # Scores are logit sums (not probabilities): bf16 moves them more, and
    # near-tied runners-up may swap places in the top-K lists.
    shares = assert_bf16_export_agrees(qa_run[0] / "run", qa_export[0],
                                       tmp_path, requests, atol=0.25)
    assert {k: shares[k] for k in ("answer", "start", "end", "has_answer")
            } == dict.fromkeys(("answer", "start", "end", "has_answer"), 1.0)
    assert shares["top_answers"] >= 2 / 3


@pytest.mark.slow
def test_int8_export_agrees_with_fp32(qa_run, qa_export, tmp_path):
    from test_export import HOSTILE

    questions = ["Who made the film?", "Where was the film made?", "Who?"]
    contexts = ["The film was made by Cleo in Rome .",
                "a day . " * 30 + "The film was made by Eve in Lima .", ""]
    requests = [{"question": questions, "context": contexts},
                {"question": ["Who?"] * len(HOSTILE), "context": HOSTILE}]
    shares = assert_int8_export_agrees(qa_run[0] / "run", qa_export[0],
                                       tmp_path, requests, atol=0.5)
    assert {k: shares[k] for k in ("answer", "start", "end", "has_answer")
            } == dict.fromkeys(("answer", "start", "end", "has_answer"), 1.0)


@pytest.mark.slow
def test_long_context_is_answered_from_its_last_paragraph(qa_export):
    # 5,000 words of the toy's own filler text, then the answer in the
    # last paragraph: found only if nothing is truncated away.
    loaded = export_lib.load_exported(qa_export[0])
    rng = np.random.default_rng(3)
    filler = []
    while len(filler) < 5000:
        filler += rng.choice(["a day .", "it rained later .",
                              "and it rained a day later ."]).split()
    context = " ".join(filler[:5000]) + "\n\nThe film was made by Finn ."
    out = _answer(loaded, ["Who made the film?"], [context])
    assert out["top_answers"][0, 0] == b"Finn"
    assert context[out["top_starts"][0, 0]:out["top_ends"][0, 0]] == "Finn"
    assert out["top_starts"][0, 0] > len(context) - 10


@pytest.mark.slow
def test_hostile_inputs_get_no_answer_or_a_clear_error(qa_export):
    loaded = export_lib.load_exported(qa_export[0])
    cases = [("", ""), ("Who made the film?", ""), ("", "by Ann"),
             ("Who?", "   \t "), ("Who?", "?!.,;"),
             ("Who made the film?", "film " * 20000),
             (b"\xff\xfe who", b"The film \xff was made by Ann"),
             (" ".join(["who"] * 500), "The film was made by Ann .")]
    out = _answer(loaded, [q for q, _ in cases], [c for _, c in cases])
    assert np.isfinite(out["score"]).all()
    assert np.isfinite(out["null_score"]).all()
    assert not out["has_answer"][[0, 1, 3]].any()
    assert (out["count"][[0, 1, 3]] == 0).all()  # no context, no candidate
    assert (out["answer"][~out["has_answer"]] == b"").all()
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="`question` and `context` must hold the same"):
        _answer(loaded, ["a", "b"], ["c"])
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="Shape of tensor"):
        loaded.signatures["serving_default"](question=tf.constant("a"),
                                             context=tf.constant("b"))


@pytest.mark.slow
def test_c_api_program_answers_questions(qa_export, tmp_path):
    out = qa_export[0]
    binary = _compile_serving_check(tmp_path)
    libraries = [a for lib in export_lib.tf_text_op_libraries()
                 for a in ("-l", str(lib))]
    result = subprocess.run(
        [str(binary), *libraries, str(out),
         "Who made the film?\tThe film was made by Ann in Oslo .",
         "\t"], capture_output=True, text=True, timeout=300,
        env={"TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    first = dict(field.split("=", 1) for field in lines[0].split("\t"))
    assert first["answer"] == "Ann" and first["start"] == "21"
    second = dict(field.split("=", 1) for field in lines[1].split("\t"))
    assert second["has_answer"] == "0" and second["count"] == "0"


@pytest.mark.slow
def test_predict_cli_prints_answers_with_offsets(qa_export, tmp_path,
                                                 capsys):
    out = qa_export[0]
    assert cli.main(["predict", "--model", str(out), "--question",
                     "Who made the film?", "--context",
                     "The film was made by Bob in Rome ."]) == 0
    line = capsys.readouterr().out.strip()
    assert "'Bob'" in line and "start 21 end 24" in line
    # The kind declares its flags: `--help` with the model lists them.
    with pytest.raises(SystemExit):
        cli.main(["predict", "--model", str(out), "--help"])
    assert "flags of a span_qa export" in capsys.readouterr().out
    (tmp_path / "in.jsonl").write_text("not json\n")
    assert cli.main(["predict", "--model", str(out), "--input",
                     str(tmp_path / "in.jsonl")]) == 2
    assert "in.jsonl:1: expected a JSON object" in capsys.readouterr().err


@pytest.mark.slow
def test_rest_and_grpc_client_requests(qa_export):
    """QA through the client's request forms: the answer is the slice of
    the caller's context."""
    from serving_requests import answers, assert_same_answers
    contexts = ["The film was made by Cleo in Rome . a day",
                "a day . The film was made by Éve . it rained later"]
    direct = assert_same_answers(answers(qa_export[0], {
        "question": ["Who made the film?"] * 2, "context": contexts}))
    for i, context in enumerate(contexts):
        if direct["has_answer"][i]:
            assert context[direct["start"][i]:direct["end"][i]] == \
                direct["answer"][i].decode()


@pytest.mark.slow
def test_exported_qa_teacher_teaches_a_narrower_student(qa_run, qa_export,
                                                        tmp_path):
    """An export teaches (its weights read back into the task model): the
    toy QA teacher (L2/H64) trains a student of one block and half the
    width on its start and end distributions, with hidden states (through
    a projection) and attention matched. The loss falls, and the
    student's answers score near the teacher's."""
    from bert_tf import distill
    directory, teacher = qa_run
    cfg = distill.load_dict({
        "teacher": str(qa_export[0]), "init": "",
        "vocab": str(directory / "vocab.txt"),
        "encoder": {**ENCODER, "hidden_size": 32, "num_layers": 1,
                    "intermediate_size": 64},
        "seq_length": 32, "batch_size": 32, "epochs": 8,
        "optimizer": {"learning_rate": 2e-3}, "temperature": 2.0,
        "alpha": 0.5, "hidden_weight": 1.0, "attention_weight": 1.0,
        "trainer": {"model_dir": str(tmp_path / "student"),
                    "steps_per_loop": 6, "seed": 1}})
    lines = []
    result = distill.run(cfg, log=lines.append)
    text = "\n".join(lines)
    assert "teacher outputs for 384 texts" in text, text
    assert "teacher blocks [1] (hidden x1, attention x1, projected)" in text
    losses = [h["loss"] for h in result.history]
    assert losses[-1] < losses[0] * 0.5, losses
    assert result.test["f1"] >= teacher.test["f1"] - 15, (result.test,
                                                          teacher.test)
    # The projection is the distiller's: kept in the training checkpoint
    # (an exact resume), while best/ loads as an ordinary 1-block student.
    state = tf.train.load_checkpoint(str(tf.train.latest_checkpoint(
        tmp_path / "student" / "checkpoints")))
    assert any(k.startswith("distill_projection/")
               for k in state.get_variable_to_shape_map())
    _, student, _, _ = load_finetuned(tmp_path / "student")
    assert student.encoder.config.num_layers == 1


@pytest.mark.slow
def test_tflite_windows_equal_the_preprocessors(bert_vocab):
    """The TFLite featurizer (dense ops) gives QAPreprocessor's windows,
    ids, offsets and max-context flags, on real tweets with many windows
    each and on hostile contexts."""
    from bert_tf.tasks.span_qa.tflite import tflite_features
    from bert_tf.text.tokenizer import BertTokenizer
    questions, contexts = _wnut_pairs(120)
    hostile = ["", "   ", "\U0001F600" * 30, "\u6587\u5b57" * 50,
               "\u05e9\u05dc\u05d5\u05dd " * 40, "a " * 300, "\u00e9t\u00e9"]
    questions = tf.constant(questions + ["who?"] * len(hostile))
    contexts = tf.constant(contexts + hostile)
    for length, stride, query in ((32, 8, 10), (24, 5, 6)):
        expected = QAPreprocessor(bert_vocab, seq_length=length,
                                  doc_stride=stride,
                                  max_query_length=query)(questions,
                                                          contexts)
        dense = tflite_features(BertTokenizer(bert_vocab), bert_vocab,
                                questions, contexts, length, stride, query)
        assert expected["input_word_ids"].shape[0] > 2 * 120
        for key, value in expected.items():
            np.testing.assert_array_equal(dense[key], value, err_msg=key)


@pytest.mark.slow
def test_tflite_answers_like_the_saved_model(qa_run, qa_export, tmp_path,
                                             capsys):
    """One .tflite file answers raw questions as the SavedModel does:
    the same answers and offsets on the toy test set, a 3,000-word
    context read whole in one call, one over the file's limit refused in
    one line, hostile strings without a crash; the int8 file answers
    nearly alike; `bert-tf predict` reads it."""
    from bert_tf.serving.tflite import TFLiteModel, custom_ops, export_tflite
    directory, _ = qa_run
    loaded = export_lib.load_exported(qa_export[0])
    quiet = {"log": lambda *a: None}
    files = {q: export_tflite(directory / "run", tmp_path / f"{q}.tflite",
                              q, **quiet)["path"]
             for q in ("none", "dynamic_int8")}
    model = TFLiteModel(files["none"])
    assert model.kind == "span_qa"
    # Builtins plus tf-text's registered kernels: no Flex, no ragged op.
    assert set(custom_ops(files["none"])) == {
        "FastBertNormalize", "FastWordpieceTokenizeWithOffsets",
        "RaggedTensorToTensor", "TFText>ByteSplitByOffsets",
        "TFText>ByteSplitWithOffsets"}
    test = json.loads((directory / "test.json").read_text())["data"][0][
        "paragraphs"]
    questions = [p["qas"][0]["question"] for p in test]
    contexts = [p["context"] for p in test]
    saved = _answer(loaded, questions, contexts)
    for name, path in files.items():
        out = TFLiteModel(path)(question=questions, context=contexts)
        same = np.mean([(out[k] == saved[k]).all(axis=tuple(
            range(1, out[k].ndim))) for k in ("answer", "start", "end",
                                              "has_answer")], axis=0)
        assert same.mean() >= (1.0 if name == "none" else 0.9), (name, same)
        if name == "none":
            np.testing.assert_allclose(out["score"], saved["score"],
                                       atol=1e-3)
            np.testing.assert_array_equal(out["top_answers"],
                                          saved["top_answers"])
    # 3,000 words, the answer in the last paragraph: one call, read whole.
    assert model.max_pieces == 4096
    filler = " ".join(["a day . it rained later ."] * 500)
    context = filler + "\n\nThe film was made by Finn ."
    out = model(question=["Who made the film?"], context=[context])
    assert out["top_answers"][0, 0] == b"Finn"
    assert out["top_starts"][0, 0] == len(context) - 6
    cases = [("", ""), ("Who made the film?", ""), ("Who?", "   \t "),
             (b"\xff\xfe who", b"The film \xff was made by Ann"),
             ("Who?", "\x00\x01\x1b[31m \u202e\u05e9\u05dc\u05d5\u05dd"),
             ("Who?", "\U0001F600 \u6587\u5b57 by Ann")]
    out = model(question=[q for q, _ in cases], context=[c for _, c in cases])
    assert np.isfinite(out["score"]).all()
    assert not out["has_answer"][:3].any() and (out["count"][:3] == 0).all()
    with pytest.raises(ValueError, match="must be as many"):
        model(question=["a", "b"], context=["c"])
    with pytest.raises(ValueError, match=r"^text 1 of the request holds "
                       r"more than 4096 word pieces, the most [^\n]+$"):
        model(question=["Who?", "Who?"], context=["Ann", "film " * 20000])
    assert cli.main(["predict", "--model", str(files["none"]), "--question",
                     "Who made the film?", "--context",
                     "The film was made by Bob in Rome ."]) == 0
    line = capsys.readouterr().out.strip()
    assert "'Bob'" in line and "start 21 end 24" in line
