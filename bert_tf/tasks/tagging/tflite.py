"""Token tagging as one TFLite graph: `text` raw strings [B] in, the
SavedModel's entities out (`type`, `text`, `start`, `end`, `score`,
`count`), with tf-text's TFLite kernels for tokenization and TFLite
builtins for the rest (see `bert_tf/serving/tflite.py`).

`tagging_windows` is `TaggingPreprocessor` in dense ops: the same words,
pieces, windows and offsets on plain text (a test holds them equal), so
a text of any length is tagged whole inside one call. One difference:
words are split at Unicode whitespace (tf-text's `WhitespaceTokenizer`,
which has a TFLite kernel) where the SavedModel splits at ASCII
whitespace, so a no-break space separates two words here. The entities
come from the same `decode_entities` as evaluation and the SavedModel.
"""

import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf.tasks.tagging.decoding import OUTPUTS, decode_entities
from bert_tf.text.dense import (MAX_PIECES, capped, char_offsets,
                                 dense_windows, max_context, padded_dense)
from bert_tf.text.features import INPUT_NAMES, cut_to_longest
from bert_tf.text.tokenizer import BertTokenizer


def _runs(counts, total):
    """The run each of `total` items is in, for runs of `counts` items
    (int32 [total]; empty runs are skipped)."""
    starts = tf.math.cumsum(counts, exclusive=True)
    marks = tf.scatter_nd(starts[:, None], tf.ones_like(starts), [total + 1])
    return tf.math.cumsum(marks)[:total] - 1


def tagging_windows(tokenizer, vocab, text, seq_length, doc_stride,
                    max_pieces=MAX_PIECES):
    """`TaggingPreprocessor(text)` with dense ops.

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
    num_words = tf.cast(words.row_lengths(), tf.int32)
    pieces = tokenizer.fused().tokenize(words.flat_values)
    # A word the tokenizer drops reads [UNK] (the padding here).
    per_word = tf.maximum(tf.cast(pieces.row_lengths(), tf.int32), 1)
    pieces = tf.pad(padded_dense(pieces, vocab.unk_id), [[0, 1], [0, 0]],
                    constant_values=vocab.unk_id)
    total_words = tf.size(per_word)
    sentence = _runs(num_words, total_words)
    lengths = tf.math.unsorted_segment_sum(per_word, sentence,
                                           tf.size(num_words))
    total = tf.reduce_sum(per_word)
    # Per piece of all sentences: its word; per word: its first piece.
    # One padding entry each keeps every gather in range.
    word_of_piece = tf.pad(_runs(per_word, total), [[0, 1]],
                           constant_values=total_words)
    first_piece = tf.pad(tf.math.cumsum(per_word, exclusive=True),
                         [[0, 1]], constant_values=total)

    read, over_limit = capped(lengths, max_pieces)
    windows = dense_windows(read, seq_length - 2, doc_stride)
    example = windows["example"]
    position = tf.range(seq_length)[None, :]
    size = windows["size"][:, None]
    piece = windows["first"][:, None] + position - 1
    in_text = (position >= 1) & (position <= size)
    sentence_start = tf.math.cumsum(lengths, exclusive=True)
    at = tf.clip_by_value(tf.gather(sentence_start, example)[:, None] +
                          piece, 0, total)
    word = tf.gather(word_of_piece, at)
    within = at - tf.gather(first_piece, word)
    ids = tf.gather_nd(pieces, tf.stack([word, tf.clip_by_value(
        within, 0, tf.shape(pieces)[1] - 1)], -1))
    word_ids = tf.where(in_text, ids, vocab.pad_id)
    word_ids = tf.where(position == size + 1, vocab.sep_id, word_ids)
    word_ids = tf.where(position == 0, vocab.cls_id, word_ids)
    first_word = tf.math.cumsum(num_words, exclusive=True)
    word_index = tf.where(in_text & (within == 0), word - tf.gather(
        first_word, example)[:, None], -1)

    def per_sentence(values):
        return tf.cast(values, tf.int32).to_tensor(default_value=-1)

    byte_start, byte_end = per_sentence(word_start), per_sentence(word_end)

    def chars(offsets):
        return tf.where(offsets >= 0, char_offsets(
            text, tf.maximum(offsets, 0)), -1)

    return {
        "input_word_ids": word_ids,
        "input_mask": tf.cast(position <= size + 1, tf.int32),
        "input_type_ids": tf.zeros_like(word_ids),
        "example_index": example,
        "word_index": word_index,
        "word_is_max": (word_index >= 0) & max_context(windows, piece),
        "num_words": num_words,
        "word_char_start": chars(byte_start),
        "word_char_end": chars(byte_end),
        "word_byte_start": byte_start,
        "word_byte_end": byte_end,
        "over_limit": over_limit,
    }


class TaggingTFLiteModule(tf.Module):
    """`serve(text)` -> the tagging SavedModel's outputs (module
    docstring). Windows run at their longest row's length."""

    def __init__(self, model, spec, vocab):
        super().__init__(name="bert_tagger_tflite")
        self.model_variables = [v.value for v in model.variables]
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
