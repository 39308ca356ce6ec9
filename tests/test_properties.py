"""Property-based: whatever the bytes, every kind's featurizer gives
well-formed windows, and a tiny export either refuses a request with
INVALID_ARGUMENT naming its rule or answers it within the memory its
limits state (`bert_tf.serving.limits`). Texts are drawn from what an
attacker sends: arbitrary bytes, only UTF-8 continuation bytes, NULs,
long words, many empty rows, many choices."""

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text as tf_text
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bert_tf.models.encoder import BertEncoder
from bert_tf.serving import export as export_lib
from bert_tf.serving.limits import refusal_line
from bert_tf.tasks.multiple_choice.model import BertMultipleChoice
from bert_tf.tasks.multiple_choice.task import choice_features
from bert_tf.tasks.span_qa.features import QAPreprocessor
from bert_tf.tasks.span_qa.model import BertSpanLabeler
from bert_tf.text.preprocessor import BertPreprocessor
from bert_tf.text.tokenizer import (MAX_BYTES_PER_WIDE_WORD, BertTokenizer,
                                   _word_pieces_with_offsets)
from bert_tf.tasks.tagging.preprocessor import TaggingPreprocessor
from test_request_memory import VOCAB, WORDS

TEXTS = st.one_of(
    st.binary(max_size=300),
    st.binary(max_size=300).map(lambda b: bytes(0x80 | (c & 0x3F)
                                                 for c in b)),
    st.lists(st.sampled_from(WORDS + ["\x00", "é", "\u200d", "文",
                                      "\U0001F600", "film" * 40]),
             max_size=60).map(lambda w: " ".join(w).encode()),
    st.just(b""))
ROWS = st.lists(TEXTS, min_size=1, max_size=6)
SETTINGS = settings(max_examples=25, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.data_too_large])


STRINGS = tf.TensorSpec([None], tf.string)
# Each featurizer traced once (eager calls would retrace per shape).
_QA = QAPreprocessor(VOCAB, seq_length=24, doc_stride=8, max_query_length=6)
qa_windows = tf.function(_QA, input_signature=[STRINGS, STRINGS])
tag_windows = tf.function(TaggingPreprocessor(VOCAB, seq_length=16,
                                              doc_stride=5),
                          input_signature=[STRINGS])
_PAIRS = BertPreprocessor(VOCAB, 16)
pair_features = tf.function(lambda a, b: _PAIRS((a, b)),
                            input_signature=[STRINGS, STRINGS])
choice_grid = tf.function(lambda c, g: choice_features(_PAIRS, c, g),
                          input_signature=[STRINGS, tf.TensorSpec(
                              [None, None], tf.string)])


def _windows_ok(out, rows, seq_length):
    ids, mask = out["input_word_ids"].numpy(), out["input_mask"].numpy()
    assert ids.shape[1] <= seq_length and ids.shape == mask.shape
    assert set(np.unique(out["example_index"].numpy())) == set(range(rows))
    assert (ids[:, 0] == VOCAB.cls_id).all()
    assert ((ids >= 0) & (ids < len(VOCAB.tokens))).all()


@SETTINGS
@given(questions=ROWS, contexts=ROWS)
def test_qa_featurizer_takes_any_bytes(questions, contexts):
    rows = min(len(questions), len(contexts))
    out = qa_windows(tf.constant(questions[:rows]),
                     tf.constant(contexts[:rows]))
    _windows_ok(out, rows, 24)
    start = out["token_char_start"].numpy()
    end = out["token_char_end"].numpy()
    assert ((start == -1) == (end == -1)).all() and (start <= end).all()


@SETTINGS
@given(texts=ROWS)
def test_tagging_featurizer_takes_any_bytes(texts):
    out = tag_windows(tf.constant(texts))
    _windows_ok(out, len(texts), 16)


@SETTINGS
@given(texts=ROWS, pairs=ROWS,
       choices=st.integers(min_value=1, max_value=40))
def test_classification_and_choice_featurizers_take_any_bytes(
        texts, pairs, choices):
    rows = min(len(texts), len(pairs))
    packed = pair_features(tf.constant(texts[:rows]),
                           tf.constant(pairs[:rows]))
    assert packed["input_word_ids"].shape == (rows, 16)
    grid = tf.constant([[pairs[(r + c) % len(pairs)] for c in range(choices)]
                        for r in range(rows)])
    features = choice_grid(tf.constant(texts[:rows]), grid)
    assert features["input_word_ids"].shape == (rows, choices, 16)
    np.testing.assert_array_equal(features["input_word_ids"][:, 0],
                                  pair_features(tf.constant(texts[:rows]),
                                                grid[:, 0])["input_word_ids"])


# Small limits, so that drawn requests land on both sides of each rule.
LIMITS = dict(max_input_chars=400, max_batch_chars=1_200, max_batch_rows=8)
RULES = ("texts in one request", "bytes, over the limit",
         "characters, over the limit", "characters in one request",
         "pads")


def _encoder():
    return BertEncoder(vocab_size=len(VOCAB.tokens), hidden_size=16,
                       num_layers=1, num_heads=2, intermediate_size=32,
                       max_position_embeddings=64)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("properties")
    signatures = {}
    for name, model, kind, fields in (
            ("qa", BertSpanLabeler(_encoder()), "span_qa",
             dict(seq_length=32, doc_stride=8, max_query_length=8)),
            ("choices", BertMultipleChoice(_encoder()), "multiple_choice",
             dict(seq_length=32))):
        out = Path(root) / name / "1"
        export_lib.export_keras_model(model, out, kind, VOCAB,
                                      log=lambda *a: None, **LIMITS,
                                      **fields)
        signatures[name] = export_lib.load_exported(out).signatures[
            "serving_default"]
    return signatures


