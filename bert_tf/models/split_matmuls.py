"""How a served encoder runs its block matmuls: each in parts, side by
side on TensorFlow's inter-op threads (`SplitMatmuls`); the module
docstring of `bert_tf.models.served` says why and what it gained.
"""

import numpy as np
import tensorflow as tf

from bert_tf.layers.copies import RowCopies, added_copies, first_copy
from bert_tf.layers.folding import foldable
from bert_tf.layers.int8 import Int8Dense


def block_matmuls(block):
    """The four dense layers of a `TransformerBlock`."""
    return (block.attention.qkv, block.attention.output_dense,
            block.intermediate, block.output_dense)


class SplitMatmuls:
    """How a served encoder runs its block matmuls: each as `parts`
    matmuls, which TensorFlow's inter-op threads run side by side
    (oneDNN's kernels hardly use a second core at a text's few rows). The
    query/key/value matmul runs on each head group's columns
    (`query_key_value`), whose attention runs apart; the intermediate
    layer on its kernel's column slices. The layers after them, the
    attention's and the feed-forward's output layers, take those parts as
    they come (`output_parts`), each on its own rows of the kernel, and add
    the products: no concatenation between. A float kernel's slices are
    variables of their own (`kernels`, named `<kernel path>_part<i>` for
    columns, `<kernel path>_rows<i>` for rows, `<kernel path>_heads<i>`
    for head groups), which exports hold in place of the kernel
    (`ServedModel.variables`); an int8 layer slices its constants itself
    (`Int8Dense`).

    Called as `matmuls(dense, x)` it returns `dense(x)`; with `residual`,
    `residual + dense(x)` in the residual's dtype: an int8 layer adds it
    inside its kernels, and Grappler fuses a float layer's add into its
    (first) matmul. `x` may be a list of column parts, as
    `matmuls(dense, x, output_parts=True)` returns them; then
    `copies=self.copies` returns the sum as `RowCopies`, one per part of
    the matmul after (`bert_tf.layers.copies`: each thread computes its
    own copy of the sum and of the norm after it), which `x` may be too.

    `shifted`, `residual_lacks`: the rows `x` lack their norm's beta, or
    the residual lacks `residual_lacks` (`bert_tf.layers.folding`): an
    int8 layer takes them as arguments (`Int8Dense`); a float one reads
    its folded bias (`biases_with`) and ignores them.
    """

    def __init__(self, encoder, parts=1):
        self.parts = parts
        # The copies of the rows where a block's threads meet: one a part.
        self.copies = max(parts, 1)
        self.kernels = {}  # {id(kernel): [tf.Variable]}
        self.row_split = set()  # ids of the kernels split by rows
        if parts <= 1:
            return
        with tf.init_scope():
            for block in encoder.transformer_layers:
                for dense in block_matmuls(block):
                    if foldable(dense) and not dense.units % parts:
                        self._split(block, dense)

    def _split(self, block, dense):
        """`dense`'s kernel as variables of its parts: the query/key/value
        kernel's by head groups, the attention's and the feed-forward's
        output kernels by rows (where the layer before them is split), the
        others by columns."""
        kernel, value = dense.kernel, dense.kernel.numpy()
        fed_by = {id(block.attention.output_dense): block.attention.qkv,
                  id(block.output_dense): block.intermediate}.get(id(dense))
        if fed_by is not None:
            if id(fed_by.kernel) not in self.kernels:
                return
            values, name = np.split(value, self.parts, axis=0), "rows"
            self.row_split.add(id(kernel))
        elif dense is block.attention.qkv:
            columns = self.head_groups(block.attention)
            if columns is None:
                return
            values, name = [value[:, c] for c in columns], "heads"
        else:
            values, name = np.split(value, self.parts, axis=-1), "part"
        self.kernels[id(kernel)] = [
            tf.Variable(part, trainable=False, name=f"{kernel.path}_{name}"
                        f"{index}") for index, part in enumerate(values)]

    def head_groups(self, attention):
        """The query/key/value columns of each of the attention's head
        groups, one group a part, or None (one part, or heads that do not
        split so)."""
        if self.parts <= 1 or attention.num_heads % self.parts:
            return None
        return attention.head_group_columns(self.parts)

    def query_key_value(self, attention, x, shifted=False):
        """The attention's query/key/value rows of `x`: a list of each
        head group's where its matmul runs in parts (`head_groups`)."""
        qkv = attention.qkv
        columns = self.head_groups(attention)
        if columns is None or not (isinstance(qkv, Int8Dense) or
                                   id(qkv.kernel) in self.kernels):
            return self(qkv, first_copy(x), shifted=shifted)
        if isinstance(qkv, Int8Dense):
            columns = tuple(tuple(c.tolist()) for c in columns)
            if isinstance(x, RowCopies):
                return [qkv(copy, column_parts=columns, part=index,
                            shifted=shifted)
                        for index, copy in enumerate(x)]
            return qkv(x, column_parts=columns, output_parts=True,
                       shifted=shifted)
        return self._float(qkv, x, self.kernels[id(qkv.kernel)], True,
                           columns)

    def __call__(self, dense, x, residual=None, output_parts=False,
                 copies=1, shifted=False, residual_lacks=None):
        if isinstance(x, list) and len(x) == 1:
            x = x[0]
        if isinstance(dense, Int8Dense):
            return self._int8(dense, x, residual, output_parts, copies,
                              dict(shifted=shifted,
                                   residual_lacks=residual_lacks))
        kernels = self.kernels.get(id(getattr(dense, "kernel", None)))
        if isinstance(x, list):
            if id(dense.kernel) in self.row_split:
                return self._rows(dense, x, kernels, residual, copies)
            x = tf.concat(x, axis=-1)
        if isinstance(x, RowCopies) and kernels is None:
            x = x.first
        out = self._float(dense, x, kernels, output_parts)
        if output_parts:
            return out
        if residual is not None:
            out = residual + tf.cast(out, residual.dtype)
        return RowCopies([out] * copies) if copies > 1 else out

    def _int8(self, dense, x, residual, output_parts, copies, folded):
        """`__call__` for an `Int8Dense` (`folded`: its `shifted` and
        `residual_lacks`)."""
        if isinstance(x, list):  # its input slices, on its rows
            out = dense(x, residual=residual, copies=copies, **folded)
            return RowCopies(out) if copies > 1 else out
        parts = self.parts if dense.units % self.parts == 0 else 1
        if isinstance(x, RowCopies) and parts == len(x):
            outs = [dense(copy, residual=residual, column_parts=parts,
                          part=index, **folded)
                    for index, copy in enumerate(x)]
            return outs if output_parts else tf.concat(outs, axis=-1)
        out = dense(first_copy(x), residual=residual,
                    output_parts=output_parts, column_parts=parts, **folded)
        return RowCopies([out] * copies) if copies > 1 else out

    @staticmethod
    def _float(dense, x, kernels, output_parts=False, columns=None):
        """`dense` on `x` (or each of its `RowCopies`, one a kernel) as
        the column `kernels` (the variables of its `columns`, if given;
        None: whole)."""
        if kernels is None:
            return [dense(x)] if output_parts else dense(x)
        copies = x if isinstance(x, RowCopies) else [x] * len(kernels)
        bias = tf.cast(dense.bias.value, dense.compute_dtype)
        biases = tf.split(bias, len(kernels)) if columns is None else [
            tf.gather(bias, c) for c in columns]
        outs = [dense.activation(tf.nn.bias_add(tf.linalg.matmul(
            tf.cast(copy, dense.compute_dtype), kernel), bias))
                for copy, kernel, bias in zip(copies, kernels, biases)]
        return outs if output_parts else tf.concat(outs, axis=-1)

    @staticmethod
    def _rows(dense, parts, kernels, residual=None, copies=1):
        """A float layer without activation on its input's column
        `parts`, each on its slice of rows of the kernel, the products
        added (the first with `residual`, in its dtype; `copies` > 1: the
        sum as that many `RowCopies`). Each product adds an equal share
        of the bias: oneDNN keeps the reordered weights of a matmul fused
        with its bias, not of a plain one (bf16 BERT-Base, batch 1: 300
        against 127 us a node)."""
        dtype = dense.compute_dtype
        share = tf.cast(dense.bias.value, dtype) * tf.cast(
            1.0 / len(kernels), dtype)
        outs = [tf.nn.bias_add(tf.linalg.matmul(tf.cast(part, dtype),
                                                kernel), share)
                for part, kernel in zip(parts, kernels)]
        first = outs[0]
        if residual is not None:
            first = residual + tf.cast(first, residual.dtype)
        sums = added_copies(first, outs[1:], copies)
        return RowCopies(sums) if copies > 1 else sums[0]
