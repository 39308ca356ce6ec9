"""Windows of word pieces, in dense ops: the one windowing of span QA,
token tagging, per-word features and long documents, in the SavedModel,
training, evaluation and the TFLite graphs alike.

- `dense_windows`: the windows of at most `room` pieces every `stride`
  pieces (the document stride of the original `run_squad.py`), and
  `max_context`, the window where each piece is predicted;
- `frame`: `[CLS]` / `[SEP]` / padding, masks and type ids, for every kind;
- `char_offsets`: byte offsets to the code points we return;
- `word_windows`: the windows of sentences of words (tagging, per-word
  features), from their pieces (`bert_words`: the words BERT splits), and
  `word_values`, each word's value where it is predicted.

A request runs a few gathers instead of ragged construction per value;
no ragged kernels, no string `where`, `pad` or `substr`, so TFLite
builtins (plus tf-text's TFLite kernels) run them.
"""

import tensorflow as tf
from tensorflow_text.python.ops import byte_splitter

from bert_tf.text.dense import padded_dense


# The most word pieces of one text that a TFLite graph reads. TFLite runs
# all of a text's windows at once (no chunk loop), so this bounds its
# memory: at most 63 windows of 128 pieces with a stride of 64, about the
# activations of one SavedModel step (8,192 tokens); about 18,000
# characters of English. A longer text is flagged (`over_limit`) and
# refused by the runner.
MAX_PIECES = 4096


def capped(lengths, max_pieces):
    """(pieces per row read, int32 1 where a row holds more than
    `max_pieces`): what bounds a TFLite graph's windows.

    Examples:
        >>> read, over = capped(tf.constant([3, 9]), 5)
        >>> read.numpy().tolist(), over.numpy().tolist()
        ([3, 5], [0, 1])
    """
    return (tf.minimum(lengths, max_pieces),
            tf.cast(lengths > max_pieces, tf.int32))