def _peak_mb():
    status = dict(line.split(":", 1) for line in
                  Path("/proc/self/status").read_text().splitlines())
    return int(status["VmHWM"].split()[0]) / 1024


def _refused_or_answered(call):
    """'answered', or the rule of a refusal; the rise of peak memory
    (the limits bound it at a few MB for these texts; 300 MB stated)."""
    Path("/proc/self/clear_refs").write_text("5")
    before = _peak_mb()
    try:
        call()
        outcome = "answered"
    except tf.errors.InvalidArgumentError as error:
        line = refusal_line(error.message)
        [outcome] = [rule for rule in RULES if rule in line] or [line]
        assert "set by `bert-tf export --max-" in line or \
            "bytes per character" in line, line
    assert _peak_mb() - before < 300
    return outcome


def _expected(texts):
    """The rule the limits name first for one input when it is a count
    Python can make alike (rows, bytes), else None."""
    if len(texts) > LIMITS["max_batch_rows"]:
        return "texts in one request"
    if max(map(len, texts)) > 4 * LIMITS["max_input_chars"]:
        return "bytes, over the limit"
    return None


@SETTINGS
@given(contexts=st.lists(TEXTS, min_size=1, max_size=12))
def test_qa_export_refuses_or_answers_any_request(served, contexts):
    questions = [b"who"] * len(contexts)
    outcome = _refused_or_answered(lambda: served["qa"](
        question=tf.constant(questions), context=tf.constant(contexts)))
    first = _expected(contexts)
    if first:
        assert outcome == first
    chars = tf.strings.length(contexts, unit="UTF8_CHAR").numpy()
    if outcome == "answered":
        assert len(contexts) <= LIMITS["max_batch_rows"]
        assert chars.max() <= LIMITS["max_input_chars"]
        assert len(contexts) * chars.max() <= LIMITS["max_batch_chars"]


@SETTINGS
@given(context=TEXTS, choices=st.integers(min_value=1, max_value=12),
       choice=TEXTS)
def test_choice_export_refuses_or_answers_any_request(served, context,
                                                      choices, choice):
    outcome = _refused_or_answered(lambda: served["choices"](
        context=tf.constant([context]),
        choices=tf.constant([[choice] * choices])))
    if choices > LIMITS["max_batch_rows"]:
        assert outcome == "texts in one request"
    elif outcome == "answered":
        assert len(context) <= 4 * LIMITS["max_input_chars"]


# Units a text is made of: whole characters, any single byte (stray
# continuation bytes, overlong and surrogate leads, F5-FF), and the first
# bytes of a multi-byte character cut short.
UNITS = st.one_of(
    st.characters(codec="utf-8").map(lambda c: c.encode()),
    st.integers(0x80, 0xFF).map(lambda b: bytes([b])),
    st.sampled_from(["é", "文", "\U0001F600"]).flatmap(
        lambda c: st.integers(1, len(c.encode()) - 1).map(
            lambda k: c.encode()[:k])))


@settings(max_examples=100, deadline=None, derandomize=True)
@given(st.lists(UNITS, max_size=40))
def test_char_offsets_count_as_python_decodes(units):
    """The one offsets function (`text.windows.char_offsets`, in the
    SavedModel and TFLite featurizers alike) counts the characters before
    each unit as `bytes.decode("utf-8", "replace")` does: a character
    each, one for a cut-short character, one for each invalid byte."""
    from bert_tf.text.windows import char_offsets

    text = b"".join(units)
    cuts = np.cumsum([0] + [len(u) for u in units])
    got = char_offsets(tf.constant([text]), tf.constant([cuts]))[0][0]
    want = [len(text[:cut].decode("utf-8", "replace")) for cut in cuts]
    assert got.numpy().tolist() == want, (text, cuts)


_TOKENIZER = BertTokenizer(VOCAB)
_TF_TEXTS = tf_text.FastBertTokenizer(
    vocab=list(VOCAB.tokens), max_bytes_per_word=MAX_BYTES_PER_WIDE_WORD,
    token_out_type=tf.int32)
exact_offsets = tf.function(_TOKENIZER.tokenize_with_offsets,
                            input_signature=[STRINGS])


@SETTINGS
@given(texts=ROWS)
def test_exact_offsets_are_tf_texts_own(texts):
    """The exact path's word pieces and offsets into the normalized text
    (tf-text's normalizer and word-piecer, its offsets mapped back by one
    flat gather) equal tf-text's FastBertTokenizer's, whose ragged batch
    gather costs ~0.4 s a trace and 4x the ops; and `tokenize_with_offsets`
    takes any bytes."""
    normalized = _TOKENIZER._normalize(tf.constant(texts))
    for ours, theirs in zip(_word_pieces_with_offsets(_TOKENIZER._exact,
                                                      normalized),
                            _TF_TEXTS.tokenize_with_offsets(normalized),
                            strict=True):
        assert ours.to_list() == theirs.to_list()
    ids, starts, ends = exact_offsets(tf.constant(texts))
    assert ids.shape[0] == len(texts)
    assert (starts.flat_values <= ends.flat_values).numpy().all()
