"""Sentences -> word pieces in windows, with each word's label on its first
piece (in-graph): the one featurizer of token tagging, and of per-word
features (`bert-tf features`, the embeddings export's `word_features`).

Raw text is split into words as BERT's basic tokenizer splits it, and as
HF's token-classification pipelines see words: at whitespace, and each
punctuation mark and CJK character a word of its own (`bert_words`: a
word is a piece that does not continue another, `##`, with the pieces
that continue it), so an entity never holds the punctuation beside it.
Pre-tokenized text (`pretokenized=True`: a CoNLL or TFDS sentence is its
tokens joined by spaces, and its labels count those) keeps its words:
each becomes its word pieces (one the tokenizer drops becomes `[UNK]`, so
every labelled word gets a prediction). As in the paper, a word's label and prediction sit on its
first piece and the other pieces carry no loss. Text longer than the
model goes through overlapping windows (`doc_stride`); each word is
predicted in the one window where its first piece is max-context.
Offsets are Unicode code points into the caller's string.
"""

import keras
import tensorflow as tf

from bert_tf.text.dense import (capped, dense_windows, max_context,
                                padded_dense, split_words)
from bert_tf.text.features import (INPUT_NAMES, cut_to_longest,
                                   legacy_seq_length)
from bert_tf.text.tokenizer import (BertTokenizer, byte_to_char_offsets,
                                    preprocessor_config)


