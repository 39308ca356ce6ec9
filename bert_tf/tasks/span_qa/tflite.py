"""Span QA as one TFLite graph: `question` and `context` raw strings [B]
in, the SavedModel's outputs out (`answer`, `score`, `start`, `end`,
`has_answer`, `null_score` and the top K with `count`), with tf-text's
TFLite kernels for tokenization and TFLite builtins for the rest (see
`bert_tf/serving/tflite.py`).

`tflite_features` is `QAPreprocessor` with the ops TFLite runs: the
fused tokenizer, then the same dense `qa_windows`, so the windows, ids and
offsets are equal on plain text (a test holds them equal), and a context
of any length is read whole, in as many windows as it needs, in one call.
The answers come from the same `decode_answers` as evaluation and the
SavedModel.
"""

import tensorflow as tf

from bert_tf.tasks.serving_module import TFLiteModule
from bert_tf.tasks.span_qa.decoding import decode_answers
from bert_tf.tasks.span_qa.features import qa_windows
from bert_tf.text.dense import padded_dense
from bert_tf.text.features import INPUT_NAMES, cut_to_longest
from bert_tf.text.tokenizer import BertTokenizer
from bert_tf.text.windows import MAX_PIECES, capped, char_offsets


def tflite_features(tokenizer, vocab, question, context, seq_length,
                    doc_stride, max_query_length, max_pieces=MAX_PIECES):
    """`QAPreprocessor(question, context)` with the ops TFLite runs: the
    fused tokenizer and offsets by byte splitting, then the same
    `qa_windows`.

    Args:
        tokenizer: a `BertTokenizer` (its fused tokenizer runs).
        vocab: its `Vocab`.
        question, context: tf.string [B].
        seq_length, doc_stride, max_query_length: as `QAPreprocessor`.
        max_pieces: the context pieces read (`text.windows.MAX_PIECES`).

    Returns:
        the `QAPreprocessor` features (without answer positions), and
        `over_limit` (int32 [B]: 1 where a context holds more pieces).
    """
    query = tokenizer.fused().tokenize(question)
    ids, byte_start, byte_end = tokenizer.fused_with_offsets(context)
    lengths, over_limit = capped(tf.cast(ids.row_lengths(), tf.int32),
                                 max_pieces)
    pieces = {"lengths": lengths, "ids": padded_dense(ids, vocab.pad_id),
              "byte_start": byte_start, "byte_end": byte_end,
              **dict(zip(("char_start", "char_end"), char_offsets(
                  context, byte_start, byte_end)))}
    features, _ = qa_windows(vocab, query, pieces, seq_length, doc_stride,
                             max_query_length)
    return {**features, "over_limit": over_limit}


class QATFLiteModule(TFLiteModule):
    """`serve(question, context)` -> the QA SavedModel's outputs (module
    docstring). Windows run at their longest row's length."""

    def __init__(self, model, spec, vocab):
        super().__init__(model, name="bert_span_qa_tflite")
        self.max_pieces = MAX_PIECES
        tokenizer = BertTokenizer(vocab, spec.lower_case)

        def serve(question, context):
            features = tflite_features(tokenizer, vocab, question, context,
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
