"""The span QA model: `BertSpanLabeler` with its `SpanHead` (the paper's
start and end vectors), and `SharedSpanLoss` for training with one softmax
over all windows of a question."""

import keras
import tensorflow as tf
from keras import ops

from bert_tf.layers.base import ConfigLayer, truncated_normal
from bert_tf.models.task_model import TaskModel


@keras.saving.register_keras_serializable(package="bert_tf")
class SpanHead(ConfigLayer):
    """Start and end logits per token: the paper's vectors S and E.

    One dense layer with two outputs on every final hidden state T_i;
    `start_logits[i] = S . T_i`, `end_logits[i] = E . T_i` (float32).

    Args:
        initializer_range: stddev of the truncated-normal kernel initializer.

    Examples:
        >>> import numpy as np
        >>> out = SpanHead()(np.random.rand(2, 5, 8).astype("float32"))
        >>> tuple(out["start_logits"].shape), tuple(out["end_logits"].shape)
        ((2, 5), (2, 5))
    """

    CONFIG_ARGS = ("initializer_range",)

    def __init__(self, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        # === Config ===
        self.keep_config(locals())

        # === Layers ===
        self.dense = keras.layers.Dense(
            2, kernel_initializer=truncated_normal(initializer_range),
            dtype=self.dtype_policy, name="dense")

    def build(self, input_shape):
        self.dense.build(input_shape)
        self.built = True

    def call(self, sequence_output):
        logits = ops.cast(self.dense(sequence_output), "float32")
        return {"start_logits": logits[..., 0], "end_logits": logits[..., 1]}

    def compute_output_spec(self, sequence_output):
        shape = tuple(sequence_output.shape[:-1])
        return {name: keras.KerasTensor(shape, dtype="float32")
                for name in ("start_logits", "end_logits")}


@keras.saving.register_keras_serializable(package="bert_tf")
class BertSpanLabeler(TaskModel):
    """Extractive question answering (SQuAD) with BERT.

    The paper's start vector S and end vector E on every final hidden state:
    outputs float32 `start_logits` and `end_logits` [batch, seq]. Train with
    the start and end token positions as labels (0, the `[CLS]` token, for
    "no answer in this window"); the loss is the mean of the two
    cross-entropies, as in the original `run_squad.py`.

    Args:
        encoder: a `BertEncoder`.

    Examples:
        >>> import numpy as np, keras
        >>> from bert_tf.models.encoder import BertEncoder
        >>> model = BertSpanLabeler(BertEncoder.from_preset("bert_tiny"))
        >>> x = {"input_word_ids": np.full((4, 8), 1000, "int32"),
        ...      "input_mask": np.ones((4, 8), "int32"),
        ...      "input_type_ids": np.zeros((4, 8), "int32")}
        >>> y = {"start_logits": np.array([1, 2, 0, 3]),
        ...      "end_logits": np.array([1, 4, 0, 3])}
        >>> loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        >>> model.compile(optimizer=keras.optimizers.AdamW(5e-5),
        ...               loss={"start_logits": loss, "end_logits": loss},
        ...               loss_weights={"start_logits": 0.5, "end_logits": 0.5})
        >>> history = model.fit(x, y, epochs=2, verbose=0)
        >>> model.predict(x, verbose=0)["start_logits"].shape
        (4, 8)
    """

    CHECKPOINT_ROOT = "span_labeler"
    # Its distributions over positions, in the order a `Distiller` stacks
    # them (the last axis of the teacher's logits and of the labels).
    POSITION_OUTPUTS = ("start_logits", "end_logits")

    def __init__(self, encoder, **kwargs):
        self._build(encoder, SpanHead(**self._head_args(encoder)),
                    "sequence_output", **kwargs)


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

    Examples:
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
