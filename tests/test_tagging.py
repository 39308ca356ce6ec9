"""Token tagging: CoNLL readers and tag schemes, word-piece windows, the
entity metric against seqeval, the model, fine-tuning, the export
(signature, ops, C API), hostile inputs and `bert-tf predict`."""

import subprocess

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import (assert_bf16_export_agrees, assert_int8_export_agrees,
                      assert_trimmed_matches_fixed_length, finetune_toy)
from seqeval.metrics import classification_report, f1_score
from test_export import _compile_serving_check
from toy_tagging import ENCODER, toy_tagging_config, write_toy_tagging

from bert_tf import cli
from bert_tf.samples import readers as wnut
from bert_tf.models.encoder import BertEncoder
from bert_tf.serving import export as export_lib
from bert_tf.tasks.tagging import data as conll
from bert_tf.tasks.tagging.decoding import decode_entities, entity_spans
from bert_tf.tasks.tagging.metrics import entity_scores
from bert_tf.tasks.tagging.model import BertTokenClassifier
from bert_tf.tasks.tagging.preprocessor import TaggingPreprocessor

LABELS = ("O", "B-LOC", "I-LOC", "B-PER", "I-PER")


def test_conll_files_schemes_and_docstart(tmp_path):
    (tmp_path / "a.txt").write_text(
        "-DOCSTART- -X- O O\n\nAnn NNP I-PER\nLee NNP I-PER\nmet VB O\n"
        "Bob NNP I-PER\nBo NNP B-PER\n\nin IN O\nOslo NNP I-LOC\n")
    sentences = conll.read_conll(tmp_path / "a.txt", scheme="iob1")
    assert sentences == [
        (["Ann", "Lee", "met", "Bob", "Bo"],
         ["B-PER", "I-PER", "O", "B-PER", "B-PER"]),
        (["in", "Oslo"], ["O", "B-LOC"])]
    (tmp_path / "b.txt").write_text("New S-LOC x\nYork E-LOC x\n")
    assert conll.read_conll(tmp_path / "b.txt", tag_column=1,
                            scheme="iobes") == [
        (["New", "York"], ["B-LOC", "I-LOC"])]
    with pytest.raises(ValueError, match="a.txt:3: no column 5"):
        conll.read_conll(tmp_path / "a.txt", tag_column=5)
    data = conll.load_local_conll(tmp_path / "a.txt", scheme="iob1")
    assert data.labels == ("O", "B-LOC", "I-LOC", "B-PER", "I-PER")


def test_tfds_conll2003_through_mock_data():
    import tensorflow_datasets as tfds

    def as_dataset(self, split, **kwargs):
        example = {"tokens": ["EU", "rejects", "German", "call"],
                   "pos": [0, 1, 2, 3], "chunks": [0, 1, 2, 3],
                   "ner": [3, 0, 7, 0]}
        return tf.data.Dataset.from_tensors(example).repeat(4)

    with tfds.testing.mock_data(as_dataset_fn=as_dataset):
        data = conll.load_conll2003()
    assert data.labels[:3] == ("O", "B-PER", "I-PER")
    assert len(data.splits["train"]) == 4 and set(data.splits) == {
        "train", "validation", "test"}
    assert data.splits["test"][0] == (["EU", "rejects", "German", "call"],
                                      ["B-ORG", "O", "B-MISC", "O"])


def test_wnut_split_is_fixed():
    data = conll.load_wnut_ner()
    assert {k: len(v) for k, v in data.splits.items()} == {
        "train": 1915, "validation": 239, "test": 240}
    assert len(data.types) == 10


