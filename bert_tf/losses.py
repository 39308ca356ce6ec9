"""Pre-training's losses, in float32 whatever the compute dtype: masked LM
and next sentence, and the sums they need under tf.distribute."""

import tensorflow as tf
from keras import ops


def masked_lm_loss(masked_lm_ids, mlm_logits, masked_lm_weights,
                   total_weight=None):
    """Cross-entropy at the masked positions, averaged over their weights.

    Args:
        masked_lm_ids: int [batch, P], the original tokens.
        mlm_logits: [batch, P, vocab].
        masked_lm_weights: [batch, P], 1.0 for real predictions, 0.0 for
            padding slots.
        total_weight: the denominator; default the sum of
            `masked_lm_weights` (pass the global sum under tf.distribute).

    Examples:
        >>> import numpy as np
        >>> float(masked_lm_loss(np.array([[1]]), np.zeros((1, 1, 4)),
        ...                      np.ones((1, 1))))  # log(4)
        1.386...
    """
    per_token = ops.sparse_categorical_crossentropy(
        masked_lm_ids, ops.cast(mlm_logits, "float32"), from_logits=True)
    weights = ops.cast(masked_lm_weights, "float32")
    if total_weight is None:
        total_weight = ops.sum(weights)
    # The original BERT's denominator: sum of weights + 1e-5.
    return ops.sum(per_token * weights) / (total_weight + 1e-5)


def next_sentence_loss(next_sentence_labels, nsp_logits):
    """Mean cross-entropy of IsNext (0) / NotNext (1)."""
    labels = ops.reshape(next_sentence_labels, (-1,))
    return ops.mean(ops.sparse_categorical_crossentropy(
        labels, ops.cast(nsp_logits, "float32"), from_logits=True))


def global_sum(value):
    """Sum of `value` over all replicas (itself outside tf.distribute)."""
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return value
    return context.all_reduce("SUM", value)


def scale_for_replicas(loss):
    """Divides a per-replica loss by the replica count.

    Gradients are summed across replicas, so each replica contributes 1/n of
    the global mean (what Keras's own losses do under tf.distribute).
    """
    replicas = tf.distribute.get_strategy().num_replicas_in_sync
    return loss if replicas == 1 else loss * (1.0 / replicas)