@keras.saving.register_keras_serializable(package="bert_tf")
class TaggingPreprocessor(keras.layers.Layer):
    """Sentences -> windows of encoder inputs, word positions and offsets.

    Args:
        vocabulary: a vocab.txt path, a `Vocab` or a token list.
        seq_length: window length, special tokens included.
        doc_stride: word pieces between the starts of adjacent windows.
        lower_case, strip_accents: see `BertTokenizer`.
        pretokenized: the texts are words joined by spaces (training and
            evaluation data): each space-separated part is one word. False:
            raw text, split into words as BERT splits it (`bert_words`).

    Call args:
        text: tf.string [batch].
        word_labels: optional int ragged [batch, (words)] label ids of
            pre-tokenized text; with them the output has `labels` and
            `label_weights` [W, L].

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
        ...                            "##w"], seq_length=8, pretokenized=True)
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
                 lower_case=None, strip_accents=None, pretokenized=False,
                 **kwargs):
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
        self.pretokenized = bool(pretokenized)

        # === Layers ===
        self.tokenizer = BertTokenizer(vocabulary, lower_case, strip_accents,
                                       name="tokenizer")
        self.built = True

    def call(self, text, word_labels=None):
        text = tf.convert_to_tensor(text, tf.string)
        if word_labels is not None and not self.pretokenized:
            raise ValueError("word_labels count the words of pre-tokenized "
                             "text: build the TaggingPreprocessor with "
                             "pretokenized=True.")
        if self.pretokenized:
            words, num_words, byte_start, byte_end = split_words(text)
            pieces = self.tokenizer(words)
        else:
            num_words, pieces, byte_start, byte_end = bert_words(
                self.tokenizer.vocab, self.tokenizer.dense_with_offsets(text))
        char_start, char_end = byte_to_char_offsets(
            text, tf.maximum(byte_start, 0), tf.maximum(byte_end, 0))
        features = word_windows(
            self.tokenizer.vocab, num_words, pieces,
            {"byte_start": byte_start, "byte_end": byte_end,
             "char_start": tf.where(byte_start >= 0, char_start, -1),
             "char_end": tf.where(byte_end >= 0, char_end, -1)},
            self.seq_length, self.doc_stride)
        if word_labels is not None:
            word_index = features["word_index"]
            labels = tf.cast(word_labels, tf.int32).to_tensor(
                default_value=0)
            rows = tf.broadcast_to(features["example_index"][:, None],
                                   tf.shape(word_index))
            at = tf.stack([rows, tf.maximum(word_index, 0)], axis=-1)
            features["labels"] = tf.where(
                word_index >= 0, tf.gather_nd(labels, at), 0)
            features["label_weights"] = tf.cast(features["word_is_max"],
                                                tf.float32)
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
            seq_length=self.seq_length, doc_stride=self.doc_stride,
            pretokenized=self.pretokenized)


def bert_words(vocab, pieces):
    """The words of texts as BERT splits them, from their word pieces: a
    word is a piece that does not continue another (`##`) and the pieces
    that continue it. The tokenizer already split at whitespace, at each
    punctuation mark and CJK character, and dropped what BERT drops
    (control characters), so these are the basic tokenizer's words, and
    the words HF's token-classification pipelines aggregate.

    Args:
        vocab: the `Vocab`.
        pieces: `BertTokenizer.dense_with_offsets(text)` (or the fused
            tokenizer's, as dense): `lengths` [B], `ids`, `byte_start`,
            `byte_end` [B, n].

    Returns:
        (num_words int32 [B], the pieces of every word ragged [words,
        (p)], word byte starts and ends int32 [B, N], -1 padded).

    Examples:
        >>> from bert_tf.text.tokenizer import BertTokenizer
        >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]",
        ...                            "[MASK]", "paris", "##ian", "."])
        >>> words, pieces, start, end = bert_words(
        ...     tokenizer.vocab, tokenizer.dense_with_offsets(
        ...         tf.constant(["Parisian."])))
        >>> words.numpy().tolist(), pieces.to_list()
        ([2], [[5, 6], [7]])
        >>> start.numpy().tolist(), end.numpy().tolist()
        ([[0, 8]], [[8, 9]])
    """
    suffix = tf.constant([token.startswith("##") for token in vocab.tokens])
    ids = tf.cast(pieces["ids"], tf.int32)
    position = tf.range(tf.shape(ids)[1])[None, :]
    valid = position < pieces["lengths"][:, None]
    starts = valid & ((position == 0) | ~tf.gather(suffix, ids))
    num_words = tf.reduce_sum(tf.cast(starts, tf.int32), axis=1)
    flat_starts = tf.boolean_mask(starts, valid)
    first = tf.cast(tf.where(flat_starts)[:, 0], tf.int32)
    # Each word ends before the next one starts (the last at the end);
    # no word (no piece at all) leaves `last` empty too.
    last = tf.concat([first[1:], tf.shape(flat_starts)], 0)[
        :tf.size(first)] - 1
    word_pieces = tf.RaggedTensor.from_row_starts(
        tf.boolean_mask(ids, valid), first, validate=False)

    def per_word(name, index):
        values = tf.gather(tf.boolean_mask(
            tf.cast(pieces[name], tf.int32), valid), index)
        return tf.RaggedTensor.from_row_lengths(
            values, num_words, validate=False).to_tensor(default_value=-1)

    return (num_words, word_pieces, per_word("byte_start", first),
            per_word("byte_end", last))


def _runs(counts, total):
    """The run each of `total` items is in, for runs of `counts` items
    (int32 [total]; empty runs are skipped)."""
    starts = tf.math.cumsum(counts, exclusive=True)
    marks = tf.scatter_nd(starts[:, None], tf.ones_like(starts), [total + 1])
    return tf.math.cumsum(marks)[:total] - 1


def word_windows(vocab, num_words, pieces, offsets, seq_length, doc_stride,
                 max_pieces=None):
    """The windows of tokenized sentences, in dense ops: what
    `TaggingPreprocessor` and the TFLite graph (`tasks/tagging/tflite.py`)
    share.

    Args:
        vocab: the `Vocab`.
        num_words: int32 [B] words per sentence.
        pieces: the pieces of every word of the batch, ragged
            [words, (p)]; a word with none reads `[UNK]`.
        offsets: the words' `byte_start`, `byte_end`, `char_start`,
            `char_end`, int32 [B, N] (-1 padded).
        seq_length, doc_stride: as `TaggingPreprocessor`.
        max_pieces: if given, the pieces of a sentence read; the output
            then has `over_limit` (int32 [B], 1 where a sentence holds
            more).

    Returns:
        the `TaggingPreprocessor` features without labels.
    """
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
    limited = {}
    if max_pieces is not None:
        lengths, limited["over_limit"] = capped(lengths, max_pieces)
    windows = dense_windows(lengths, seq_length - 2, doc_stride)
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
    return {
        "input_word_ids": word_ids,
        "input_mask": tf.cast(position <= size + 1, tf.int32),
        "input_type_ids": tf.zeros_like(word_ids),
        "example_index": example,
        "word_index": word_index,
        "word_is_max": (word_index >= 0) & max_context(windows, piece),
        "num_words": num_words,
        **{f"word_{k}": offsets[k] for k in ("char_start", "char_end",
                                              "byte_start", "byte_end")},
        **limited,
    }
