"""Losses, in float32 whatever the compute dtype: pre-training's masked LM
and next sentence, and span QA's shared-normalization loss."""

import keras
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

    Example:
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


def _segment_logsumexp(values, segments, count):
    """log(sum(exp(values))) per segment; `values` may hold -inf (a
    segment of only -inf gives -inf)."""
    top = tf.math.unsorted_segment_max(values, segments, count)
    top = tf.where(tf.math.is_finite(top), top, 0.0)
    total = tf.math.unsorted_segment_sum(
        tf.exp(values - tf.gather(top, segments)), segments, count)
    return tf.math.log(total) + top


@keras.saving.register_keras_serializable(package="bert_tf")
class SharedSpanLoss(keras.losses.Loss):
    """Span start (or end) cross-entropy with one softmax over all windows
    of a question ("shared normalization", Clark & Gardner 2018).

    The paper's loss normalizes each window on its own, so nothing trains
    the logits of different windows to be comparable, yet decoding compares
    raw start + end logits across the windows of a long context. Here the
    windows of one question share one softmax:

    - answerable: -log of the probability, over every position of every
      window, of the answer's piece in the windows that hold it;
    - unanswerable: the mean over its windows of -log the probability of
      the window's `[CLS]` (decoding's null score is the lowest `[CLS]`
      score over the windows, so every one is trained up).

    A question's loss is spread evenly over its windows; the batch loss is
    the mean over windows, like the per-window loss.

    Args (of the call):
        y_true: int [W, 2]: the window's label position (0, `[CLS]`, where
            it does not hold the whole answer) and the question it belongs
            to (an index within the batch).
        y_pred: [W, L] logits.

    Example:
    >>> import numpy as np
    >>> loss = SharedSpanLoss()
    >>> # One question in two windows of 2 positions, the answer at
    >>> # position 1 of window 0: -log(e / (e + 3)), over 2 windows.
    >>> logits = np.array([[0., 1.], [0., 0.]])
    >>> round(float(loss(np.array([[1, 0], [0, 0]]), logits)), 4)
    0.3718
    >>> # Alone in its window, the loss equals plain cross-entropy.
    >>> round(float(loss(np.array([[1, 0]]), logits[:1])), 4)
    0.3133
    """

    def call(self, y_true, y_pred):
        labels = tf.cast(y_true, tf.int32)
        position, question = labels[:, 0], labels[:, 1]
        logits = tf.cast(y_pred, tf.float32)
        count = tf.reduce_max(question) + 1
        window_total = tf.reduce_logsumexp(logits, axis=1)
        question_total = tf.gather(
            _segment_logsumexp(window_total, question, count), question)
        holds = position > 0
        gold = tf.gather(logits, position, batch_dims=1)
        answer_total = tf.gather(_segment_logsumexp(
            tf.where(holds, gold, -float("inf")), question, count), question)
        answerable = tf.gather(tf.math.unsorted_segment_max(
            tf.cast(holds, tf.int32), question, count) > 0, question)
        windows = tf.gather(tf.math.unsorted_segment_sum(
            tf.ones_like(gold), question, count), question)
        per_question = tf.where(answerable, question_total - answer_total,
                                question_total - logits[:, 0])
        return per_question / windows