def test_every_word_is_predicted_exactly_once(bert_vocab):
    sentences = wnut.read_wnut()[:60]
    texts = [" ".join(w) for w, _ in sentences]
    pre = TaggingPreprocessor(bert_vocab, seq_length=12, doc_stride=4,
                              pretokenized=True)
    out = {k: v.numpy() for k, v in pre(tf.constant(texts)).items()}
    assert out["input_word_ids"].shape[0] > 3 * len(texts)
    seen = {}
    for w in range(out["input_word_ids"].shape[0]):
        for position in np.flatnonzero(out["word_is_max"][w]):
            key = (out["example_index"][w], out["word_index"][w, position])
            seen[key] = seen.get(key, 0) + 1
    expected = {(i, j) for i, (words, _) in enumerate(sentences)
                for j in range(len(words))}
    assert set(seen) == expected and set(seen.values()) == {1}
    for i, (words, _) in enumerate(sentences):
        for j, word in enumerate(words):
            start, end = out["word_char_start"][i, j], out["word_char_end"][
                i, j]
            assert texts[i][start:end] == word


def test_a_word_the_tokenizer_drops_is_still_predicted(bert_vocab):
    """Pre-tokenized text: a labelled word with no word pieces (a lone
    zero-width joiner) reads one [UNK] piece and gets a prediction like
    every other word. In raw text BERT drops it: it is no word."""
    texts = ["Paris \u200d Berlin", "\u200d", "a \u200d\u200d b \u200d"]
    words = [text.split(" ") for text in texts]
    out = TaggingPreprocessor(bert_vocab, seq_length=8, doc_stride=3,
                              pretokenized=True)(tf.constant(texts))
    out = {k: v.numpy() for k, v in out.items()}
    seen = {}
    for w in range(out["input_word_ids"].shape[0]):
        for position in np.flatnonzero(out["word_is_max"][w]):
            key = (out["example_index"][w], out["word_index"][w, position])
            seen[key] = seen.get(key, 0) + 1
            if "\u200d" in words[key[0]][key[1]]:
                assert out["input_word_ids"][w, position] == \
                    bert_vocab.unk_id
    assert seen == {(i, j): 1 for i, row in enumerate(words)
                    for j in range(len(row))}
    raw = TaggingPreprocessor(bert_vocab, seq_length=8, doc_stride=3)(
        tf.constant(texts))
    assert raw["num_words"].numpy().tolist() == [2, 0, 2]


@pytest.mark.parametrize("pieces, over", [(4095, 0), (4096, 0), (4097, 1)])
def test_tflite_reads_texts_of_up_to_max_pieces(bert_vocab, pieces, over):
    """The TFLite featurizer reads a text of exactly `MAX_PIECES` pieces
    whole and flags one piece more as over its limit."""
    from bert_tf.tasks.tagging.tflite import tagging_windows
    from bert_tf.text.windows import MAX_PIECES
    from bert_tf.text.tokenizer import BertTokenizer
    assert MAX_PIECES == 4096
    out = tagging_windows(BertTokenizer(bert_vocab), bert_vocab,
                          tf.constant([" ".join(["a"] * pieces)]), 128, 64)
    assert out["over_limit"].numpy().tolist() == [over]
    read = int(tf.reduce_sum(out["input_mask"] * tf.cast(
        out["word_is_max"], tf.int32)))
    assert read == min(pieces, MAX_PIECES)


def _random_tags(rng, count, length):
    return rng.integers(0, len(LABELS), size=(count, length))


def test_entity_metric_equals_seqeval_on_tricky_sequences():
    rng = np.random.default_rng(0)
    gold = _random_tags(rng, 200, 12)
    predicted = _random_tags(rng, 200, 12)
    # I- without B-, adjacent same-type B-, an entity at the very end.
    gold[0] = [4, 4, 0, 3, 3, 4, 1, 2, 2, 0, 0, 1]
    predicted[0] = [4, 4, 0, 3, 4, 4, 1, 2, 0, 2, 0, 1]
    lengths = rng.integers(1, 13, size=200)
    lengths[0] = 12
    num_words = tf.constant(lengths, tf.int32)

    def spans(tags):
        return set(zip(*(s.numpy().tolist() for s in entity_spans(
            tf.constant(tags), num_words, LABELS))))

    ours = entity_scores(spans(gold), spans(predicted), ["LOC", "PER"])

    def names(tags):
        return [[LABELS[t] for t in row[:n]] for row, n in zip(tags,
                                                                lengths)]

    assert ours["f1"] == pytest.approx(f1_score(names(gold),
                                                names(predicted)))
    report = classification_report(names(gold), names(predicted),
                                   output_dict=True)
    for kind in ("LOC", "PER"):
        assert ours[f"f1_{kind}"] == pytest.approx(report[kind]["f1-score"])
    assert ours["precision"] == pytest.approx(
        report["micro avg"]["precision"])
    assert ours["recall"] == pytest.approx(report["micro avg"]["recall"])


