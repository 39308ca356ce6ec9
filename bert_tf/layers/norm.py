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

Served graphs (`served = True`, set by `BertEncoder.serving_form`) take
two ops less: with BERT's tiny epsilon, `rsqrt(mean(d * d) + eps)` equals
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
        self.served = False
        kwargs.setdefault("axis", -1)
        if kwargs["axis"] not in (-1, [-1], (-1,)):
            raise ValueError(f"LayerNorm normalizes the last axis only, not "
                             f"axis = {kwargs['axis']}.")
        super().__init__(**kwargs)

    def call(self, inputs, without_beta=False):
        """`without_beta`: the output less beta (`y - beta`), for a served
        block that adds beta in the biases of the layers it feeds
        (`bert_tf.layers.folding`)."""
        x = tf.cast(inputs, self.compute_dtype)
        axis = -1  # not rank - 1: see the module docstring
        centered = x - tf.reduce_mean(x, axis, keepdims=True)
        if self.served and self.epsilon <= self.SERVED_FORM_MAX_EPSILON \
                and self.scale and x.shape[-1] is not None:
            size = x.shape[-1]
            norm = tf.math.reduce_euclidean_norm(centered, axis, keepdims=True)
            y = centered * tf.math.reciprocal_no_nan(norm)
            y = y * (tf.cast(self.gamma, x.dtype) * size ** 0.5)
            return y + tf.cast(self.beta, x.dtype) if self.center and \
                not without_beta else y
        inv = tf.math.rsqrt(tf.reduce_mean(tf.square(centered), axis,
                                           keepdims=True) + self.epsilon)
        y = centered * inv
        if self.scale:
            y = y * tf.cast(self.gamma, x.dtype)
        return y + tf.cast(self.beta, x.dtype) if self.center and \
            not without_beta else y
