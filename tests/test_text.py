import numpy as np
import pytest
import tensorflow as tf

from bert_tf.text.packer import BertPacker
from bert_tf.text.preprocessor import BertPreprocessor
from bert_tf.text.tokenizer import BertTokenizer, normalize_text
from bert_tf.text.vocab import Vocab, read_vocab
from conftest import SPECIAL

WORDS = ["the", "cafe", "ole", "hello", "world", "##s", "!", ",", "un",
         "##aff", "##able", "a", "b"]
VOCAB = SPECIAL + WORDS


def _write(tmp_path, lines, name="vocab.txt", raw=None):
    path = tmp_path / name
    if raw is not None:
        path.write_bytes(raw)
    else:
        path.write_text("".join(line + "\n" for line in lines),
                        encoding="utf-8")
    return path


# --- vocab ------------------------------------------------------------------

def test_read_vocab(tmp_path):
    vocab = read_vocab(_write(tmp_path, VOCAB))
    assert vocab.size == len(VOCAB)
    assert (vocab.pad_id, vocab.unk_id, vocab.cls_id, vocab.sep_id,
            vocab.mask_id) == (0, 1, 2, 3, 4)
    assert not vocab.is_cased


@pytest.mark.parametrize("lines, message", [
    (SPECIAL[:4] + WORDS, r"lacks the special token\(s\) \[MASK\]"),
    (SPECIAL + ["the", "cafe", "the"], r"line 8 repeats 'the' from line 6"),
    (SPECIAL + ["the", "", "cafe"], r"line 7 is empty"),
    (SPECIAL + ["two words"], r"line 6 .*contains whitespace"),
    ([], r"is empty"),
])
def test_vocab_errors_name_the_line(tmp_path, lines, message):
    with pytest.raises(ValueError, match=message):
        read_vocab(_write(tmp_path, lines))


def test_vocab_invalid_utf8_and_missing_file(tmp_path):
    raw = "\n".join(SPECIAL).encode() + b"\ncaf\xe9\n"
    with pytest.raises(ValueError, match=r"line 6 is not valid UTF-8"):
        read_vocab(_write(tmp_path, None, raw=raw))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_vocab(tmp_path / "nope.txt")


# --- tokenizer --------------------------------------------------------------

def test_tokenizer_basic_and_wordpieces():
    tokenizer = BertTokenizer(VOCAB)
    ids = tokenizer(tf.constant(["Hello worlds!", "unaffable", "",
                                 "xyz"])).to_list()
    index = {t: i for i, t in enumerate(VOCAB)}
    assert ids[0] == [index["hello"], index["world"], index["##s"],
                      index["!"]]
    assert ids[1] == [index["un"], index["##aff"], index["##able"]]
    assert ids[2] == []
    assert ids[3] == [index["[UNK]"]]


def test_normalization_matches_the_original_rules():
    text = tf.constant(["Café\tOLÉ\x00!", "Ａ ß ﬁ", b"bad \xff byte"])
    out = [s.decode() for s in normalize_text(text).numpy()]
    # Control characters dropped, tab -> space, accents stripped, lower.
    assert out[0] == "cafe ole!"
    # No compatibility folding (the original keeps fullwidth, ß, ligatures).
    assert out[1] == "ａ ß ﬁ"
    # Invalid UTF-8 is replaced, then dropped like the original's U+FFFD.
    assert out[2] == "bad  byte"
    cased = [s.decode() for s in normalize_text(
        tf.constant(["Café OLÉ"]), lower_case=False).numpy()]
    assert cased == ["Café OLÉ"]


def test_cased_vocab_is_detected_and_kept_cased():
    cased = SPECIAL + ["Hello", "hello", "World"] + [
        f"Word{i}" for i in range(20)]
    tokenizer = BertTokenizer(cased)
    assert not tokenizer.lower_case
    assert tokenizer(tf.constant(["Hello hello World"])).to_list() == [
        [5, 6, 7]]
    assert BertTokenizer(cased, lower_case=True).lower_case


