"""Layer normalization over the last axis, written as few ops as TF allows.

Keras's `LayerNormalization` reshapes gamma and beta for inputs of another
rank than it was built for (token rows [n, H] after a build on [b, s, H]):
two reshapes and a negation more per norm than needed. This subclass keeps
its weights, names and config (checkpoints are unchanged) and computes

    d = x - mean(x);  y = d * rsqrt(mean(d * d) + eps) * gamma + beta

in nine ops, over axis -1 on purpose. Written as `x * inv + (beta - mean
* inv)` with the last axis as a positive index, and with gamma and beta
constants (a served encoder), it is the pattern Grappler's remapper fuses
into oneDNN's `_MklLayerNorm` (`remapper.cc`, "common norm"); but the
fused node does not take the graph's epsilon: it keeps the op's default of
1e-3 for BERT's 1e-12 (TF 2.20). MiniLM's logits then moved by 7e-4 and a
toy classifier's labels flipped; the fused node also took about 200 us a
call at batch 1 on 2 EPYC cores against about 25 us for the unfused ops.

Served graphs (`served_layer_norm`, which `bert_tf.models.served` calls)
take two ops less: with BERT's tiny epsilon, `rsqrt(mean(d * d) + eps)` equals
`sqrt(H) / |d|` (|d| one EuclideanNorm op) to float32 rounding unless a
row's variance is below about 1e3 * eps, and sqrt(H) folds into gamma.
`1 / |d|` is `reciprocal_no_nan` (one DivNoNan): a constant row (|d| = 0)
gives beta, as the eps form does, and a nearly constant one is still
scaled to unit variance, so outputs stay bounded. Not in training: the
norm's gradient is not finite where a row is constant. A reciprocal and a
multiply, not a division: broadcast division was 1.5x slower at 128 rows.
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

    # The largest epsilon for which the served form is exact (see above).
    SERVED_FORM_MAX_EPSILON = 1e-9

    def __init__(self, **kwargs):
        kwargs.setdefault("axis", -1)
        if kwargs["axis"] not in (-1, [-1], (-1,)):
            raise ValueError(f"LayerNorm normalizes the last axis only, not "
                             f"axis = {kwargs['axis']}.")
        super().__init__(**kwargs)

    def call(self, inputs):
        x = tf.cast(inputs, self.compute_dtype)
        axis = -1  # not rank - 1: see the module docstring
        centered = x - tf.reduce_mean(x, axis, keepdims=True)
        inv = tf.math.rsqrt(tf.reduce_mean(tf.square(centered), axis,
                                           keepdims=True) + self.epsilon)
        return self._scale_and_shift(centered * inv)

    def _scale_and_shift(self, y, add_beta=True):
        if self.scale:
            y = y * tf.cast(self.gamma, y.dtype)
        return y + tf.cast(self.beta, y.dtype) if self.center and add_beta \
            else y


def served_layer_norm(norm, inputs, add_beta=True):
    """`norm(inputs)` in its served form (see the module docstring) where
    it is exact (epsilon at most `SERVED_FORM_MAX_EPSILON`, with a gamma),
    else as `norm` computes it; without its beta if not `add_beta` (for a
    served block that adds beta in the biases of the layers it feeds:
    `bert_tf.layers.folding`). Not for training.

    Examples:
        >>> import numpy as np
        >>> x = np.random.default_rng(0).normal(size=(3, 8)).astype("float32")
        >>> norm = LayerNorm(epsilon=1e-12)
        >>> bool(np.abs(served_layer_norm(norm, x) - norm(x)).max() < 1e-5)
        True
    """
    if not norm.built:
        norm.build(inputs.shape)
    with tf.name_scope(norm.name):
        x = tf.cast(inputs, norm.compute_dtype)
        axis = -1
        centered = x - tf.reduce_mean(x, axis, keepdims=True)
        size = x.shape[-1]
        if norm.epsilon > norm.SERVED_FORM_MAX_EPSILON or not norm.scale or \
                size is None:
            inv = tf.math.rsqrt(tf.reduce_mean(tf.square(centered), axis,
                                               keepdims=True) + norm.epsilon)
            return norm._scale_and_shift(centered * inv, add_beta)
        length = tf.math.reduce_euclidean_norm(centered, axis, keepdims=True)
        y = centered * tf.math.reciprocal_no_nan(length)
        y = y * (tf.cast(norm.gamma, x.dtype) * size ** 0.5)
        return y + tf.cast(norm.beta, x.dtype) if norm.center and add_beta \
            else y