@pytest.mark.slow
def test_decoded_entities_equal_seqeval_across_window_edges(bert_vocab):
    """Random logits over real tweets in tiny windows: entities cut by a
    window edge are still whole words' tags; our decoding of the word tags
    equals seqeval's reading of the same tags."""
    sentences = wnut.read_wnut()[:80]
    texts = [" ".join(w) for w, _ in sentences]
    pre = TaggingPreprocessor(bert_vocab, seq_length=10, doc_stride=3,
                              pretokenized=True)
    features = pre(tf.constant(texts))
    rng = np.random.default_rng(1)
    logits = rng.normal(size=tuple(features["input_word_ids"].shape) + (
        len(LABELS),)).astype("float32") * 3
    out = decode_entities(features, logits, tf.constant(texts), LABELS,
                          max_entities=64)
    tags = out["tags"].numpy()
    seq = [[LABELS[t] for t in tags[i, :len(words)]]
           for i, (words, _) in enumerate(sentences)]
    from seqeval.metrics.sequence_labeling import get_entities
    for i, row in enumerate(seq):
        expected = [(kind, start, end) for kind, start, end in
                    get_entities(row)]
        found = [(out["type"][i, j].numpy().decode(), ) for j in range(
            out["count"][i])]
        assert [e[0] for e in expected] == [f[0] for f in found]
        words = sentences[i][0]
        for j, (_, start, end) in enumerate(expected):
            assert out["text"][i, j].numpy().decode() == " ".join(
                words[start:end + 1])


def test_token_classifier_saves_and_loads(tmp_path):
    model = BertTokenClassifier(BertEncoder(**ENCODER), 5)
    x = {"input_word_ids": np.full((2, 7), 6, "int32"),
         "input_mask": np.ones((2, 7), "int32"),
         "input_type_ids": np.zeros((2, 7), "int32")}
    model.save(tmp_path / "tagger.keras")
    loaded = keras.saving.load_model(tmp_path / "tagger.keras")
    np.testing.assert_allclose(loaded(x), model(x), atol=1e-6)
    assert set(model.checkpoint_heads()) == {"token_classifier"}


@pytest.fixture(scope="module")
def tag_run(tmp_path_factory):
    return finetune_toy(tmp_path_factory, "tagging", write_toy_tagging,
                        toy_tagging_config)


@pytest.fixture(scope="module")
def tag_export(tag_run, tmp_path_factory):
    directory, _ = tag_run
    out = tmp_path_factory.mktemp("tag_export") / "toy_ner" / "1"
    report = export_lib.export_model(directory / "run", out,
                                     log=lambda *a: None)
    return out, report


@pytest.mark.slow
def test_finetune_learns_entities(tag_run):
    _, result = tag_run
    assert result.best["metric"] == "f1" and result.best["value"] >= 0.8
    assert result.test["f1"] >= 0.8 and "f1_PER" in result.test


@pytest.mark.slow
def test_export_returns_entities_with_offsets(tag_export):
    out, report = tag_export
    assert report["kind"] == "tagging"
    signature = export_lib.load_exported(out).signatures["serving_default"]
    assert set(signature.structured_outputs) == {
        "type", "text", "start", "end", "score", "count"}
    # Words come from the tokenizer's pieces (as BERT splits them): no
    # regex split of its own.
    ops = export_lib.audit_ops(out)["tf_text"]
    assert "FastWordpieceTokenizeWithOffsets" in ops
    assert "RegexSplitWithOffsets" not in ops
    texts = ["Ann met Cleo in Paris.", "Dan went to Rome", "Zoë Ann"]
    result = {k: v.numpy() for k, v in signature(
        text=tf.constant(texts)).items()}
    assert result["type"].shape == (3, 32)
    for i, text in enumerate(texts):
        for j in range(result["count"][i]):
            assert text[result["start"][i, j]:result["end"][i, j]] == \
                result["text"][i, j].decode()
    assert "PER" in [t.decode() for t in result["type"][0]]


