"""Dense-op building blocks for graphs that TFLite builtins (plus tf-text's
TFLite kernels) can run: no ragged kernels, no string `where`, `pad` or
`substr`. The one featurizer and the post-processing of span QA and
tagging are written with them (`span_qa.features.qa_windows`,
`text.word_windows.word_windows`), so the SavedModel, training,
evaluation and the TFLite files share them, and a request runs a few
gathers instead of ragged construction per value.
"""

import tensorflow as tf
import tensorflow_text as tf_text
# tf-text's ops without their Python wrappers, which validate the ragged
# tensors the ops made consistent (30-80 nodes a request each).
from tensorflow_text.python.ops import byte_splitter, regex_split_ops


def byte_slices(text, start, end):
    """The byte slices [start, end) of each row of `text`.

    Args:
        text: tf.string [B].
        start, end: int [B, K] byte offsets into each row (start == end
            gives "").

    Returns:
        tf.string [B, K].

    Examples:
        >>> byte_slices(tf.constant(["hello", "ab"]),
        ...             tf.constant([[0, 4], [1, 0]]),
        ...             tf.constant([[4, 5], [2, 0]])).numpy().tolist()
        [[b'hell', b'o'], [b'b', b'']]
    """
    shape = tf.shape(start, out_type=tf.int64)
    pieces, _ = byte_splitter.gen_byte_splitter \
        .tf_text_byte_split_by_offsets(
            text, tf.reshape(tf.cast(start, tf.int32), [-1]),
            tf.reshape(tf.cast(end, tf.int32), [-1]),
            tf.range(shape[0] + 1) * shape[1])
    return tf.reshape(pieces, shape)


def split_words(text):
    """The whitespace-separated words of each row of `text` [B]: (words
    [total] of all rows, int32 words per row [B], and their byte starts
    and ends, int32 [B, N], -1 padded). tf-text's op alone: its Python
    wrapper validates three ragged tensors the op made consistent."""
    words, starts, ends, splits = regex_split_ops.gen_regex_split_ops \
        .regex_split_with_offsets(tf.reshape(text, [-1]), r"(\s+)", r"()")
    count = tf.cast(splits[1:] - splits[:-1], tf.int32)

    def dense(offsets):
        return tf.cast(tf.RaggedTensor.from_row_splits(
            offsets, splits, validate=False).to_tensor(default_value=-1),
            tf.int32)

    return words, count, dense(starts), dense(ends)


def padded_dense(values, fill):
    """Ragged [B, (n)] -> int32 [B, n_max + 1] (`fill` after each row; the
    extra column keeps every gather in range, even for empty rows)."""
    dense = tf.cast(values, tf.int32).to_tensor(default_value=fill)
    return tf.pad(dense, [[0, 0], [0, 1]], constant_values=fill)


def rows_by_example(values, example, num_examples, fill, width=None):
    """Rows [N, ...] tagged with their example (`example` int [N], sorted)
    -> [num_examples, width, ...], each example's rows in order, `fill`
    after them. `width` defaults to the most rows of any example; rows past
    it are dropped.

    Examples:
        >>> rows_by_example(tf.constant([1, 2, 3]), tf.constant([0, 0, 2]),
        ...                 3, -1).numpy().tolist()
        [[1, 2], [-1, -1], [3, -1]]
    """
    values = tf.convert_to_tensor(values)
    example = tf.cast(example, tf.int32)
    counts = tf.math.unsorted_segment_sum(tf.ones_like(example), example,
                                          num_examples)
    rank = tf.range(tf.size(example)) - tf.gather(
        tf.math.cumsum(counts, exclusive=True), example)
    if width is None:  # every row has its place
        width = tf.reduce_max(tf.concat([counts, [0]], 0))
        at = tf.stack([example, rank], 1)
    else:
        kept = rank < width
        at = tf.stack([tf.boolean_mask(example, kept),
                       tf.boolean_mask(rank, kept)], 1)
        values = tf.boolean_mask(values, kept)
    shape = tf.concat([[num_examples, width], tf.shape(values)[1:]], 0)
    placed = tf.scatter_nd(at, values, shape)
    present = tf.scatter_nd(at, tf.ones_like(at[:, 0]),
                            [num_examples, width]) > 0
    present = tf.reshape(present, tf.concat(
        [[num_examples, width], tf.ones_like(tf.shape(values)[1:])], 0))
    return tf.where(present, placed, tf.cast(fill, values.dtype))


def char_offsets(text, byte_offsets):
    """Code points before each byte offset of each row of `text`.

    Args:
        text: tf.string [B].
        byte_offsets: int [B, N] offsets into the rows (0 .. length).

    Returns:
        int32 [B, N]. A code point is counted at its lead byte (any byte
        but a continuation byte 0x80-0xBF), so each invalid lead byte
        counts as one, as the SavedModel's replacement character does; a
        stray continuation byte counts as none.

    Examples:
        >>> char_offsets(tf.constant(["héllo"]),
        ...              tf.constant([[0, 1, 3, 6]])).numpy().tolist()
        [[0, 1, 2, 5]]
    """
    raw = tf_text.ByteSplitter().split(text)
    # Padding reads as a continuation byte, so it counts as no character.
    codes = raw.with_flat_values(tf.cast(raw.flat_values, tf.int32))
    codes = codes.to_tensor(default_value=0x80)
    codes = tf.pad(codes, [[0, 0], [0, 1]], constant_values=0x80)
    lead = tf.cast((codes < 0x80) | (codes >= 0xC0), tf.int32)
    before = tf.math.cumsum(lead, axis=1, exclusive=True)
    return tf.gather(before, tf.cast(byte_offsets, tf.int32), batch_dims=1)


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
    """`text/windows.stride_windows` with dense ops: the windows of at most
    `room` pieces that start every `stride` pieces, for rows of `lengths`
    pieces (one window for a row that fits, empty rows included).

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
        piece's shorter side (the earliest on a tie), the rule of
        `stride_windows` (and run_squad's `_check_is_max_context`).
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
