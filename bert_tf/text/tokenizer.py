"""WordPiece tokenization as a Keras layer, entirely in-graph (tf-text).

Text is normalized the way the original BERT `BasicTokenizer` does it
(invalid UTF-8 replaced, control characters dropped, whitespace unified,
then for uncased vocabs: lower-case, NFD, accents stripped) and then split
and word-pieced by `tf_text.FastBertTokenizer`'s two parts
(`FastBertNormalizer`, `FastWordpieceTokenizer`). FastBertTokenizer's own
`lower_case_nfd_strip_accents` is not used: it also applies compatibility
folding (ß→ss, ﬁ→fi, fullwidth→ASCII) that the original does not, so ids
would differ from every released BERT checkpoint's tokenizer on such text.
Rows of plain text (ASCII and Latin-1 letters) take that fused path anyway,
because there it is exact and twice as fast.
"""

import functools

import keras
import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf.text.dense import padded_dense
from bert_tf.text.vocab import Vocab, read_vocab, validate_tokens

# The original makes words of more than 100 characters [UNK]; tf-text
# counts bytes. Plain rows (1 byte a character but Latin-1 letters) keep
# 100 bytes; the others allow 4 bytes a character, so that a Thai phrase,
# a run of kana or an emoji sequence of up to 100 characters is word-pieced
# as the original does (a word over 100 characters and under 400 bytes is
# then word-pieced where the original gives [UNK]: rare, and the lesser
# error).
MAX_BYTES_PER_WORD = 100
MAX_BYTES_PER_WIDE_WORD = 400

# Text on which FastBertTokenizer's fused normalization equals the original
# BERT's: printable ASCII, tab/newline, and (uncased) Latin-1 letters but ß,
# (cased) anything but control/format characters and U+FFFD.
_PLAIN_UNCASED = r"[\t\n\r\x{20}-\x{7e}\x{c0}-\x{de}\x{e0}-\x{ff}]*"
_PLAIN_CASED = (r"[^\x{0}-\x{8}\x{b}\x{c}\x{e}-\x{1f}\x{7f}-\x{9f}"
                r"\p{Cf}\x{fffd}]*")


def normalize_text(text, lower_case=True, strip_accents=None):
    """The original BERT text clean-up, elementwise on a string tensor.

    Args:
        text: tf.string tensor of any shape.
        lower_case: lower-case the text (uncased vocabs).
        strip_accents: NFD-decompose and drop combining marks; defaults to
            `lower_case`, as in the original.

    Examples:
        >>> normalize_text(tf.constant("Café\\x00 Déjà")).numpy().decode()
        'cafe deja'
    """
    strip_accents = lower_case if strip_accents is None else strip_accents
    text = tf.strings.unicode_transcode(
        text, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD)
    text = tf.strings.regex_replace(text, r"[\t\n\r]", " ")
    text = tf.strings.regex_replace(text, r"[\x{0}\x{fffd}\p{Cc}\p{Cf}]", "")
    if lower_case:
        text = tf.strings.lower(text, encoding="utf-8")
    if strip_accents:
        text = tf_text.normalize_utf8(text, "NFD")
        text = tf.strings.regex_replace(text, r"\p{Mn}", "")
    return text


def _next_offsets(starts, lengths):
    """End byte of each character: the next one's start, or the length."""
    flat = starts.flat_values
    limits = starts.row_limits()
    last = tf.boolean_mask(limits - 1, limits > starts.row_starts())
    ends = tf.tensor_scatter_nd_update(
        tf.concat([flat[1:], flat[:1]], axis=0), last[:, None],
        tf.boolean_mask(tf.cast(lengths, flat.dtype),
                        limits > starts.row_starts()))
    return starts.with_flat_values(ends)