@pytest.mark.slow
def test_trimmed_graph_answers_like_the_fixed_length_graph(
        tag_run, tag_export, tmp_path):
    texts = ["Ann met Cleo in Paris .", "", "Dan went to Rome " * 20]
    requests = [{"text": [t]} for t in texts] + [{"text": texts}]
    assert_trimmed_matches_fixed_length(tag_run[0] / "run", tag_export[0],
                                      tmp_path, requests)


@pytest.mark.slow
def test_bf16_export_agrees_with_fp32(tag_run, tag_export, tmp_path):
    texts = ["Ann met Cleo in Paris .", "", "Dan went to Rome " * 20]
    shares = assert_bf16_export_agrees(tag_run[0] / "run", tag_export[0],
                                       tmp_path, [{"text": texts}])
    assert set(shares) == {"type", "text", "start", "end", "count"}
    assert set(shares.values()) == {1.0}


@pytest.mark.slow
def test_int8_export_agrees_with_fp32(tag_run, tag_export, tmp_path):
    from test_export import HOSTILE

    texts = ["Ann met Cleo in Paris .", "", "Dan went to Rome " * 20]
    shares = assert_int8_export_agrees(
        tag_run[0] / "run", tag_export[0], tmp_path,
        [{"text": texts}, {"text": HOSTILE}], atol=5e-2)
    assert set(shares) == {"type", "text", "start", "end", "count"}
    assert set(shares.values()) == {1.0}


@pytest.mark.slow
def test_hostile_inputs_give_entities_or_none(tag_export):
    signature = export_lib.load_exported(tag_export[0]).signatures[
        "serving_default"]
    texts = [b"", b"   \t ", b"Ann \xff in \xc3 Oslo",
             " ".join(["Ann went to Oslo ."] * 2000).encode(),
             "😀 東京 Zoë مرحبا Ann".encode()]
    result = {k: v.numpy() for k, v in signature(
        text=tf.constant(texts)).items()}
    assert list(result["count"][:2]) == [0, 0]
    assert result["count"][3] == 32  # the first K of thousands
    assert np.isfinite(result["score"]).all()
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="Shape of tensor"):
        signature(text=tf.constant("Ann"))


