"""Where a served encoder's rows sit: the real tokens' rows for its matmuls
(`TokenRows`), and the rows its attention runs on, padded per sequence
(`TokenRows`) or two sequences to a row (`PackedRows`).

A batch of texts padded to its longest wastes work on padding: rows of
padding in every matmul, and in the attention, scores between padded
positions. The served encoder multiplies only the real tokens' rows
(`TokenRows`), and its attention runs on `PackedRows`: the batch's shorter
sequences share a row with a longer one where both fit in the longest
one's length, each masked from the other.

Both layouts take the query/key/value rows to the attention's heads, and
its output back to rows, in one gather each (`to_heads`, `from_heads`):
the heads' transposes are folded into the gathers' indices, computed once
per request. BERT-Base int8 at batch 1 (25 tokens, 2 EPYC cores, one
thread within an op) ran eight ops per layer and head group there: a
gather, two bitcasts and a transpose each way.
"""

from keras import ops
import tensorflow as tf

# Added to the logits of masked-out keys; exp() of it is exactly 0 in float32.
_MASK_LOGIT = -1e9
# Row counts below 64 are exact; from 64, each octave's are rounded up to
# a multiple of its 16th (_LOW_BITS[i]: that step - 1 in octave i).
_OCTAVES = [float(64 << k) for k in range(25)]
_LOW_BITS = [0] + [(4 << k) - 1 for k in range(25)]


def attention_logit_bias(input_mask, causal):
    """Additive float32 bias [batch, 1, query, key] from a [batch, key] mask."""
    # expand_dims, not [:, None, None, :]: TFLite builtins cannot slice a
    # new axis into a tensor of two unknown dims.
    keep = ops.expand_dims(ops.cast(input_mask, "bool"), (1, 2))
    if causal:
        length = ops.shape(input_mask)[1]
        rows = ops.arange(length)[:, None]
        cols = ops.arange(length)[None, :]
        keep = ops.logical_and(keep, (cols <= rows)[None, None])
    return ops.where(keep, 0.0, _MASK_LOGIT)


class _HeadsLayout:
    """An attention layout's gathers between the kept rows and the
    attention's heads. A layout sets `_source` (the kept row each of its
    slots reads, [rows * length]) and `_slot` (each kept row's slot) and
    has `attention_bias()` [rows, 1, length or 1, length]."""

    def _head_indices(self, heads):
        """(The [3, rows, heads, length] rows of a [kept * 3 * heads,
        head_size] view of query/key/value that `to_heads` takes, the
        [kept, heads] rows of a [rows * heads * length, head_size] view of
        the attention's output that `from_heads` takes), once per count
        of heads."""
        indices = self.__dict__.setdefault("_indices", {})
        if heads not in indices:
            length = tf.shape(self.attention_bias())[-1]
            source = tf.reshape(self._source, (-1, length))
            # Query, key, value and head j of a row: its column block 3j + h.
            block = tf.reshape(tf.range(3 * heads), (3, 1, heads, 1))
            to = source[None, :, None, :] * (3 * heads) + block
            # A slot r * length + t is, head h, row (r * heads + h) * length
            # + t of the output.
            # expand_dims, not [:, None]: the indices keep the kept rows'
            # own first dimension (a strided slice gives it a new one), as
            # then does the reshaped output, which Grappler must see to
            # fuse the residual add after the next matmul.
            step = self._slot % length
            back = tf.expand_dims(self._slot * heads - step * (heads - 1),
                                  1) + tf.range(heads)[None, :] * length
            indices[heads] = (to, back)
        return indices[heads]

    def to_heads(self, rows, heads, head_size):
        """Query, key and value, each [rows, heads, length, head_size], of
        the kept rows' query/key/value rows [kept, 3 * heads * head_size]
        (columns: query, key, value; within each, head by head)."""
        to, _ = self._head_indices(heads)
        return tf.unstack(tf.gather(tf.reshape(rows, (-1, head_size)), to),
                          3)

    def from_heads(self, context):
        """The kept rows [kept, heads, head_size] of the attention's
        output [rows, heads, length, head_size], for the caller to reshape
        to the kept rows' own shape."""
        heads, head_size = context.shape[1], context.shape[-1]
        _, back = self._head_indices(heads)
        return tf.gather(tf.reshape(context, (-1, head_size)), back)


