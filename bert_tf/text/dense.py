"""Dense-op building blocks for graphs that TFLite builtins (plus tf-text's
TFLite kernels) can run: no ragged kernels, no string `where`, `pad` or
`substr`: padding ragged rows, placing rows by example, byte slices and
whitespace words. The windows built on them are `bert_tf.text.windows`.
"""

import tensorflow as tf
# tf-text's ops without their Python wrappers, which validate the ragged
# tensors the ops made consistent (30-80 nodes a request each).
from tensorflow_text.python.ops import byte_splitter, regex_split_ops

from bert_tf import _moved


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


def __getattr__(name):
    return _moved.renamed(__name__, name)