@pytest.mark.slow
def test_c_api_and_predict_cli(tag_export, tmp_path, capsys):
    out = tag_export[0]
    binary = _compile_serving_check(tmp_path)
    libraries = [a for lib in export_lib.tf_text_op_libraries()
                 for a in ("-l", str(lib))]
    result = subprocess.run(
        [str(binary), *libraries, str(out), "Ann met Bob in Oslo", ""],
        capture_output=True, text=True, timeout=300,
        env={"TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[0].startswith("count=")
    assert lines[1].split("\t")[0] == "count=0"
    assert cli.main(["predict", "--model", str(out),
                     "Ann met Bob in Oslo"]) == 0
    printed = capsys.readouterr().out
    assert "Ann met Bob in Oslo\t" in printed and "[" in printed


@pytest.mark.slow
def test_rest_and_grpc_client_requests(tag_export):
    from serving_requests import answers, assert_same_answers
    texts = ["Ann met Cleo in Paris .", "Zoë Ann"]
    direct = assert_same_answers(answers(tag_export[0], {"text": texts}))
    assert "PER" in [t.decode() for t in direct["type"][0]]


@pytest.mark.slow
def test_tflite_windows_equal_the_preprocessors(bert_vocab):
    """The TFLite featurizer (dense ops) gives TaggingPreprocessor's
    windows, ids, word positions and offsets of raw text on real tweets,
    long texts, emoji and CJK; both drop a NUL byte, as BERT does."""
    from bert_tf.tasks.tagging.tflite import tagging_windows
    from bert_tf.text.tokenizer import BertTokenizer
    texts = [" ".join(t) for t, _ in wnut.read_wnut()[:200]] + [
        "", "   ", "\U0001F600" * 30, "\u6587\u5b57 " * 50, "a " * 300]
    for length, stride in ((128, 64), (16, 5)):
        expected = TaggingPreprocessor(bert_vocab, seq_length=length,
                                       doc_stride=stride)(tf.constant(texts))
        dense = tagging_windows(BertTokenizer(bert_vocab), bert_vocab,
                                tf.constant(texts), length, stride)
        for key, value in expected.items():
            np.testing.assert_array_equal(dense[key], value, err_msg=key)
    nul = tagging_windows(BertTokenizer(bert_vocab), bert_vocab,
                          tf.constant(["x \x00 y"]), 16, 5)
    exact = TaggingPreprocessor(bert_vocab, 16, 5)(tf.constant(["x \x00 y"]))
    assert (nul["num_words"].numpy().tolist(),
            exact["num_words"].numpy().tolist()) == ([2], [2])


@pytest.mark.slow
def test_tflite_tags_like_the_saved_model(tag_run, tag_export, tmp_path,
                                          capsys):
    """One .tflite file tags raw text as the SavedModel does: the same
    entities and offsets on the toy test set, a long text tagged whole,
    hostile strings without a crash; int8 nearly alike; `bert-tf
    predict` reads it."""
    from bert_tf.serving.tflite import TFLiteModel, custom_ops, export_tflite
    directory, _ = tag_run
    signature = export_lib.load_exported(tag_export[0]).signatures[
        "serving_default"]
    files = {q: export_tflite(directory / "run", tmp_path / f"{q}.tflite",
                              q, log=lambda *a: None)["path"]
             for q in ("none", "dynamic_int8")}
    model = TFLiteModel(files["none"])
    assert model.kind == "tagging"
    assert set(custom_ops(files["none"])) == {
        "FastBertNormalize", "FastWordpieceTokenizeWithOffsets",
        "RaggedTensorToTensor", "TFText>ByteSplitByOffsets",
        "TFText>ByteSplitWithOffsets"}
    texts = [" ".join(line.split()[0] for line in block.splitlines())
             for block in (directory / "test.txt").read_text().split("\n\n")
             if block.strip() and not block.startswith("-DOCSTART-")]
    saved = {k: v.numpy() for k, v in signature(
        text=tf.constant(texts)).items()}
    for name, path in files.items():
        out = TFLiteModel(path)(text=texts)
        same = np.mean([all((out[k][i] == saved[k][i]).all()
                            for k in ("type", "start", "end", "count"))
                        for i in range(len(texts))])
        assert same >= (1.0 if name == "none" else 0.9), (name, same)
        if name == "none":
            np.testing.assert_array_equal(out["text"], saved["text"])
            np.testing.assert_allclose(out["score"], saved["score"],
                                       atol=1e-4)
    long_text = " ".join(["Ann went to Oslo ."] * 600)
    hostile = ["", "   \t ", b"Ann \xff in \xc3 Oslo", long_text,
               "\U0001F600 \u6771\u4eac Zo\u00eb "
               "\u0645\u0631\u062d\u0628\u0627 Ann",
               "\x00\x01\x1b[31m Ann \u202e"]
    out = model(text=hostile)
    assert list(out["count"][:2]) == [0, 0]
    assert out["count"][3] == 32 and np.isfinite(out["score"]).all()
    assert out["start"][3, 31] > 0  # entities from the whole text
    with pytest.raises(ValueError, match="holds more than 4096 word "
                                         "pieces"):
        model(text=[" ".join(["Ann went to Oslo ."] * 2000)])
    assert cli.main(["predict", "--model", str(files["none"]),
                     "Ann met Bob in Oslo"]) == 0
    printed = capsys.readouterr().out
    assert "Ann met Bob in Oslo\t" in printed and "[" in printed