class TokenRows(_HeadsLayout):
    """The tokens of a batch that its mask keeps, as rows: a served
    encoder runs its dense layers and norms on these rows only, and pads
    them back to [batch * seq] rows where the attention needs the batch's
    shape. A batch of sentences padded to its longest (32 RT sentences:
    mean 27 pieces, longest about 60) then multiplies about half as many
    rows.

    Each sequence's first token is kept even where it is masked, so every
    padded position has a kept row to copy. A padded position's output is
    a copy of the kept row before it: like any encoder's, it means
    nothing.

    The kept rows are padded to a rounded count (`rounded_rows`) with copies
    of the first: oneDNN creates its kernels per row count, and a server
    whose batches each bring a new token total would create them anew for
    almost every request.

    As the attention's layout (`to_attention`, `from_attention`,
    `attention_bias`), it pads each sequence to the batch's length.

    Args:
        input_mask: [batch, seq], nonzero where a token is real.
        causal: the attention's bias lets each position see only those
            before it.

    Examples:
        >>> rows = TokenRows([[1, 1, 0], [1, 0, 0]])
        >>> rows.kept.numpy().tolist()
        [0, 1, 3]
        >>> rows.row_source.numpy().tolist()  # 3 rows: below 64, exact
        [0, 1, 3]
        >>> x = tf.reshape(tf.range(6.0), (6, 1))
        >>> rows.padded(rows.compact(x))[:, 0].numpy().tolist()
        [0.0, 1.0, 1.0, 3.0, 3.0, 3.0]
        >>> rows.first(rows.compact(x))[:, 0].numpy().tolist()
        [0.0, 3.0]
    """

    def __init__(self, input_mask, causal=False):
        self.input_mask = tf.convert_to_tensor(input_mask)
        self.causal = causal
        keep = tf.reshape(self.kept_tokens(self.input_mask), [-1])
        self.kept = tf.reshape(tf.where(keep), [-1])
        # The row each of the matmuls' rows copies: the kept ones, then the
        # first up to their rounded count.
        count = tf.size(self.kept)
        self.row_source = tf.pad(self.kept,
                                 [[0, rounded_rows(count) - count]])
        self.position = tf.cumsum(tf.cast(keep, tf.int32)) - 1
        self._mask_shape = tf.shape(self.input_mask)
        self._bias = None
        # As the attention's layout (`_HeadsLayout`).
        self._source = self.position
        self._slot = tf.cast(self.row_source, tf.int32)

    @staticmethod
    def kept_tokens(input_mask):
        """Whether each token of `input_mask` [..., seq] is kept: a bool
        tensor of its shape."""
        mask = tf.convert_to_tensor(input_mask)
        first = tf.equal(tf.range(tf.shape(mask)[-1]), 0)
        return tf.logical_or(tf.cast(mask, tf.bool), first)

    def compact(self, rows):
        """The kept rows of `rows` [batch * seq, W], padded to their
        rounded count."""
        return tf.gather(rows, self.row_source)

    def padded(self, rows):
        """[batch * seq, W] rows from the kept rows `rows` (`compact`'s)."""
        return tf.gather(rows, self.position)

    def first(self, rows):
        """Each sequence's first row [batch, W] of the kept rows `rows`."""
        return tf.gather(rows, tf.reshape(self.position,
                                          self._mask_shape)[:, 0])

    # The attention's layout: each sequence in a row of its own.
    def to_attention(self, rows):
        """The attention's rows [rows * length, W] from the kept rows."""
        return self.padded(rows)

    def from_attention(self, rows):
        """The kept rows from the attention's rows [rows * length, W]."""
        return self.compact(rows)

    def attention_bias(self):
        """The attention's additive bias [rows, 1, 1 or length, length],
        computed once."""
        if self._bias is None:
            self._bias = attention_logit_bias(self.input_mask, self.causal)
        return self._bias


