"""Token tagging as one TFLite graph: `text` raw strings [B] in, the
SavedModel's entities out (`type`, `text`, `start`, `end`, `score`,
`count`), with tf-text's TFLite kernels for tokenization and TFLite
builtins for the rest (see `bert_tf/serving/tflite.py`).

`tagging_windows` is `TaggingPreprocessor` with the ops TFLite runs: its
own word split and the fused tokenizer, then the same dense
`word_windows`, so the words, pieces, windows and offsets are equal on
plain text (a test holds them equal), and a text of any length is tagged
whole inside one call. One difference:
words are split at Unicode whitespace (tf-text's `WhitespaceTokenizer`,
which has a TFLite kernel) where the SavedModel splits at ASCII
whitespace, so a no-break space separates two words here. The entities
come from the same `decode_entities` as evaluation and the SavedModel.
"""

import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf.tasks.serving_module import TFLiteModule
from bert_tf.tasks.tagging.decoding import OUTPUTS, decode_entities
from bert_tf.text.dense import MAX_PIECES, char_offsets
from bert_tf.text.features import INPUT_NAMES, cut_to_longest
from bert_tf.text.tokenizer import BertTokenizer
from bert_tf.text.word_windows import word_windows


def tagging_windows(tokenizer, vocab, text, seq_length, doc_stride,
                    max_pieces=MAX_PIECES):
    """`TaggingPreprocessor(text)` with the ops TFLite runs: words split
    by `WhitespaceTokenizer`, the fused tokenizer and offsets by byte
    splitting, then the same `word_windows`.

    Args:
        tokenizer: a `BertTokenizer` (its fused tokenizer runs).
        vocab: its `Vocab`.
        text: tf.string [B].
        seq_length, doc_stride: as `TaggingPreprocessor`.
        max_pieces: the pieces of a text read (`text.dense.MAX_PIECES`).

    Returns:
        the `TaggingPreprocessor` features (without labels), and
        `over_limit` (int32 [B]: 1 where a text holds more pieces).
    """
    words, word_start, word_end = \
        tf_text.WhitespaceTokenizer().tokenize_with_offsets(text)
    offsets = {}
    for side, values in (("start", word_start), ("end", word_end)):
        byte = tf.cast(values, tf.int32).to_tensor(default_value=-1)
        offsets[f"byte_{side}"] = byte
        offsets[f"char_{side}"] = tf.where(byte >= 0, char_offsets(
            text, tf.maximum(byte, 0)), -1)
    return word_windows(vocab, tf.cast(words.row_lengths(), tf.int32),
                        tokenizer.fused().tokenize(words.flat_values),
                        offsets, seq_length, doc_stride, max_pieces)


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