def test_tokenizer_in_tf_data_and_tf_function_and_scalar():
    tokenizer = BertTokenizer(VOCAB)
    eager = tokenizer(tf.constant(["hello world", "the cafe"])).to_list()
    unbatched = list(tf.data.Dataset.from_tensor_slices(
        ["hello world", "the cafe"]).map(tokenizer).as_numpy_iterator())
    assert [u.tolist() for u in unbatched] == eager
    batched = next(iter(tf.data.Dataset.from_tensor_slices(
        ["hello world", "the cafe"]).batch(2).map(tokenizer)))
    assert batched.to_list() == eager
    graph = tf.function(lambda t: tokenizer(t).to_tensor())(
        tf.constant(["hello world", "the cafe"]))
    assert graph.numpy().tolist() == [[8, 9], [5, 6]]


def test_offsets_point_into_the_original_bytes():
    tokenizer = BertTokenizer(VOCAB)
    text = ["Café  OLÉ, hello worlds", "\x00the", ""]
    ids, starts, ends = tokenizer.tokenize_with_offsets(tf.constant(text))
    assert ids.to_list() == tokenizer(tf.constant(text)).to_list()
    pieces = [[t.encode()[s:e].decode() for s, e in zip(ss, ee)]
              for t, ss, ee in zip(text, starts.to_list(), ends.to_list())]
    assert pieces == [["Café", "OLÉ", ",", "hello", "world", "s"],
                      ["the"], []]


def test_a_trace_captures_the_tokenizer_models_instead_of_copying_them(
        bert_vocab):
    """tf-text makes its model buffer a constant from a list of bytes:
    built inside a trace, that took ~2 s for a 30k vocab (and a 1.7 MB
    constant in each trace). Built once, eagerly, it is captured."""
    tokenizer = BertTokenizer(bert_vocab)
    graph_def = tf.function(tokenizer.dense_with_offsets).get_concrete_function(
        tf.TensorSpec([None], tf.string)).graph.as_graph_def()
    nodes = list(graph_def.node) + [
        node for function in graph_def.library.function
        for node in function.node_def]
    assert max(node.attr["value"].tensor.ByteSize() for node in nodes
               if node.op == "Const") < 10_000


def test_tokenizers_of_one_vocab_share_tf_texts_models():
    """Each construction built tf-text's models again (0.1-0.3 s for a 30k
    vocab): preprocessors, exports and evaluations of one vocab now share
    them. Another casing is another model; a TF1 graph gets its own."""
    first, second = BertTokenizer(VOCAB), BertTokenizer(list(VOCAB))
    for mine, theirs in ((first._exact, second._exact),
                         (first._fast, second._fast)):
        assert all(a is b for a, b in zip(mine, theirs, strict=True))
    assert first.fused() is second.fused()
    text = tf.constant(["Café  OLÉ, hello worlds"])
    cased = BertTokenizer(VOCAB, lower_case=False)
    assert cased._fast[0] is not first._fast[0]
    assert cased(text).to_list() != first(text).to_list()
    with tf.Graph().as_default() as graph:
        in_graph = BertTokenizer(VOCAB)
        assert in_graph._exact[1] is not first._exact[1]
        assert in_graph(tf.constant(["hello"])).values.graph is graph
    assert second(text).to_list() == [[6, 7, 12, 8, 9, 10]]


# --- packer -----------------------------------------------------------------

def test_pair_layout_and_segment_ids():
    packer = BertPacker(seq_length=10, cls_id=2, sep_id=3)
    out = packer((tf.ragged.constant([[10, 11, 12]]),
                  tf.ragged.constant([[20, 21]])))
    assert out["input_word_ids"].numpy().tolist() == [
        [2, 10, 11, 12, 3, 20, 21, 3, 0, 0]]
    assert out["input_type_ids"].numpy().tolist() == [
        [0, 0, 0, 0, 0, 1, 1, 1, 0, 0]]
    assert out["input_mask"].numpy().tolist() == [
        [1, 1, 1, 1, 1, 1, 1, 1, 0, 0]]


def test_round_robin_trims_the_longer_segment_first():
    packer = BertPacker(seq_length=9, cls_id=2, sep_id=3)
    a = tf.ragged.constant([[10, 11, 12, 13, 14, 15, 16], [10]])
    b = tf.ragged.constant([[20, 21], [20, 21, 22, 23, 24, 25, 26]])
    ids = packer((a, b))["input_word_ids"].numpy().tolist()
    assert ids == [[2, 10, 11, 12, 13, 3, 20, 21, 3],
                   [2, 10, 3, 20, 21, 22, 23, 24, 3]]
    waterfall = BertPacker(seq_length=9, cls_id=2, sep_id=3,
                           truncator="waterfall")
    assert waterfall((a, b))["input_word_ids"].numpy().tolist()[0] == [
        2, 10, 11, 12, 13, 14, 15, 3, 3]


