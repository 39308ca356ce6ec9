"""Rows computed once per thread: where a served block's two inter-op
threads meet (the residual add after an output layer's row halves, and the
layer norm after it), each computes its own copy of the sum and the norm
and feeds its own half of the next matmul.

With one copy, the thread that readies the sum runs the add, the norm's
ops and the quantize op alone and then wakes the other, which has gone to
sleep by then, to take its half of the next matmul: on 2 EPYC cores (one
thread within an op, BERT-Base int8, batch 1) the second half started
about 45 us after it was ready, at each of the 24 meetings. With a copy
each, both threads go on at once from the meeting, where the other has
only just finished its own half (docs/benchmarks.md, "a copy per
thread where the threads meet").

Grappler merges identical nodes with identical inputs
(`ArithmeticOptimizer::DedupComputations`), the copies among them; a node
whose attributes differ is never merged, so each copy's first node
carries its index as an attribute of its own (`kept_apart`), and every
node after it has inputs of its own.
"""

import tensorflow as tf

# The attribute that keeps a copy's first node apart from the others'.
COPY_ATTRIBUTE = "_bert_tf_copy"


class RowCopies(tuple):
    """The same rows, one copy per column part of the matmul they feed:
    part `i` reads copy `i` (`bert_tf.models.split_matmuls.SplitMatmuls`).

    Examples:
        >>> rows = RowCopies([tf.ones((2, 3)), tf.ones((2, 3))])
        >>> len(rows), rows.first.shape
        (2, TensorShape([2, 3]))
    """

    @property
    def first(self):
        """Copy 0: the one kept as the block's output and residual."""
        return self[0]


def first_copy(rows):
    """`rows` itself, or its copy 0 if it is a `RowCopies`."""
    return rows.first if isinstance(rows, RowCopies) else rows


def kept_apart(tensor, index):
    """`tensor`, its node marked as copy `index` (0 is left unmarked), so
    that Grappler does not merge it with another copy's; in graph mode
    only (eagerly, nothing merges).

    Examples:
        >>> @tf.function
        ... def two(x):
        ...     return x + 1.0, kept_apart(x + 1.0, 1)
        >>> graph = two.get_concrete_function(tf.ones(2)).graph
        >>> [n.attr[COPY_ATTRIBUTE].i for n in graph.as_graph_def().node
        ...  if n.op == "AddV2"]
        [0, 1]
    """
    if index and not tf.executing_eagerly():
        tensor.op._set_attr(COPY_ATTRIBUTE, tf.compat.v1.AttrValue(i=index))
    return tensor


def added_copies(first, others, copies):
    """`first` plus each of `others` (cast to its dtype), computed
    `copies` times, each copy's first add `kept_apart`: a list."""
    sums = []
    for copy in range(copies):
        out = first
        for index, other in enumerate(others):
            out = out + tf.cast(other, out.dtype)
            if index == 0:
                out = kept_apart(out, copy)
        sums.append(out)
    return sums
