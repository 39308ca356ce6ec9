"""Token tagging as one TFLite graph: `text` raw strings [B] in, the
SavedModel's entities out (`type`, `text`, `start`, `end`, `score`,
`count`), with tf-text's TFLite kernels for tokenization and TFLite
builtins for the rest (see `bert_tf/serving/tflite.py`).

`tagging_windows` is `TaggingPreprocessor` of raw text with the ops
TFLite runs: the fused tokenizer over each whole text, words as BERT
splits them (`bert_words`), then the same dense `word_windows`, so the
words, pieces, windows and offsets are equal on plain text (a test holds
them equal), and a text of any length is tagged whole inside one call.
On text outside plain Latin the fused tokenizer alone runs here, where
the SavedModel normalizes exactly (control characters, compatibility
forms). The entities come from the same `decode_entities` as evaluation
and the SavedModel.
"""

import tensorflow as tf

from bert_tf.tasks.serving_module import TFLiteModule
from bert_tf.tasks.tagging.decoding import OUTPUTS, decode_entities
from bert_tf.text.dense import padded_dense
from bert_tf.text.features import INPUT_NAMES, cut_to_longest
from bert_tf.text.tokenizer import BertTokenizer
from bert_tf.text.windows import (MAX_PIECES, bert_words, char_offsets,
                                  word_windows)


def tagging_windows(tokenizer, vocab, text, seq_length, doc_stride,
                    max_pieces=MAX_PIECES):
    """`TaggingPreprocessor(text)` (raw text) with the ops TFLite runs:
    the fused tokenizer and its byte offsets, words as BERT splits them,
    then the same `word_windows`.

    Args:
        tokenizer: a `BertTokenizer` (its fused tokenizer runs).
        vocab: its `Vocab`.
        text: tf.string [B].
        seq_length, doc_stride: as `TaggingPreprocessor`.
        max_pieces: the pieces of a text read (`text.windows.MAX_PIECES`).

    Returns:
        the `TaggingPreprocessor` features (without labels), and
        `over_limit` (int32 [B]: 1 where a text holds more pieces).
    """
    ids, byte_start, byte_end = tokenizer.fused_with_offsets(text)
    num_words, pieces, start, end = bert_words(vocab, {
        "lengths": tf.cast(ids.row_lengths(), tf.int32),
        "ids": padded_dense(ids, vocab.pad_id), "byte_start": byte_start,
        "byte_end": byte_end})
    offsets = {"byte_start": start, "byte_end": end}
    chars = char_offsets(text, tf.maximum(start, 0), tf.maximum(end, 0))
    for side, values, counted in zip(("start", "end"), (start, end), chars):
        offsets[f"char_{side}"] = tf.where(values >= 0, counted, -1)
    return word_windows(vocab, num_words, pieces, offsets, seq_length,
                        doc_stride, max_pieces)


class TaggingTFLiteModule(TFLiteModule):
    """`serve(text)` -> the tagging SavedModel's outputs (module
    docstring). Windows run at their longest row's length."""

    def __init__(self, model, spec, vocab):
        super().__init__(model, name="bert_tagger_tflite")
        self.max_pieces = MAX_PIECES
        tokenizer = BertTokenizer(vocab, spec.lower_case)

        def serve(text):
            features = cut_to_longest(
                tagging_windows(tokenizer, vocab, text, spec.seq_length,
                                spec.doc_stride),
                (*INPUT_NAMES, "word_index", "word_is_max"))
            logits = model({k: features[k] for k in INPUT_NAMES},
                           training=False)
            out = decode_entities(features, logits, text, spec.labels,
                                  spec.max_entities)
            return {**{name: out[name] for name in OUTPUTS},
                    "over_limit": features["over_limit"]}

        self.serve = tf.function(serve, input_signature=[
            tf.TensorSpec([None], tf.string, name="text")], autograph=False)