class PackedRows(_HeadsLayout):
    """The attention's layout that packs a batch's sequences, two to a row
    where their kept tokens (`TokenRows`) fit in the longest sequence's
    length (the most such pairs), each masked from the other by the bias.
    The attention's scores, softmax and batched matmuls then cover fewer
    rows of that length: 32 RT sentences (mean 27 pieces, longest about
    55) take about 19 rows instead of 32.

    Pairing is a few vectorized ops, once per request, shared by every
    layer.

    Args:
        token_rows: the batch's `TokenRows`.

    Examples:
        >>> rows = PackedRows(TokenRows([[1, 1, 1, 1], [1, 1, 0, 0],
        ...                              [1, 0, 0, 0]]))
        >>> x = tf.reshape(tf.range(7.0), (7, 1))
        >>> # 2 rows of 4: the 2nd and 3rd sequences, an empty slot; the 1st
        >>> rows.to_attention(x)[:, 0].numpy().tolist()
        [4.0, 5.0, 6.0, 0.0, 0.0, 1.0, 2.0, 3.0]
        >>> bool(tf.reduce_all(rows.from_attention(rows.to_attention(x))
        ...                    == x))
        True
        >>> (rows.attention_bias()[0, 0] == 0).numpy().astype(int).tolist()
        [[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 0]]
    """

    def __init__(self, token_rows):
        # One text has nothing to pack: it skips the pairing's ops.
        flat = tf.range(tf.size(token_rows.position))
        padded_bias = token_rows.attention_bias()
        self.source, slot_of_position, self.bias = tf.cond(
            tf.shape(token_rows.input_mask)[0] > 1,
            lambda: _packed(token_rows),
            lambda: (token_rows.position, flat, padded_bias))
        # Gathered by the kept tokens' indices outside the branches, so
        # that Grappler sees the attention's output rows in the shape of
        # the kept rows (the residual), and fuses the block's residual add
        # into the matmul after the attention.
        self.slot = tf.gather(slot_of_position, token_rows.row_source)
        self._source, self._slot = self.source, self.slot

    def to_attention(self, rows):
        """The packed rows [rows * length, W] from the kept rows."""
        return tf.gather(rows, self.source)

    def from_attention(self, rows):
        """The kept rows from the packed rows [rows * length, W]."""
        return tf.gather(rows, self.slot)

    def attention_bias(self):
        """[rows, 1, length, length] (one text: `TokenRows`'): each slot
        sees the slots of its own sequence's real tokens."""
        return self.bias