def dense_windows(lengths, room, stride):
    """The windows of at most `room` pieces that start every `stride`
    pieces, for rows of `lengths` pieces: one window for a row that fits
    (empty rows included), else ceil((n - room) / stride) + 1, the last
    ending at the row's last piece.

    Args:
        lengths: int [B] pieces per row.
        room: int [B] (or scalar) pieces per window of each row.
        stride: pieces between window starts.

    Returns:
        dict of int32 [W]: `example` (the row of each window), `first`
        (its first piece), `size` (its pieces), `index` (its place among
        the row's windows); `per_row` (int32 [B], the windows of each
        row); and the arguments `room`, `lengths`, `stride` (for
        `max_context`).

    Examples:
        >>> w = dense_windows(tf.constant([5, 2]), 3, 2)
        >>> [w[k].numpy().tolist() for k in ("example", "first", "size")]
        [[0, 0, 1], [0, 2, 0], [3, 3, 2]]
    """
    lengths = tf.cast(lengths, tf.int32)
    room = tf.broadcast_to(tf.cast(room, tf.int32), tf.shape(lengths))
    per_row = tf.where(lengths <= room, 1,
                       (lengths - room + stride - 1) // stride + 1)
    most = tf.reduce_max(tf.concat([per_row, [0]], 0))
    at = tf.cast(tf.where(tf.range(most)[None, :] < per_row[:, None]),
                 tf.int32)
    example, index = at[:, 0], at[:, 1]
    first = index * stride
    size = tf.minimum(tf.gather(room, example),
                      tf.gather(lengths, example) - first)
    return {"example": example, "first": first, "size": size,
            "index": index, "per_row": per_row, "room": room,
            "lengths": lengths, "stride": stride}


def max_context(windows, piece):
    """Whether each window is where its pieces have the most context.

    Args:
        windows: a `dense_windows` output.
        piece: int [W, L] a piece index of each window's row at each
            position (values outside the window are ignored by the caller).

    Returns:
        bool [W, L]: the window holds the piece and is, among the windows
        of its row that hold it, the one with the most pieces on the
        piece's shorter side (the earliest on a tie): run_squad's
        `_check_is_max_context`.

    Examples:
        >>> w = dense_windows(tf.constant([5]), 3, 2)
        >>> piece = w["first"][:, None] + tf.range(3)[None, :]
        >>> max_context(w, piece).numpy().tolist()
        [[True, True, True], [False, True, True]]
    """
    def score(piece, first, size):
        local = tf.cast(piece - first, tf.float32)
        size = tf.cast(size, tf.float32)
        return tf.minimum(local, size - 1 - local) + 0.01 * size

    example, stride = windows["example"], windows["stride"]
    own = score(piece, windows["first"][:, None], windows["size"][:, None])
    # The windows that may hold a piece start at most `room` pieces before
    # it: the last one starting at or before it and the few before that,
    # [W, L, D] (not every window of the row: a long text has hundreds).
    room = tf.gather(windows["room"], example)[:, None, None]
    piece3 = tf.expand_dims(piece, 2)
    other = tf.maximum(piece3, 0) // stride - tf.range(
        tf.reduce_max(tf.concat([windows["room"], [0]], 0)) // stride + 1)
    other_first = other * stride
    other_size = tf.minimum(
        room, tf.gather(windows["lengths"], example)[:, None, None] -
        other_first)
    holds = (other >= 0) & (other < tf.gather(windows["per_row"], example)[
        :, None, None]) & (piece3 >= other_first) & \
        (piece3 < other_first + other_size)
    theirs = score(piece3, other_first, other_size)
    index = windows["index"][:, None, None]
    beaten = holds & ((theirs > tf.expand_dims(own, 2)) |
                      ((theirs >= tf.expand_dims(own, 2)) & (other < index)))
    return ~tf.reduce_any(beaten, axis=2)


def frame(vocab, body, position, lead, size, pair=False):
    """The framing every kind's windows share: `[CLS] text [SEP]`, or
    `[CLS] first [SEP] second [SEP]` for a pair (span QA's question and
    context), padded after the last `[SEP]`.

    Args:
        vocab: the `Vocab`.
        body: int32 [W, L], the pieces at their positions (the first
            segment's at 1.., the text's or second segment's at `lead`..);
            other positions are overwritten.
        position: int32 [1, L], `tf.range(L)[None, :]`.
        lead, size: int32 [W, 1], each window's first position of its text
            (or second segment) and its pieces there.
        pair: a `[SEP]` ends the first segment at `lead - 1`, and the
            second segment and its `[SEP]` have type id 1.

    Returns:
        the encoder inputs `input_word_ids`, `input_mask`,
        `input_type_ids`, int32 [W, L].

    Examples:
        >>> from bert_tf.text.vocab import Vocab
        >>> vocab = Vocab(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a"])
        >>> out = frame(vocab, tf.fill([1, 6], 5), tf.range(6)[None, :],
        ...             tf.constant([[3]]), tf.constant([[1]]), pair=True)
        >>> [out[k].numpy().tolist() for k in sorted(out)]
        [[[1, 1, 1, 1, 1, 0]], [[0, 0, 0, 1, 1, 0]], [[2, 5, 3, 5, 3, 0]]]
    """
    end = lead + size
    is_sep = position == end
    if pair:
        is_sep |= position == lead - 1
    word_ids = tf.where(position < end, body, vocab.pad_id)
    word_ids = tf.where(is_sep, vocab.sep_id, word_ids)
    word_ids = tf.where(position == 0, vocab.cls_id, word_ids)
    in_second = (position >= lead) & (position <= end) if pair else \
        tf.zeros_like(is_sep)
    return {"input_word_ids": word_ids,
            "input_mask": tf.cast(position <= end, tf.int32),
            "input_type_ids": tf.cast(in_second, tf.int32)}


def _utf8_table():
    """Per byte value: (continuation bytes it announces, the lowest and
    highest byte value that may follow it, 1 if it is a continuation
    byte), as UTF-8 allows (no overlong forms, no surrogates, nothing past
    U+10FFFF); a byte that announces none has an empty range."""
    table = [[0, 256, 0, int(0x80 <= byte < 0xC0)] for byte in range(256)]
    for lead in range(0xC2, 0xF5):
        wants = 1 if lead < 0xE0 else 2 if lead < 0xF0 else 3
        low = {0xE0: 0xA0, 0xF0: 0x90}.get(lead, 0x80)
        high = {0xED: 0x9F, 0xF4: 0x8F}.get(lead, 0xBF)
        table[lead] = [wants, low, high, 0]
    return table


_UTF8 = _utf8_table()


def char_offsets(text, *byte_offsets):
    """Code points before each byte offset of each row of `text`: the one
    conversion of byte offsets to the character offsets we return.

    Args:
        text: tf.string [B].
        *byte_offsets: int [B, N] offsets into the rows (0 .. length).

    Returns:
        one int32 [B, N] per `byte_offsets`: the characters of the row
        before each offset, as Python's `bytes.decode("utf-8", "replace")`
        counts them: one for each character, for each cut-short one and
        for each invalid byte. Dense ops and tf-text's byte splitter only,
        so TFLite graphs share it.

    Examples:
        >>> offsets, = char_offsets(tf.constant(["héllo", b"a\\x80b"]),
        ...                         tf.constant([[0, 1, 3, 6], [0, 1, 2, 3]]))
        >>> offsets.numpy().tolist()
        [[0, 1, 2, 5], [0, 1, 2, 3]]
    """
    # tf-text's op without its Python wrapper, which validates the ragged
    # tensors the op made consistent (a dozen nodes a request).
    values, splits, _, _ = byte_splitter.gen_byte_splitter \
        .tf_text_byte_split_with_offsets(input_values=tf.reshape(text, [-1]))
    raw = tf.RaggedTensor.from_row_splits(tf.cast(values, tf.int32), splits,
                                          validate=False)
    # ASCII bytes past each row: an offset may be the row's length, and
    # every row is long enough for the shifts below.
    codes = tf.pad(raw.to_tensor(), [[0, 0], [0, 3]])
    wants, low, high, continuation = tf.unstack(
        tf.gather(tf.constant(_UTF8), codes), axis=2)

    def before(x, k):  # x[i - k] at i (false or 0 before the row)
        return tf.pad(x[:, :-k], [[0, 0], [k, 0]])

    # A byte continues a character when it is in range after its lead
    # byte, or continues one that did (up to what the lead announced);
    # any other byte starts a character of its own.
    continuation = tf.equal(continuation, 1)
    second = (codes >= before(low, 1)) & (codes <= before(high, 1))
    third = continuation & before(second, 1) & (before(wants, 2) >= 2)
    fourth = continuation & before(third, 1) & (before(wants, 3) >= 3)
    starts = tf.cast(~(second | third | fourth), tf.int32)
    counted = tf.math.cumsum(starts, axis=1, exclusive=True)
    return tuple(tf.gather(counted, tf.cast(offsets, tf.int32), batch_dims=1)
                 for offsets in byte_offsets)


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
    `WordWindows` (tagging, per-word features) and the tagging TFLite
    graph (`tasks/tagging/tflite.py`) share.

    Args:
        vocab: the `Vocab`.
        num_words: int32 [B] words per sentence.
        pieces: the pieces of every word of the batch, ragged
            [words, (p)]; a word with none reads `[UNK]`.
        offsets: the words' `byte_start`, `byte_end`, `char_start`,
            `char_end`, int32 [B, N] (-1 padded).
        seq_length, doc_stride: as `WordWindows`.
        max_pieces: if given, the pieces of a sentence read; the output
            then has `over_limit` (int32 [B], 1 where a sentence holds
            more).

    Returns:
        the `WordWindows` features.
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
    first_word = tf.math.cumsum(num_words, exclusive=True)
    word_index = tf.where(in_text & (within == 0), word - tf.gather(
        first_word, example)[:, None], -1)
    return {
        **frame(vocab, ids, position, tf.ones_like(size), size),
        "example_index": example,
        "word_index": word_index,
        "word_is_max": (word_index >= 0) & max_context(windows, piece),
        "num_words": num_words,
        **{f"word_{k}": offsets[k] for k in ("char_start", "char_end",
                                              "byte_start", "byte_end")},
        **limited,
    }


def word_values(features, values):
    """Each word's value where it is predicted: `values` per window
    position [W, L, ...] -> per word [B, N, ...] (zeros past a sentence's
    last word). `features` is a `word_windows` output: a word is
    read at its first piece, in its max-context window."""
    at = tf.where(features["word_is_max"])               # [P, 2] (w, pos)
    sentence = tf.gather(features["example_index"], at[:, 0])
    word = tf.gather_nd(features["word_index"], at)
    chosen = tf.gather_nd(values, at)
    shape = tf.concat([tf.shape(features["word_char_start"]),
                       tf.shape(chosen)[1:]], 0)
    return tf.scatter_nd(tf.stack([sentence, word], axis=1), chosen, shape)
