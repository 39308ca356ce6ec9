"""Span QA as one TFLite graph: `question` and `context` raw strings [B]
in, the SavedModel's outputs out (`answer`, `score`, `start`, `end`,
`has_answer`, `null_score` and the top K with `count`), with tf-text's
TFLite kernels for tokenization and TFLite builtins for the rest (see
`bert_tf/serving/tflite.py`).

`qa_windows` is `QAPreprocessor` in dense ops: the same windows, ids and
offsets on plain text (a test holds them equal), so a context of any
length is read whole, in as many windows as it needs, inside one call.
The answers come from the same `decode_answers` as evaluation and the
SavedModel.
"""

import tensorflow as tf

from bert_tf.tasks.span_qa.decoding import decode_answers
from bert_tf.text.dense import (MAX_PIECES, capped, char_offsets,
                                 dense_windows, max_context, padded_dense)
from bert_tf.text.features import INPUT_NAMES, cut_to_longest
from bert_tf.text.tokenizer import BertTokenizer


def qa_windows(tokenizer, vocab, question, context, seq_length, doc_stride,
               max_query_length, max_pieces=MAX_PIECES):
    """`QAPreprocessor(question, context)` with dense ops.

    Args:
        tokenizer: a `BertTokenizer` (its fused tokenizer runs).
        vocab: its `Vocab`.
        question, context: tf.string [B].
        seq_length, doc_stride, max_query_length: as `QAPreprocessor`.
        max_pieces: the context pieces read (`text.dense.MAX_PIECES`).

    Returns:
        the `QAPreprocessor` features (without answer positions), and
        `over_limit` (int32 [B]: 1 where a context holds more pieces).
    """
    query = tokenizer.fused().tokenize(question)
    query_len = tf.minimum(tf.cast(query.row_lengths(), tf.int32),
                           max_query_length)
    query = padded_dense(query, vocab.pad_id)
    ids, byte_start, byte_end = tokenizer.fused_with_offsets(context)
    lengths = tf.cast(ids.row_lengths(), tf.int32)
    ids = padded_dense(ids, vocab.pad_id)
    char_start = char_offsets(context, byte_start)
    char_end = char_offsets(context, byte_end)

    lengths, over_limit = capped(lengths, max_pieces)
    windows = dense_windows(lengths, seq_length - query_len - 3, doc_stride)
    example = windows["example"]
    position = tf.range(seq_length)[None, :]
    asked = tf.gather(query_len, example)[:, None]
    lead = asked + 2
    size = windows["size"][:, None]
    piece = windows["first"][:, None] + position - lead
    in_query = (position >= 1) & (position <= asked)
    in_context = (position >= lead) & (position < lead + size)
    end = lead + size

    def at(values, index):  # values [B, n] at (window's row, index)
        index = tf.clip_by_value(index + tf.zeros_like(example)[:, None], 0,
                                 tf.shape(values)[1] - 1)
        rows = tf.broadcast_to(example[:, None], tf.shape(index))
        return tf.gather_nd(values, tf.stack([rows, index], -1))

    word_ids = tf.where(in_context, at(ids, piece), vocab.pad_id)
    word_ids = tf.where(in_query, at(query, position - 1), word_ids)
    word_ids = tf.where((position == asked + 1) | (position == end),
                        vocab.sep_id, word_ids)
    word_ids = tf.where(position == 0, vocab.cls_id, word_ids)

    def placed(values):
        return tf.where(in_context, at(values, piece), -1)

    return {
        "input_word_ids": word_ids,
        "input_mask": tf.cast(position <= end, tf.int32),
        "input_type_ids": tf.cast(in_context | (position == end), tf.int32),
        "example_index": example,
        "token_char_start": placed(char_start),
        "token_char_end": placed(char_end),
        "token_byte_start": placed(byte_start),
        "token_byte_end": placed(byte_end),
        "token_is_max_context": in_context & max_context(windows, piece),
        "over_limit": over_limit,
    }


class QATFLiteModule(tf.Module):
    """`serve(question, context)` -> the QA SavedModel's outputs (module
    docstring). Windows run at their longest row's length."""

    def __init__(self, model, spec, vocab):
        super().__init__(name="bert_span_qa_tflite")
        self.model_variables = [v.value for v in model.variables]
        self.max_pieces = MAX_PIECES
        tokenizer = BertTokenizer(vocab, spec.lower_case)

        def serve(question, context):
            features = qa_windows(tokenizer, vocab, question, context,
                                  spec.seq_length, spec.doc_stride,
                                  spec.max_query_length)
            features = cut_to_longest(features, [
                k for k, v in features.items() if v.shape.rank == 2])
            logits = model({k: features[k] for k in INPUT_NAMES},
                           training=False)
            return {**decode_answers(
                features, logits["start_logits"], logits["end_logits"],
                context, n_best_size=spec.n_best_size,
                max_answer_length=spec.max_answer_length,
                null_threshold=spec.null_threshold,
                version_2=spec.version_2),
                "over_limit": features["over_limit"]}

        self.serve = tf.function(serve, input_signature=[
            tf.TensorSpec([None], tf.string, name="question"),
            tf.TensorSpec([None], tf.string, name="context")], autograph=False)
