"""Layer-norm betas folded into the biases of the layers they feed, in
served graphs: two adds and two constants fewer per transformer block.

A block's norm output `y = n * gamma + beta` feeds a dense layer and a
residual add. Served, the norm returns `y - beta`; the dense layer it
feeds adds `beta @ kernel` to its bias and the residual's dense layer
adds `beta` to its own, so every sum is the same. The new biases are
constants computed when the graph is traced (the vectors of a served
graph are constants already: `bert_tf.models.served`). An int8 layer
(`Int8Dense`) takes the same beta as arguments of its call instead: it
was converted with it as its `input_shift` (its input's ranges are those
of `y - beta`), and adds a residual's to its bias.
"""

import contextlib

import keras
import numpy as np
import tensorflow as tf

from bert_tf.layers.int8 import Int8Dense


def vector_value(variable, values):
    """The NumPy value of `variable` (a bias, gamma or beta): from
    `values` ({id(variable): value}, read before the served graph mapped
    the vectors to constants: `bert_tf.models.served`), else read now."""
    if id(variable) in values:
        return values[id(variable)]
    with tf.init_scope():
        return variable.numpy()


def foldable(dense):
    """Whether `dense` is a float Keras Dense with a bias (not int8, not
    a calibration recorder)."""
    return type(dense) is keras.layers.Dense and dense.use_bias


def takes_folded_beta(dense, reads_norm):
    """Whether a served block may leave a norm's beta out of the rows
    `dense` reads (`reads_norm`) or adds its output to: a float Dense with
    a bias (`biases_with`), or an `Int8Dense`, with that beta as its
    `input_shift` where it reads the norm."""
    if isinstance(dense, Int8Dense):
        return not reads_norm or dense.input_shift is not None
    return foldable(dense)


def beta_of(norm, values):
    """The float32 beta of a `LayerNorm` (None without one)."""
    return vector_value(norm.beta, values).astype("float32") \
        if norm.center else None


@contextlib.contextmanager
def biases_with(beta, values, fed=(), residual=()):
    """Within it, the dense layers `fed` by rows that lack `beta` (a
    float32 vector, or None) read `bias + beta @ kernel`, and those whose
    output is added to such rows (`residual`) read `bias + beta`, as
    constants of the graph. `values`: as in `vector_value`. Int8 layers
    are left as they are (they take `beta` as arguments: `Int8Dense`).

    Examples:
        >>> dense = keras.layers.Dense(2)
        >>> dense.build((None, 3))
        >>> beta = np.array([1.0, 2.0, 3.0], "float32")
        >>> x = np.ones((1, 3), "float32")
        >>> @tf.function
        ... def served(x):
        ...     with biases_with(beta, {}, fed=[dense]):
        ...         return dense(x - beta)
        >>> bool(np.allclose(served(x), dense(x), atol=1e-6))
        True
    """
    if beta is None or not beta.any():
        yield
        return
    mapping = []
    for dense in (*fed, *residual):
        if not foldable(dense):
            continue
        bias = vector_value(dense.bias, values).astype("float64")
        if dense in residual:
            bias += beta
        else:
            with tf.init_scope():  # a matrix: never a constant
                bias += beta.astype("float64") @ dense.kernel.numpy()
        mapping.append((dense.bias, bias.astype("float32")))
    with tf.compat.v1.get_default_graph().name_scope(""):
        constants = [tf.constant(value, name=f"{v.path}_folded")
                     for v, value in mapping]
    with keras.StatelessScope(state_mapping=[
            (v, c) for (v, _), c in zip(mapping, constants)]):
        yield
