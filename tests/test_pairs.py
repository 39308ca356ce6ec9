import hashlib
import json

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data import pairs
from bert_tf.data.pretraining import _RECORD_SPEC
from bert_tf.text.tokenizer import BertTokenizer

QUIET = dict(log=lambda *a: None)


def _read(directory):
    records = tf.data.TFRecordDataset(sorted(
        str(p) for p in directory.glob("pairs-*.tfrecord")))
    return [tf.io.parse_single_example(r, _RECORD_SPEC) for r in records]


def test_serialization_matches_tensorflow():
    example = tf.train.Example(features=tf.train.Features(feature={
        "text_a": tf.train.Feature(bytes_list=tf.train.BytesList(
            value=["Zoë ☃".encode()])),
        "text_b": tf.train.Feature(bytes_list=tf.train.BytesList(
            value=[b"x" * 300])),
        "next_sentence_label": tf.train.Feature(
            int64_list=tf.train.Int64List(value=[1]))}))
    assert pairs.serialize_pair("Zoë ☃", "x" * 300, 1) == \
        example.SerializeToString(deterministic=True)


@pytest.mark.slow
def test_real_corpus_pairs(sample_pairs, sample_documents):
    directory, stats = sample_pairs
    manifest = json.loads((directory / "manifest.json").read_text())
    assert len(manifest["shards"]) == 4
    assert sum(s["records"] for s in manifest["shards"]) == stats.pairs
    assert abs(stats.not_next_share - 0.5) <= 0.02, stats.not_next_share
    assert stats.mean_tokens > 60
    records = _read(directory)[:2000]
    joined = [" ".join(doc) for doc in sample_documents]
    owner = {}
    for i, text in enumerate(joined):
        owner.setdefault(text[:200], i)
    checked = 0
    for r in records:
        a, b = r["text_a"].numpy().decode(), r["text_b"].numpy().decode()
        assert a and b
        if int(r["next_sentence_label"]) == 0:
            # IsNext: A then B is contiguous text of one document.
            assert any(f"{a} {b}" in text for text in joined)
            checked += 1
    assert checked > 500


@pytest.mark.slow
def test_same_output_for_any_worker_count(sample_documents, bert_vocab,
                                          tmp_path):
    tokenizer = BertTokenizer(bert_vocab)
    digests = []
    for workers in (1, 4):
        out = tmp_path / f"w{workers}"
        pairs.write_pairs(sample_documents[:120], tokenizer, out,
                          dupe_factor=1, seed=5, workers=workers,
                          num_shards=2, **QUIET)
        digest = hashlib.sha256()
        shards = sorted(out.glob("pairs-*.tfrecord"))
        assert len(shards) == 2 and all(p.stat().st_size for p in shards)
        for path in shards:
            digest.update(path.read_bytes())
        digests.append(digest.hexdigest())
    assert digests[0] == digests[1]
    other = tmp_path / "other_seed"
    pairs.write_pairs(sample_documents[:120], tokenizer, other,
                      dupe_factor=1, seed=6, num_shards=2, **QUIET)
    assert _read(other)[0]["text_a"] != _read(tmp_path / "w1")[0]["text_a"] \
        or _read(other)[1]["text_a"] != _read(tmp_path / "w1")[1]["text_a"]


def test_one_sentence_documents_and_very_long_sentences(bert_vocab,
                                                        tmp_path):
    long_sentence = " ".join(f"word{i}" for i in range(400))
    docs = [["Only one sentence here, with several words in it."],
            [long_sentence], ["Another document.", "With two sentences."]]
    stats = pairs.write_pairs(docs, BertTokenizer(bert_vocab), tmp_path,
                              seq_length=32, dupe_factor=20, seed=0,
                              **QUIET)
    records = _read(tmp_path)
    labels = [int(r["next_sentence_label"]) for r in records]
    assert stats.pairs == len(records) > 20
    # One-sentence documents still yield true continuations (IsNext).
    assert 0 in labels and 1 in labels
    single = [r for r in records if int(r["next_sentence_label"]) == 0 and
              "Only one" in r["text_a"].numpy().decode()]
    assert single and all(
        (r["text_a"].numpy().decode() + " " + r["text_b"].numpy().decode())
        == docs[0][0] for r in single)


def test_bad_arguments(bert_vocab, tmp_path):
    tokenizer = BertTokenizer(bert_vocab)
    with pytest.raises(ValueError, match="corpus is empty"):
        pairs.write_pairs([], tokenizer, tmp_path, **QUIET)
    with pytest.raises(ValueError, match="seq_length = 4"):
        pairs.write_pairs([["a."]], tokenizer, tmp_path, seq_length=4,
                          **QUIET)


@pytest.mark.slow
def test_cli_vocab_and_pairs(tmp_path, capsys):
    from bert_tf import cli
    corpus = tmp_path / "corpus.txt"
    lines = []
    for d in range(30):
        lines += [f"The cat number {d} sat on the mat.",
                  "Dogs are running in the park today.",
                  "Café owners sell coffee and tea.", ""]
    corpus.write_text("\n".join(lines))
    vocab = tmp_path / "vocab.txt"
    assert cli.main(["vocab", "--corpus", str(corpus), "--size", "300",
                     "--min-count", "1", "--out", str(vocab)]) == 0
    out = capsys.readouterr().out
    assert "read 30 documents" in out and f"wrote {vocab}" in out
    tokens = vocab.read_text().splitlines()
    assert tokens[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert len(tokens) == 300  # padded with [unusedN] to the asked size
    assert "cafe" in tokens and "Café" not in tokens
    assert cli.main(["pairs", "--corpus", str(corpus), "--vocab",
                     str(vocab), "--out", str(tmp_path / "tfr"),
                     "--dupe-factor", "2", "--workers", "2"]) == 0
    out = capsys.readouterr().out
    assert "pairs (NotNext" in out and "manifest.json" in out
    assert list((tmp_path / "tfr").glob("pairs-*.tfrecord"))
    ids = BertTokenizer(str(vocab))(tf.constant(
        ["the cat sat on the mat"])).to_list()[0]
    assert 1 not in ids  # no [UNK] for words of the corpus
    cased = tmp_path / "cased.txt"
    assert cli.main(["vocab", "--corpus", str(corpus), "--size", "300",
                     "--min-count", "1", "--cased", "--out",
                     str(cased)]) == 0
    assert "The" in cased.read_text().split("\n")


@pytest.mark.slow
def test_eval_share_holds_out_whole_documents(sample_documents, bert_vocab,
                                             tmp_path):
    docs = sample_documents[:60]
    pairs.write_pairs(docs, BertTokenizer(bert_vocab), tmp_path,
                      dupe_factor=1, seed=3, eval_share=0.1, **QUIET)
    train = {r["text_a"].numpy().decode() for r in _read(tmp_path)}
    held = [r["text_a"].numpy().decode() for r in _read(tmp_path / "eval")]
    assert held and not train & set(held)
    manifest = json.loads((tmp_path / "eval" / "manifest.json").read_text())
    assert manifest["stats"]["documents"] == 6
    with pytest.raises(ValueError, match="eval_share = 1.5"):
        pairs.write_pairs(docs, BertTokenizer(bert_vocab), tmp_path,
                          eval_share=1.5, **QUIET)
