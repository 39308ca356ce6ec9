"""Sentences -> word pieces in windows, with each word's label on its first
piece (in-graph): the one featurizer of token tagging, and of per-word
features (`bert-tf features`, the embeddings export's `word_features`).

Words are the whitespace-separated parts of the text (a CoNLL or TFDS
sentence is its tokens joined by spaces). Each word becomes its word
pieces (a word the tokenizer drops becomes `[UNK]`, so every word gets a
prediction); as in the paper, a word's label and prediction sit on its
first piece and the other pieces carry no loss. Text longer than the
model goes through overlapping windows (`doc_stride`); each word is
predicted in the one window where its first piece is max-context.
Offsets are Unicode code points into the caller's string.
"""

import keras
import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf.text.features import (INPUT_NAMES, cut_to_longest,
                                   legacy_seq_length)
from bert_tf.text.tokenizer import (BertTokenizer, byte_to_char_offsets,
                                    preprocessor_config)
from bert_tf.text.windows import gather_pieces, place, stride_windows


@keras.saving.register_keras_serializable(package="bert_tf")
class TaggingPreprocessor(keras.layers.Layer):
    """Sentences -> windows of encoder inputs, word positions and offsets.

    Args:
        vocabulary: a vocab.txt path, a `Vocab` or a token list.
        seq_length: window length, special tokens included.
        doc_stride: word pieces between the starts of adjacent windows.
        lower_case, strip_accents: see `BertTokenizer`.

    Call args:
        text: tf.string [batch].
        word_labels: optional int ragged [batch, (words)] label ids; with
            them the output has `labels` and `label_weights` [W, L].

    Returns:
        dict with one row per window (W in all): `input_word_ids`,
        `input_mask`, `input_type_ids` (int32 [W, L]), `example_index`
        (int32 [W]), `word_index` (int32 [W, L]: the word whose first piece
        is at a position, -1 elsewhere), `word_is_max` (bool [W, L]: where
        that word is predicted); and one row per sentence: `num_words`
        (int32 [B]), `word_char_start`, `word_char_end`, `word_byte_start`,
        `word_byte_end` (int32 [B, N], -1 padded).

    Examples:
        >>> pre = TaggingPreprocessor(["[PAD]", "[UNK]", "[CLS]", "[SEP]",
        ...                            "[MASK]", "ann", "lives", "in", "oslo",
        ...                            "##w"], seq_length=8)
        >>> out = pre(tf.constant(["Ann lives in Oslow"]),
        ...           tf.ragged.constant([[1, 0, 0, 3]]))
        >>> out["input_word_ids"].numpy().tolist()
        [[2, 5, 6, 7, 8, 9, 3, 0]]
        >>> out["word_index"].numpy().tolist()
        [[-1, 0, 1, 2, 3, -1, -1, -1]]
        >>> out["labels"].numpy().tolist(), out["label_weights"].numpy().tolist()
        ([[0, 1, 0, 0, 3, 0, 0, 0]], [[0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0]])
    """

    def __init__(self, vocabulary, seq_length=128, doc_stride=64,
                 lower_case=None, strip_accents=None, **kwargs):
        seq_length = legacy_seq_length(kwargs, seq_length,
                                       "TaggingPreprocessor")
        kwargs.pop("dtype", None)
        super().__init__(dtype="int32", **kwargs)
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        if seq_length < 3 or doc_stride < 1:
            raise ValueError(f"seq_length = {seq_length} must be "
                             f">= 3 and doc_stride = {doc_stride} >= 1.")
        # === Config ===
        self.seq_length = int(seq_length)
        self.doc_stride = int(doc_stride)

        # === Layers ===
        self.tokenizer = BertTokenizer(vocabulary, lower_case, strip_accents,
                                       name="tokenizer")
        self.built = True

    def call(self, text, word_labels=None):
        vocab = self.tokenizer.vocab
        length = self.seq_length
        text = tf.convert_to_tensor(text, tf.string)
        words, byte_start, byte_end = tf_text.regex_split_with_offsets(
            text, r"\s+")
        char_start, char_end = byte_to_char_offsets(text, byte_start,
                                                    byte_end)
        pieces = self.tokenizer(words.flat_values)          # [words, (p)]
        empty = tf.cast(pieces.row_lengths() == 0, tf.int64)
        unknown = tf.RaggedTensor.from_row_lengths(
            tf.fill([tf.reduce_sum(empty)], vocab.unk_id), empty)
        pieces = tf.concat([pieces, tf.cast(unknown, pieces.dtype)], axis=1)
        per_word = pieces.row_lengths()
        per_sentence = tf.reduce_sum(words.with_flat_values(per_word),
                                     axis=1)
        ids = tf.RaggedTensor.from_row_lengths(pieces.flat_values,
                                               per_sentence)
        # The word of each piece (within its sentence), on its first piece.
        word_in_sentence = tf.ragged.range(words.row_lengths()).flat_values
        first = tf.ragged.range(per_word).flat_values == 0
        word_of_piece = tf.repeat(word_in_sentence, per_word)
        first_word = ids.with_flat_values(tf.where(first, word_of_piece, -1))

        windows = stride_windows(per_sentence, length - 2, self.doc_stride)
        packed, _ = tf_text.combine_segments(
            [gather_pieces(ids, windows)], start_of_sequence_id=vocab.cls_id,
            end_of_segment_id=vocab.sep_id)
        word_ids, mask = tf_text.pad_model_inputs(packed, length,
                                                  pad_value=vocab.pad_id)
        lead = tf.ones_like(windows["example"])
        word_index = place(gather_pieces(first_word, windows), lead, length)
        is_max = place(tf.cast(windows["is_max"], tf.int64), lead, length, 0)
        predicted = (word_index >= 0) & (is_max > 0)

        def per_sentence_words(values):
            return tf.cast(values.to_tensor(default_value=-1), tf.int32)

        features = {
            "input_word_ids": tf.cast(word_ids, tf.int32),
            "input_mask": tf.cast(mask, tf.int32),
            "input_type_ids": tf.zeros_like(tf.cast(word_ids, tf.int32)),
            "example_index": tf.cast(windows["example"], tf.int32),
            "word_index": word_index,
            "word_is_max": predicted,
            "num_words": tf.cast(words.row_lengths(), tf.int32),
            "word_char_start": per_sentence_words(char_start),
            "word_char_end": per_sentence_words(char_end),
            "word_byte_start": per_sentence_words(byte_start),
            "word_byte_end": per_sentence_words(byte_end),
        }
        if word_labels is not None:
            labels = tf.cast(word_labels, tf.int64).to_tensor(
                default_value=0)
            sentence = tf.cast(windows["example"], tf.int32)
            rows = tf.broadcast_to(sentence[:, None], tf.shape(word_index))
            at = tf.stack([rows, tf.maximum(word_index, 0)], axis=-1)
            features["labels"] = tf.where(
                word_index >= 0, tf.cast(tf.gather_nd(labels, at), tf.int32),
                0)
            features["label_weights"] = tf.cast(predicted, tf.float32)
        return features

    def trimmed(self, text, fixed_length=False):
        """`self(text)` with the windows cut to the length of the
        longest (the serving and evaluation graphs), unless
        `fixed_length`."""
        windows = self(text)
        if fixed_length:
            return windows
        return cut_to_longest(windows,
                              (*INPUT_NAMES, "word_index", "word_is_max"))

    def get_config(self):
        return preprocessor_config(
            super().get_config(), self.tokenizer,
            seq_length=self.seq_length, doc_stride=self.doc_stride)