def _eager_once(build):
    """`build(*args)` made once per arguments when it runs eagerly: a
    tf-text tokenizer builds its model from the vocab on each
    construction (0.1-0.3 s a `BertTokenizer` for a 30k vocab), and every
    preprocessor, export and evaluation of the same vocab made it again.
    Its model is an immutable eager constant, safe to share (on the CPU,
    where tf-text's kernels run, whatever device scope made it first);
    inside a TF1 graph the tensors belong to that graph, so nothing is
    kept."""
    shared = functools.lru_cache(maxsize=8)(build)

    @functools.wraps(build)
    def made(*args):
        with tf.init_scope(), tf.device("/CPU:0"):
            return shared(*args) if tf.executing_eagerly() else build(*args)

    return made


@_eager_once
def _fast_bert_tokenizer(vocabulary, normalize, max_bytes):
    return tf_text.FastBertTokenizer(
        vocab=list(vocabulary), suffix_indicator="##",
        max_bytes_per_word=max_bytes, token_out_type=tf.int32,
        unknown_token="[UNK]", lower_case_nfd_strip_accents=normalize)


@_eager_once
def _tokenizer_parts(vocabulary, normalize, max_bytes):
    """`_fast_bert_tokenizer(...)` as the two parts its `tokenize` runs
    (normalizer, word-piecer): with offsets, ours map them back by one
    flat gather, where tf-text's ragged batch gather costs 4x the ops and
    ~0.3 s of Python broadcasting at each trace."""
    return (tf_text.FastBertNormalizer(
                lower_case_nfd_strip_accents=normalize),
            tf_text.FastWordpieceTokenizer(
                vocab=list(vocabulary), suffix_indicator="##",
                max_bytes_per_word=max_bytes,
                token_out_type=tf.int32, unknown_token="[UNK]"))


def _word_pieces(parts, text):
    normalizer, wordpiece = parts
    return wordpiece.tokenize(normalizer.normalize(text))


def _pieces_and_offsets(parts, text):
    """(ids, starts, ends, offsets), ragged [B, (n)]: the pieces, their
    byte starts and ends in the normalized text, and the byte of `text`
    each normalized byte came from."""
    normalizer, wordpiece = parts
    normalized, offsets = normalizer.normalize_with_offsets(text)
    return (*wordpiece.tokenize_with_offsets(normalized), offsets)


def _word_pieces_with_offsets(parts, text):
    """(ids, byte starts, byte ends) ragged [B, (n)], the offsets into
    `text`: FastBertTokenizer.tokenize_with_offsets's values."""
    ids, starts, ends, offsets = _pieces_and_offsets(parts, text)
    return (ids, _gather_in_rows(offsets, starts),
            _gather_in_rows(offsets, ends))


def _gather_in_rows(values, indices):
    """`values[b][indices[b][j]]` for ragged [B, (n)] `values` and
    `indices`: one flat gather."""
    row_starts = tf.gather(values.row_starts(), indices.value_rowids())
    return indices.with_flat_values(
        tf.gather(values.flat_values, indices.flat_values + row_starts))


def _vocab_tokens(vocabulary):
    if isinstance(vocabulary, Vocab):
        return list(vocabulary.tokens)
    if isinstance(vocabulary, (list, tuple)):
        tokens = [str(t) for t in vocabulary]
        validate_tokens(tokens)
        return tokens
    return list(read_vocab(vocabulary).tokens)