def test_single_segment_truncation_and_unbatched():
    packer = BertPacker(seq_length=5, cls_id=2, sep_id=3)
    out = packer(tf.constant([7, 8, 9, 10]))
    assert out["input_word_ids"].numpy().tolist() == [2, 7, 8, 9, 3]
    with pytest.raises(ValueError, match="seq_length = 2"):
        BertPacker(seq_length=2, cls_id=2, sep_id=3)
    with pytest.raises(ValueError, match="truncator"):
        BertPacker(seq_length=8, cls_id=2, sep_id=3, truncator="x")


# --- preprocessor -----------------------------------------------------------

@pytest.mark.slow
def test_preprocessor_everywhere_gives_the_same_result(tmp_path):
    pre = BertPreprocessor(_write(tmp_path, VOCAB), seq_length=8)
    a, b = ["Hello worlds!", "", "the cafe"], ["the", "a b", "ole"]
    eager = pre((tf.constant(a), tf.constant(b)))
    graph = tf.function(lambda x, y: pre((x, y)))(tf.constant(a),
                                                  tf.constant(b))
    mapped = next(iter(tf.data.Dataset.from_tensor_slices((a, b)).batch(
        3).map(lambda x, y: pre((x, y)))))
    rows = list(tf.data.Dataset.from_tensor_slices((a, b)).map(
        lambda x, y: pre((x, y))).as_numpy_iterator())
    for key in ("input_word_ids", "input_mask", "input_type_ids"):
        np.testing.assert_array_equal(eager[key], graph[key])
        np.testing.assert_array_equal(eager[key], mapped[key])
        np.testing.assert_array_equal(eager[key], np.stack(
            [r[key] for r in rows]))
    # An empty first text still gets [CLS] [SEP]; B follows.
    assert eager["input_word_ids"].numpy()[1].tolist() == [
        2, 3, 16, 17, 3, 0, 0, 0]
    assert eager["input_type_ids"].numpy()[1].tolist() == [
        0, 0, 1, 1, 1, 0, 0, 0]
    clone = BertPreprocessor.from_config(pre.get_config())
    np.testing.assert_array_equal(clone((tf.constant(a), tf.constant(b)))[
        "input_word_ids"], eager["input_word_ids"])


def test_vocab_object_round_trip(tmp_path):
    vocab = Vocab(tuple(VOCAB))
    path = vocab.save(tmp_path / "v.txt")
    assert read_vocab(path).tokens == vocab.tokens


def test_dense_packing_equals_ragged_packing():
    """`pack_dense` (the TFLite graph's) == `pack_segments` (round robin)."""
    from bert_tf.text.packer import pack_dense, pack_segments

    rng = np.random.default_rng(0)
    for length in (4, 5, 8, 13):
        for count in (1, 2):
            segments = [tf.ragged.constant(
                [list(rng.integers(5, 50, rng.integers(0, 15)))
                 for _ in range(30)], dtype=tf.int32) for _ in range(count)]
            dense = pack_dense(segments, length, 2, 3)
            ragged = pack_segments(segments, length, 2, 3)
            for name in ragged:
                np.testing.assert_array_equal(dense[name], ragged[name])


def test_old_sequence_length_keyword_still_reads(bert_vocab):
    """One word per idea: `seq_length` everywhere; the old keyword (and old
    saved layer configs that hold it) still load, with a warning."""
    with pytest.warns(FutureWarning, match=r"BertPreprocessor\("
                      r"sequence_length=...\) is deprecated: it is now "
                      "seq_length"):
        pre = BertPreprocessor(bert_vocab, sequence_length=16)
    assert pre.packer.seq_length == 16
    config = pre.packer.get_config()
    assert "seq_length" in config and "sequence_length" not in config
    config["sequence_length"] = config.pop("seq_length")
    with pytest.warns(FutureWarning):
        assert BertPacker.from_config(config).seq_length == 16
