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
import tensorflow_text as tf_text

from bert_tf.text.features import INPUT_NAMES, legacy_seq_length
from bert_tf.text.tokenizer import (BertTokenizer, byte_to_char_offsets,
                                    preprocessor_config)
from bert_tf.text.windows import gather_pieces, place, stride_windows

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
        vocab = self.tokenizer.vocab
        length, stride = self.seq_length, self.doc_stride
        question = tf.convert_to_tensor(question, tf.string)
        context = tf.convert_to_tensor(context, tf.string)
        query = self.tokenizer(question)[:, :self.max_query_length]
        ids, byte_start, byte_end = self.tokenizer.tokenize_with_offsets(
            context)
        char_start, char_end = byte_to_char_offsets(context, byte_start,
                                                    byte_end)

        query_len = query.row_lengths()
        windows = stride_windows(ids.row_lengths(), length - query_len - 3,
                                 stride)
        example, first, last = (windows[k] for k in ("example", "first",
                                                      "last"))

        def take(values):
            return gather_pieces(values, windows)

        word_ids, type_ids = tf_text.combine_segments(
            [tf.gather(query, example), take(ids)],
            start_of_sequence_id=vocab.cls_id, end_of_segment_id=vocab.sep_id)
        word_ids, mask = tf_text.pad_model_inputs(word_ids, length,
                                                  pad_value=vocab.pad_id)
        type_ids, _ = tf_text.pad_model_inputs(type_ids, length)
        # Per-position arrays: -1 on [CLS] + question + [SEP], the values
        # on the context pieces, -1 on the last [SEP] and padding.
        lead = tf.gather(query_len, example) + 2

        def placed(values, fill=-1):
            return place(values, lead, length, fill)

        is_max = tf.cast(windows["is_max"], tf.int64)
        features = {
            "input_word_ids": tf.cast(word_ids, tf.int32),
            "input_mask": tf.cast(mask, tf.int32),
            "input_type_ids": tf.cast(type_ids, tf.int32),
            "example_index": tf.cast(example, tf.int32),
            "token_char_start": placed(take(char_start)),
            "token_char_end": placed(take(char_end)),
            "token_byte_start": placed(take(byte_start)),
            "token_byte_end": placed(take(byte_end)),
            "token_is_max_context": tf.cast(placed(is_max, 0), tf.bool),
        }
        if answer_start is not None:
            features.update(self._positions(
                char_start, char_end, answer_start, answer_end, example,
                first, last, lead))
        return features

    def _positions(self, char_start, char_end, answer_start, answer_end,
                   example, first, last, lead):
        """Start/end labels per window (0, `[CLS]`, where the answer is not
        wholly inside the window or there is none)."""
        answer_start = tf.cast(answer_start, tf.int64)
        answer_end = tf.cast(answer_end, tf.int64)
        big = tf.int64.max
        # First piece ending after the answer starts, last piece starting
        # before it ends (pieces are in text order).
        start_piece = tf.reduce_sum(tf.cast(
            char_end.to_tensor(default_value=big) <= answer_start[:, None],
            tf.int64), axis=1)
        end_piece = tf.reduce_sum(tf.cast(
            char_start.to_tensor(default_value=big) < answer_end[:, None],
            tf.int64), axis=1) - 1
        possible = (answer_start >= 0) & (answer_end > answer_start) & \
            (end_piece >= start_piece)
        start_piece = tf.gather(start_piece, example)
        end_piece = tf.gather(end_piece, example)
        inside = tf.gather(possible, example) & (start_piece >= first) & \
            (end_piece < last)
        return {
            "start_positions": tf.cast(tf.where(
                inside, start_piece - first + lead, 0), tf.int32),
            "end_positions": tf.cast(tf.where(
                inside, end_piece - first + lead, 0), tf.int32),
        }

    def get_config(self):
        return preprocessor_config(
            super().get_config(), self.tokenizer,
            seq_length=self.seq_length, doc_stride=self.doc_stride,
            max_query_length=self.max_query_length)