@keras.saving.register_keras_serializable(package="bert_tf")
class BertTokenizer(keras.layers.Layer):
    """Strings -> WordPiece ids (ragged), optionally with byte offsets.

    Works eagerly, inside `tf.data.Dataset.map` and inside a `tf.function`
    or exported SavedModel (the vocab is a graph constant).

    Args:
        vocabulary: a vocab.txt path, a `Vocab` or a list of tokens.
        lower_case: lower-case input (uncased vocab). None: decided from the
            vocab (a vocab with upper-case word pieces is cased).
        strip_accents: strip accents; None: same as `lower_case`.

    Call args:
        text: tf.string [batch] (or a scalar).

    Returns:
        int32 ids, a RaggedTensor [batch, (tokens)] (a 1-D Tensor for a
        scalar input).

    Examples:
        >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]",
        ...                            "[MASK]", "hello", "world", "##s", "!"])
        >>> tokenizer(tf.constant(["Hello worlds!"])).to_list()
        [[5, 6, 7, 8]]
    """

    def __init__(self, vocabulary, lower_case=None, strip_accents=None,
                 **kwargs):
        kwargs.pop("dtype", None)
        super().__init__(dtype="int32", **kwargs)
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        # === Config ===
        self.vocabulary = _vocab_tokens(vocabulary)
        vocab = Vocab(tuple(self.vocabulary))
        self.lower_case = (not vocab.is_cased if lower_case is None
                           else bool(lower_case))
        self.strip_accents = strip_accents
        self.vocab = vocab

        # === Tokenizers ===
        self._exact = self._parts(normalize=False,
                                  max_bytes=MAX_BYTES_PER_WIDE_WORD)
        # Rows of plain text (ASCII + Latin-1 letters, no control
        # characters) take FastBertTokenizer's fused normalization, which
        # equals the original there and is ~2x faster; the rest (and any
        # non-standard lower/strip combination) take `normalize_text`.
        strip = self.lower_case if strip_accents is None else strip_accents
        self._fast = None
        if strip == self.lower_case:
            self._fast = self._parts(normalize=self.lower_case)
            self._plain_text = (_PLAIN_UNCASED if self.lower_case else
                                _PLAIN_CASED)
        self.built = True

    def _parts(self, normalize, max_bytes=MAX_BYTES_PER_WORD):
        # tf-text turns its model buffer into a constant from a list of
        # bytes: ~2 s for a 30k vocab inside a graph, 0.1 s eagerly (made
        # in an init scope).
        return _tokenizer_parts(tuple(self.vocabulary), normalize,
                                max_bytes)

    def fused(self):
        """The `tf_text.FastBertTokenizer` with fused normalization alone:
        the tokenizer TFLite kernels can run. Equal to `call` on plain text
        (see the module docstring); on other text it also folds
        compatibility characters and keeps control characters."""
        return _fast_bert_tokenizer(tuple(self.vocabulary), self.lower_case,
                                    MAX_BYTES_PER_WORD)

    def fused_with_offsets(self, text):
        """`fused().tokenize_with_offsets(text)` as (ids [B, (n)], byte
        starts, byte ends [B, n_max + 1] int32, 0-padded): the same
        values, the offsets mapped back to the input by a dense gather
        (tf-text's ragged gather needs RaggedRange, which TFLite lacks)."""
        ids, starts, ends, offsets = _pieces_and_offsets(
            self._fast or self._parts(normalize=self.lower_case), text)
        offsets = padded_dense(offsets, 0)
        return (ids,
                tf.gather(offsets, padded_dense(starts, 0), batch_dims=1),
                tf.gather(offsets, padded_dense(ends, 0), batch_dims=1))

    def dense_with_offsets(self, text):
        """`tokenize_with_offsets(text)` as dense rows: `ids`,
        `byte_start`, `byte_end` (int32 [B, n_max + 1], 0 after each row)
        and `lengths` (int32 [B]). A batch of plain text takes the fused
        tokenizer (`fused_with_offsets`, equal there), the rest the exact
        path."""
        text = tf.convert_to_tensor(text, dtype=tf.string)

        def exact():
            ids, starts, ends = self.tokenize_with_offsets(text)
            return (tf.cast(ids.row_lengths(), tf.int32),
                    padded_dense(ids, 0), padded_dense(starts, 0),
                    padded_dense(ends, 0))

        def fused():
            ids, starts, ends = self.fused_with_offsets(text)
            return (tf.cast(ids.row_lengths(), tf.int32),
                    padded_dense(ids, 0), starts, ends)

        if self._fast is None:
            values = exact()
        else:
            values = tf.cond(tf.reduce_all(tf.strings.regex_full_match(
                text, self._plain_text)), fused, exact)
        return dict(zip(("lengths", "ids", "byte_start", "byte_end"),
                        values))

    @property
    def vocab_size(self):
        return len(self.vocabulary)

    def _normalize(self, text):
        return normalize_text(text, self.lower_case, self.strip_accents)

    def call(self, text):
        text = tf.convert_to_tensor(text, dtype=tf.string)
        if text.shape.rank == 0:
            return self.call(text[None])[0]
        if self._fast is None:
            return _word_pieces(self._exact, self._normalize(text))
        plain = tf.strings.regex_full_match(text, self._plain_text)

        def mixed():
            fast = _word_pieces(self._fast, tf.where(plain, text, ""))
            slow = _word_pieces(self._exact,
                                self._normalize(tf.where(plain, "", text)))
            # Each row is empty in one of the two.
            return tf.concat([fast, slow], axis=1)

        # Most batches are all plain text: one op instead of both paths.
        return tf.cond(tf.reduce_all(plain),
                       lambda: _word_pieces(self._fast, text), mixed)

    def tokenize_with_offsets(self, text):
        """Ids plus byte offsets into the *original* strings.

        The same ids as `call`; offsets are [start, end) byte positions of
        each piece in the un-normalized input (for span answers).

        Returns:
            (ids, starts, ends), each a RaggedTensor [batch, (tokens)].

        Examples:
            >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]",
            ...                            "[MASK]", "cafe", "ole"])
            >>> ids, starts, ends = tokenizer.tokenize_with_offsets(
            ...     tf.constant(["Café Olé"]))
            >>> ids.to_list(), starts.to_list(), ends.to_list()
            ([[5, 6]], [[0, 6]], [[5, 10]])
        """
        text = tf.convert_to_tensor(text, dtype=tf.string)
        scalar = text.shape.rank == 0
        if scalar:
            text = text[None]
        # Normalize character by character only to learn how many
        # normalized bytes each source character became; the ids come from
        # the whole-string normalization (as in `call`: lower-casing is
        # context-sensitive for final sigma, with the same byte length).
        chars, char_starts = tf.strings.unicode_decode_with_offsets(
            text, "UTF-8", errors="replace", replacement_char=0xFFFD)
        char_ends = _next_offsets(char_starts, tf.strings.length(text))
        char_strings = tf.strings.unicode_encode(chars[..., None], "UTF-8")
        normalized = tf.ragged.map_flat_values(self._normalize, char_strings)
        norm_lengths = tf.cast(tf.strings.length(normalized), tf.int64)
        norm_starts = tf.math.cumsum(norm_lengths, axis=-1) - norm_lengths
        ids, starts, ends = _word_pieces_with_offsets(
            self._exact, self._normalize(text))

        def to_source(offsets, char_bounds):
            # Index of the character whose normalized bytes hold each offset.
            index = tf.searchsorted(
                norm_starts.to_tensor(default_value=tf.int64.max),
                tf.cast(offsets, tf.int64).to_tensor(), side="right") - 1
            bounds = tf.gather(char_bounds.to_tensor(), tf.maximum(index, 0),
                               batch_dims=1)
            return tf.RaggedTensor.from_tensor(
                bounds, lengths=offsets.row_lengths())

        starts = to_source(starts, char_starts)
        ends = to_source(ends - 1, char_ends)
        if scalar:
            return ids[0], starts[0], ends[0]
        return ids, starts, ends

    def id_to_token(self, ids):
        """Ids (any shape) -> token strings."""
        return tf.gather(tf.constant(self.vocabulary), ids)

    def compute_output_spec(self, text):
        return keras.KerasTensor(tuple(text.shape) + (None,), dtype="int32",
                                 ragged=True)

    def get_config(self):
        config = super().get_config()
        config.pop("dtype", None)
        config.update({
            "vocabulary": self.vocabulary,
            "lower_case": self.lower_case,
            "strip_accents": self.strip_accents,
        })
        return config


def preprocessor_config(base, tokenizer, **fields):
    """A preprocessor layer's `get_config`: the Layer's `base` config
    without dtype (the outputs are always int32), the tokenizer's vocabulary
    and casing, and the preprocessor's own `fields`."""
    config = {k: v for k, v in base.items() if k != "dtype"}
    config.update(vocabulary=tokenizer.vocabulary,
                  lower_case=tokenizer.lower_case,
                  strip_accents=tokenizer.strip_accents, **fields)
    return config


def __getattr__(name):
    from bert_tf import _moved

    return _moved.renamed(__name__, name)
