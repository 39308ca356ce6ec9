"""Layer normalization over the last axis, written as few ops as TF allows.

Keras's `LayerNormalization` reshapes gamma and beta for inputs of another
rank than it was built for (token rows [n, H] after a build on [b, s, H]):
two reshapes and a negation more per norm than needed. This subclass keeps
its weights, names and config (checkpoints are unchanged) and computes

    inv = rsqrt(var(x) + eps) * gamma;  y = x * inv + (beta - mean(x) * inv)

It reduces over axis -1 on purpose. With the last axis as a positive index
and gamma and beta constants (a served encoder), Grappler's remapper fuses
this pattern into oneDNN's `_MklLayerNorm` (`remapper.cc`, "common norm"),
but the fused node does not take the graph's epsilon: it keeps the op's
default of 1e-3 for BERT's 1e-12 (TF 2.20). MiniLM's logits then moved by
7e-4 and a toy classifier's labels flipped; the fused node also took about
200 us a call at batch 1 on 2 EPYC cores against about 25 us for the eight
unfused ops.
"""

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="bert_tf")
class LayerNorm(keras.layers.LayerNormalization):
    """`keras.layers.LayerNormalization` over the last axis (the only axis
    BERT normalizes), in the fewest ops. Same arguments and weights.

    Examples:
        >>> import numpy as np
        >>> x = np.random.default_rng(0).normal(size=(3, 8)).astype("float32")
        >>> ours, theirs = LayerNorm(epsilon=1e-12), keras.layers.LayerNormalization(epsilon=1e-12)
        >>> bool(np.abs(ours(x) - theirs(x)).max() < 1e-5)
        True
    """

    def __init__(self, **kwargs):
        kwargs.setdefault("axis", -1)
        if kwargs["axis"] not in (-1, [-1], (-1,)):
            raise ValueError(f"LayerNorm normalizes the last axis only, not "
                             f"axis = {kwargs['axis']}.")
        super().__init__(**kwargs)

    def call(self, inputs):
        x = tf.cast(inputs, self.compute_dtype)
        axis = -1  # not rank - 1: see the module docstring
        mean = tf.reduce_mean(x, axis, keepdims=True)
        variance = tf.reduce_mean(tf.math.squared_difference(x, mean), axis,
                                  keepdims=True)
        inv = tf.math.rsqrt(variance + self.epsilon)
        if self.scale:
            inv = inv * tf.cast(self.gamma, x.dtype)
        shift = -mean * inv if not self.center else \
            tf.cast(self.beta, x.dtype) - mean * inv
        return x * inv + shift
