"""Sentences -> word pieces in windows (in-graph): the one featurizer of
token tagging (`bert_tf.tasks.tagging.preprocessor.TaggingPreprocessor`
adds each word's label on its first piece) and of per-word features
(`bert-tf features`, the embeddings export's `word_features`), built on
the windows, framing and offsets of `bert_tf.text.windows`.

Raw text is split into words as BERT's basic tokenizer splits it, and as
HF's token-classification pipelines see words: at whitespace, and each
punctuation mark and CJK character a word of its own (`bert_words`: a
word is a piece that does not continue another, `##`, with the pieces
that continue it), so an entity never holds the punctuation beside it.
Pre-tokenized text (`pretokenized=True`: a CoNLL or TFDS sentence is its
tokens joined by spaces, and its labels count those) keeps its words:
each becomes its word pieces (one the tokenizer drops becomes `[UNK]`, so
every labelled word gets a prediction). As in the paper, a word's label
and prediction sit on its first piece and the other pieces carry no loss.
Text longer than the
model goes through overlapping windows (`doc_stride`); each word is
predicted in the one window where its first piece is max-context.
Offsets are Unicode code points into the caller's string.
"""

import keras
import tensorflow as tf

from bert_tf import _moved
from bert_tf.text.dense import split_words
from bert_tf.text.features import (INPUT_NAMES, cut_to_longest,
                                   legacy_seq_length)
from bert_tf.text.tokenizer import BertTokenizer, preprocessor_config
from bert_tf.text.windows import bert_words, char_offsets, word_windows


@keras.saving.register_keras_serializable(package="bert_tf")
class WordWindows(keras.layers.Layer):
    """Sentences -> windows of encoder inputs, word positions and offsets:
    the featurizer of token tagging (`TaggingPreprocessor` adds labels)
    and of per-word features (`bert-tf features`, the embeddings export's
    `word_features`).

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

    Returns:
        dict with one row per window (W in all): `input_word_ids`,
        `input_mask`, `input_type_ids` (int32 [W, L]), `example_index`
        (int32 [W]), `word_index` (int32 [W, L]: the word whose first piece
        is at a position, -1 elsewhere), `word_is_max` (bool [W, L]: where
        that word is predicted); and one row per sentence: `num_words`
        (int32 [B]), `word_char_start`, `word_char_end`, `word_byte_start`,
        `word_byte_end` (int32 [B, N], -1 padded).

    Examples:
        >>> pre = WordWindows(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
        ...                    "ann", "lives", "in", "oslo", "##w"],
        ...                   seq_length=8, pretokenized=True)
        >>> out = pre(tf.constant(["Ann lives in Oslow"]))
        >>> out["input_word_ids"].numpy().tolist()
        [[2, 5, 6, 7, 8, 9, 3, 0]]
        >>> out["word_index"].numpy().tolist()
        [[-1, 0, 1, 2, 3, -1, -1, -1]]
        >>> out["word_char_start"].numpy().tolist()
        [[0, 4, 10, 13]]
    """

    def __init__(self, vocabulary, seq_length=128, doc_stride=64,
                 lower_case=None, strip_accents=None, pretokenized=False,
                 **kwargs):
        seq_length = legacy_seq_length(kwargs, seq_length,
                                       type(self).__name__)
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

    def call(self, text):
        text = tf.convert_to_tensor(text, tf.string)
        if self.pretokenized:
            words, num_words, byte_start, byte_end = split_words(text)
            pieces = self.tokenizer(words)
        else:
            num_words, pieces, byte_start, byte_end = bert_words(
                self.tokenizer.vocab, self.tokenizer.dense_with_offsets(text))
        char_start, char_end = char_offsets(
            text, tf.maximum(byte_start, 0), tf.maximum(byte_end, 0))
        return word_windows(
            self.tokenizer.vocab, num_words, pieces,
            {"byte_start": byte_start, "byte_end": byte_end,
             "char_start": tf.where(byte_start >= 0, char_start, -1),
             "char_end": tf.where(byte_end >= 0, char_end, -1)},
            self.seq_length, self.doc_stride)

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


def __getattr__(name):
    return _moved.renamed(__name__, name)
