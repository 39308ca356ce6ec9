"""Overlapping windows over word pieces, in-graph (the document stride of
the original `run_squad.py`), as ragged tensors: the reference definition
of the windows (`stride_windows`, `gather_pieces`), and each word's value
where it is predicted (tagging, per-word features). Every kind places its
windows with dense ops (`text/dense.py`: `dense_windows`, `max_context`),
which give the same windows."""

import tensorflow as tf


def stride_windows(lengths, room, stride):
    """Windows of at most `room` pieces that start every `stride` pieces.

    A row of n pieces gets one window when n <= room, else
    ceil((n - room) / stride) + 1; every piece is in at least one window
    and is "max context" in exactly one: the window where it has the most
    pieces on its shorter side (the earliest on a tie), as run_squad's
    `_check_is_max_context` decides.

    Args:
        lengths: int64 [B] pieces per row.
        room: int64 [B] (or scalar) pieces per window of each row.
        stride: pieces between window starts.

    Returns:
        dict of `example` (int64 [W], the row of each window), `first` and
        `last` (int64 [W], the window's pieces are [first, last) of its
        row), `pieces` (ragged int64 [W, (n)], those piece indices) and
        `is_max` (ragged bool [W, (n)]).

    Examples:
        >>> w = stride_windows(tf.constant([5, 2], tf.int64), 3, 2)
        >>> w["pieces"].to_list(), w["example"].numpy().tolist()
        ([[0, 1, 2], [2, 3, 4], [0, 1]], [0, 0, 1])
        >>> w["is_max"].to_list()
        [[True, True, True], [False, True, True], [True, True]]
    """
    lengths = tf.cast(lengths, tf.int64)
    room = tf.broadcast_to(tf.cast(room, tf.int64), tf.shape(lengths))
    windows = tf.where(lengths <= room, tf.ones_like(room),
                       (lengths - room + stride - 1) // stride + 1)
    example = tf.repeat(tf.range(tf.size(windows, tf.int64)), windows)
    first = tf.ragged.range(windows).flat_values * stride
    last = tf.minimum(first + tf.gather(room, example),
                      tf.gather(lengths, example))
    pieces = tf.ragged.range(first, last)
    # Each piece's score in each window; the best window per global piece.
    starts = tf.math.cumsum(lengths, exclusive=True)
    piece_id = (pieces + tf.gather(starts, example)[:, None]).flat_values
    size = tf.cast(last - first, tf.float32)[:, None]
    local = tf.cast(pieces - first[:, None], tf.float32)
    score = (tf.minimum(local, size - 1 - local) + 0.01 * size).flat_values
    total = tf.reduce_sum(lengths)
    best = tf.math.unsorted_segment_max(score, piece_id, total)
    window_id = tf.cast(pieces.value_rowids(), tf.int64)
    earliest = tf.math.unsorted_segment_min(
        tf.where(score >= tf.gather(best, piece_id), window_id,
                 tf.int64.max), piece_id, total)
    is_max = tf.equal(window_id, tf.gather(earliest, piece_id))
    return {"example": example, "first": first, "last": last,
            "pieces": pieces, "is_max": pieces.with_flat_values(is_max)}


def gather_pieces(values, windows):
    """The values of each window's pieces: ragged [B, (n)] -> [W, (n)]."""
    flat = windows["pieces"] + tf.gather(values.row_starts(),
                                         windows["example"])[:, None]
    return tf.gather(values.flat_values, flat)


def word_values(features, values):
    """Each word's value where it is predicted: `values` per window
    position [W, L, ...] -> per word [B, N, ...] (zeros past a sentence's
    last word). `features` is a `TaggingPreprocessor` output: a word is
    read at its first piece, in its max-context window."""
    at = tf.where(features["word_is_max"])               # [P, 2] (w, pos)
    sentence = tf.gather(features["example_index"], at[:, 0])
    word = tf.gather_nd(features["word_index"], at)
    chosen = tf.gather_nd(values, at)
    shape = tf.concat([tf.shape(features["word_char_start"]),
                       tf.shape(chosen)[1:]], 0)
    return tf.scatter_nd(tf.stack([sentence, word], axis=1), chosen, shape)
