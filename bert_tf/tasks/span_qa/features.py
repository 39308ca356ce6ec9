"""Question + context -> BERT windows with character offsets (in-graph).

The one featurizer of extractive QA: the same layer runs in the `tf.data`
pipeline of fine-tuning, in evaluation and inside the exported SavedModel.
It follows the original `run_squad.py`:

- the question keeps its first `max_query_length` word pieces;
- the context is cut into windows of `seq_length - len(question) - 3`
  pieces that start every `doc_stride` pieces, so nothing is truncated away
  (a context of any length becomes as many windows as it needs);
- each window is `[CLS] question [SEP] context piece [SEP]`, padded;
- a piece that several windows hold is "max context" in the one where it
  has the most context on its shorter side (the earliest on a tie);
- an answer's character span becomes the start and end piece of each
  window that holds it whole, `[CLS]` (position 0) in the others and for
  unanswerable questions.

Offsets are Unicode code points into the caller's string (not bytes, not
positions in the lower-cased or accent-stripped text); byte offsets are
returned as well, to slice answers out of the original bytes exactly.
"""

import keras
import tensorflow as tf

from bert_tf.text.dense import padded_dense
from bert_tf.text.features import INPUT_NAMES, legacy_seq_length
from bert_tf.text.tokenizer import BertTokenizer, preprocessor_config
from bert_tf.text.windows import (char_offsets, dense_windows, frame,
                                  max_context)

FEATURE_NAMES = (*INPUT_NAMES, "example_index", "token_char_start",
                 "token_char_end", "token_byte_start", "token_byte_end", "token_is_max_context")


@keras.saving.register_keras_serializable(package="bert_tf")
class QAPreprocessor(keras.layers.Layer):
    """Questions and contexts -> windows of encoder inputs with offsets.

    Args:
        vocabulary: a vocab.txt path, a `Vocab` or a token list.
        seq_length: window length, special tokens included.
        doc_stride: word pieces between the starts of adjacent windows.
        max_query_length: word pieces kept of the question.
        lower_case, strip_accents: see `BertTokenizer`.

    Call args:
        question, context: tf.string [batch].
        answer_start, answer_end: optional int [batch] code-point span of
            the answer in `context` (end exclusive; -1: no answer). With
            them the output also has `start_positions` and `end_positions`.

    Returns:
        A dict of tensors with one row per window, W windows in all:
        `input_word_ids`, `input_mask`, `input_type_ids` (int32 [W, L]),
        `example_index` (int32 [W]: the batch row it came from),
        `token_char_start`/`token_char_end` and `token_byte_start`/
        `token_byte_end` (int32 [W, L], -1 outside the context) and
        `token_is_max_context` (bool [W, L]).

    Examples:
        >>> pre = QAPreprocessor(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
        ...                       "who", "?", "ann", "met", "bob", "."],
        ...                      seq_length=8, doc_stride=2,
        ...                      max_query_length=2)
        >>> out = pre(tf.constant(["Who?"]), tf.constant(["Ann met Bob."]),
        ...           tf.constant([8]), tf.constant([11]))
        >>> out["input_word_ids"].numpy().tolist()
        [[2, 5, 6, 3, 7, 8, 9, 3], [2, 5, 6, 3, 9, 10, 3, 0]]
        >>> out["start_positions"].numpy().tolist()
        [6, 4]
        >>> out["token_is_max_context"].numpy().astype(int).tolist()
        [[0, 0, 0, 0, 1, 1, 1, 0], [0, 0, 0, 0, 0, 1, 0, 0]]
    """

    def __init__(self, vocabulary, seq_length=384, doc_stride=128,
                 max_query_length=64, lower_case=None, strip_accents=None,
                 **kwargs):
        seq_length = legacy_seq_length(kwargs, seq_length, "QAPreprocessor")
        kwargs.pop("dtype", None)
        super().__init__(dtype="int32", **kwargs)
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        if max_query_length < 1 or doc_stride < 1:
            raise ValueError(
                f"max_query_length = {max_query_length}, doc_stride = "
                f"{doc_stride}: both must be >= 1.")
        if seq_length < max_query_length + 4:
            raise ValueError(
                f"seq_length = {seq_length} leaves no room for "
                f"context after a question of max_query_length = "
                f"{max_query_length} and 3 special tokens: make it at least "
                f"{max_query_length + 4}.")
        # === Config ===
        self.seq_length = int(seq_length)
        self.doc_stride = int(doc_stride)
        self.max_query_length = int(max_query_length)

        # === Layers ===
        self.tokenizer = BertTokenizer(vocabulary, lower_case, strip_accents,
                                       name="tokenizer")
        self.built = True

    def call(self, question, context, answer_start=None, answer_end=None):
        question = tf.convert_to_tensor(question, tf.string)
        context = tf.convert_to_tensor(context, tf.string)
        query = self.tokenizer(question)
        pieces = self.tokenizer.dense_with_offsets(context)
        pieces["char_start"], pieces["char_end"] = char_offsets(
            context, pieces["byte_start"], pieces["byte_end"])
        features, windows = qa_windows(
            self.tokenizer.vocab, query, pieces, self.seq_length,
            self.doc_stride, self.max_query_length)
        if answer_start is not None:
            features.update(_positions(pieces, answer_start, answer_end,
                                       windows))
        return features

    def get_config(self):
        return preprocessor_config(
            super().get_config(), self.tokenizer,
            seq_length=self.seq_length, doc_stride=self.doc_stride,
            max_query_length=self.max_query_length)