def _packed(token_rows):
    """(The kept row each slot of the packed rows copies (an empty slot:
    the first), the slot of each of the batch's positions (a kept token's
    own; any other's means nothing), the packed rows' attention bias)."""
    shape = tf.shape(token_rows.input_mask)
    position = tf.reshape(token_rows.position, shape)  # kept-row indices
    # Kept tokens per sequence (its first is always kept).
    lengths = position[:, -1] - position[:, 0] + 1
    batch = shape[0]
    order = tf.argsort(lengths, stable=True)  # shortest first
    ascending = tf.gather(lengths, order)
    length = ascending[-1]
    pairs = most_pairs(ascending, length)
    # The 2 * pairs shortest, paired outside-in: the k-th shortest follows
    # the (2 * pairs - 1 - k)-th in row k; the others alone.
    k = tf.range(batch)
    partner = 2 * pairs - 1 - k
    follows = k < pairs
    row = tf.where(follows, k, tf.where(k < 2 * pairs, partner, k - pairs))
    offset = tf.where(follows, tf.gather(ascending, tf.maximum(partner, 0)),
                      0)
    start = tf.gather(row * length + offset,
                      tf.math.invert_permutation(order))
    # A kept token's slot: its sequence's start, plus its index among the
    # sequence's kept tokens.
    slot_of_position = tf.reshape(
        start[:, None] + position - position[:, :1], [-1])
    slot = tf.gather(slot_of_position, token_rows.kept)
    slots = [(batch - pairs) * length]
    source = tf.scatter_nd(slot[:, None], tf.range(tf.size(slot)), slots)
    # A slot sees the slots of its own sequence's real tokens: owners are
    # sequence + 1, as a query any kept token's, as a key a real one's
    # (0: an empty slot, a masked token).
    sequence = tf.gather(tf.reshape(tf.broadcast_to(
        tf.range(1, batch + 1)[:, None], shape), [-1]), token_rows.kept)
    real = tf.gather(tf.reshape(tf.cast(token_rows.input_mask != 0,
                                        tf.int32), [-1]), token_rows.kept)
    query, key = [tf.reshape(tf.scatter_nd(slot[:, None], owner, slots),
                             (-1, length))
                  for owner in (sequence, sequence * real)]
    keep = tf.logical_and(tf.equal(query[:, :, None], key[:, None, :]),
                          key[:, None, :] > 0)
    if token_rows.causal:  # a sequence's slots are in its tokens' order
        index = tf.range(length)
        keep = tf.logical_and(keep, index[None, :] <= index[:, None])
    return (source, slot_of_position,
            tf.expand_dims(tf.where(keep, 0.0, _MASK_LOGIT), 1))


def rounded_rows(count):
    """The rows the matmuls run on for `count` kept tokens (an int32
    scalar): `count` itself below 64; above, rounded up to a multiple of a
    16th of its octave (at most 6.25% more rows). 32 RT sentences (about
    860-960 tokens) then take one of 3 or 4 counts. Every multiple of 4
    from 64 is one, so the fp32 copies' bounds (7 and 81,
    `bert_tf.models.chunked.ROW_CLASS_BOUNDS`) class a rounded count as
    they class its kept tokens.

    Examples:
        >>> [int(rounded_rows(n))
        ...  for n in (1, 63, 64, 65, 127, 128, 129, 900)]
        [1, 63, 64, 68, 128, 128, 136, 928]
    """
    count = tf.convert_to_tensor(count, tf.int32)
    # Five small ops per request: the octave's step is a power of two, so
    # rounding up is adding step - 1 and clearing those bits.
    octave = tf.raw_ops.Bucketize(input=count, boundaries=_OCTAVES)
    low_bits = tf.gather(tf.constant(_LOW_BITS, tf.int32), octave)
    return tf.bitwise.bitwise_and(count + low_bits,
                                  tf.bitwise.invert(low_bits))


def most_pairs(ascending, capacity):
    """The most disjoint pairs of `ascending` (sorted lengths) whose sums
    are at most `capacity`: the largest p for which the 2p shortest,
    paired outside-in (the i-th with the (2p - 1 - i)-th), all fit. Any p
    pairs can swap their members for the 2p shortest, which outside-in
    pairing fits best; and if p fit, so do p - 1.

    Examples:
        >>> int(most_pairs(tf.constant([5, 8, 10, 20, 30, 50, 55, 60]), 60))
        3
    """
    half = tf.size(ascending) // 2
    p = tf.range(1, half + 1)[:, None]  # each candidate count
    i = tf.range(half)[None, :]
    partner = tf.maximum(2 * p - 1 - i, 0)
    fits = tf.logical_or(
        i >= p, tf.gather(ascending, i) + tf.gather(ascending, partner)
        <= capacity)
    return tf.reduce_sum(tf.cast(tf.reduce_all(fits, axis=1), tf.int32))