def qa_windows(vocab, query, pieces, seq_length, doc_stride,
               max_query_length):
    """The windows of questions and tokenized contexts, in dense ops: what
    `QAPreprocessor` and the TFLite graph (`span_qa/tflite.py`) share.

    Args:
        vocab: the `Vocab`.
        query: the questions' pieces, ragged [B, (q)].
        pieces: the contexts' pieces, dense (`BertTokenizer.
            dense_with_offsets`): `lengths` [B] and `ids`, `byte_start`,
            `byte_end`, `char_start`, `char_end`, int [B, n] (n past the
            longest row).
        seq_length, doc_stride, max_query_length: as `QAPreprocessor`.

    Returns:
        (features, windows): the `QAPreprocessor` features without answer
        positions, and the `text.windows.dense_windows` they came from
        (with `lead`, the position of each window's first context piece).
    """
    query_len = tf.minimum(tf.cast(query.row_lengths(), tf.int32),
                           max_query_length)
    query = padded_dense(query, vocab.pad_id)
    windows = dense_windows(pieces["lengths"],
                            seq_length - query_len - 3, doc_stride)
    example = windows["example"]
    position = tf.range(seq_length)[None, :]
    asked = tf.gather(query_len, example)[:, None]
    lead = asked + 2
    end = lead + windows["size"][:, None]
    piece = windows["first"][:, None] + position - lead
    in_context = (position >= lead) & (position < end)
    # Every per-piece value of a window in one gather.
    per_piece = tf.stack([tf.cast(pieces[k], tf.int32) for k in _PER_PIECE],
                         -1)
    rows = tf.broadcast_to(example[:, None], tf.shape(piece))
    at = tf.clip_by_value(piece, 0, tf.shape(per_piece)[1] - 1)
    values = tf.unstack(tf.where(
        in_context[..., None],
        tf.gather_nd(per_piece, tf.stack([rows, at], -1)), -1), axis=-1)
    placed = dict(zip(_PER_PIECE, values))
    asked_ids = tf.gather(tf.gather(query, example), tf.clip_by_value(
        position[0] - 1, 0, tf.shape(query)[1] - 1), axis=1)
    body = tf.where(in_context, placed.pop("ids"), asked_ids)
    features = {
        **frame(vocab, body, position, lead, windows["size"][:, None],
                pair=True),
        "example_index": example,
        **{f"token_{k}": v for k, v in placed.items()},
        "token_is_max_context": in_context & max_context(windows, piece),
    }
    return features, {**windows, "lead": lead[:, 0]}


# The values of each context piece that a window carries, in one tensor.
_PER_PIECE = ("ids", "char_start", "char_end", "byte_start", "byte_end")


def _positions(pieces, answer_start, answer_end, windows):
    """Start/end labels per window (0, `[CLS]`, where the answer is not
    wholly inside the window or there is none)."""
    answer_start = tf.cast(answer_start, tf.int32)[:, None]
    answer_end = tf.cast(answer_end, tf.int32)[:, None]
    real = tf.range(tf.shape(pieces["ids"])[1])[None, :] < \
        pieces["lengths"][:, None]
    # First piece ending after the answer starts, last piece starting
    # before it ends (pieces are in text order).
    start_piece = tf.reduce_sum(tf.cast(
        real & (pieces["char_end"] <= answer_start), tf.int32), axis=1)
    end_piece = tf.reduce_sum(tf.cast(
        real & (pieces["char_start"] < answer_end), tf.int32), axis=1) - 1
    possible = (answer_start[:, 0] >= 0) & \
        (answer_end[:, 0] > answer_start[:, 0]) & (end_piece >= start_piece)
    example, first = windows["example"], windows["first"]
    start_piece = tf.gather(start_piece, example)
    end_piece = tf.gather(end_piece, example)
    inside = tf.gather(possible, example) & (start_piece >= first) & \
        (end_piece < first + windows["size"])
    lead = windows["lead"]
    return {
        "start_positions": tf.where(inside, start_piece - first + lead, 0),
        "end_positions": tf.where(inside, end_piece - first + lead, 0),
    }
