"""Knowledge distillation (Hinton et al. 2015; DistilBERT, TinyBERT): a
student learns the teacher's softened output distribution as well as the
labels.

`Distiller` wraps a student task model and trains with `fit` (or the
trainer): its loss is `alpha` x the hard-label cross-entropy plus
`(1 - alpha)` x T^2 x the KL divergence from the teacher's to the
student's distribution at temperature T (the cross-entropy minus the
teacher's entropy: the same gradients, and 0 when they agree). The teacher's logits come from
the batch (`teacher_logits`, computed once beforehand, as `bert-tf
distill` does) or from a teacher model run on each batch (a notebook).
Labels below 0 mark unlabeled examples (a transfer set of raw text): only
the soft loss reads them.

Checkpoints, evaluation and export see the student alone: the distiller
exposes its encoder and heads, so a distillation run's `best/` is an
ordinary fine-tuning run of the student.
"""

import keras
import tensorflow as tf

from bert_tf.models.checkpoint_layout import CheckpointLayout

TEACHER_KEY = "teacher_logits"


def distillation_loss(labels, student_logits, teacher_logits, temperature,
                      alpha, weights=None):
    """alpha x CE(labels, student) + (1 - alpha) x T^2 x KL(teacher/T ||
    student/T), each a mean over the batch (the hard term over labeled
    rows only; labels < 0 are unlabeled).

    The T^2 keeps the soft term's gradients the same size whatever T
    (Hinton et al.). Logits are [batch, K], or [batch, positions, K] with
    labels [batch, positions] (per-token tasks), where `weights` (the
    shape of `labels`) says which positions count (a word's first piece).

    Examples:
        >>> import numpy as np
        >>> s = np.array([[2.0, 0.0], [0.0, 2.0]], "float32")
        >>> # soft only: nothing left to learn when they agree
        >>> round(float(distillation_loss(np.array([0, -1]), s, s, 1.0,
        ...                               0.0)), 4)
        0.0
        >>> # hard only: row 0's label; row 1 is unlabeled
        >>> round(float(distillation_loss(np.array([0, -1]), s, s, 1.0,
        ...                               1.0)), 4)
        0.1269
    """
    student = tf.cast(student_logits, tf.float32)
    teacher = tf.cast(teacher_logits, tf.float32)
    teacher_log = tf.nn.log_softmax(teacher / temperature)
    soft = tf.reduce_sum(tf.exp(teacher_log) * (
        teacher_log - tf.nn.log_softmax(student / temperature)), axis=-1)
    labels = tf.cast(labels, tf.int64)
    weights = (tf.ones_like(soft) if weights is None
               else tf.cast(weights, tf.float32))
    soft = tf.math.divide_no_nan(tf.reduce_sum(soft * weights),
                                 tf.reduce_sum(weights)) * temperature ** 2
    labeled = tf.cast(labels >= 0, tf.float32) * weights
    hard = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.maximum(labels, 0), logits=student)
    hard = tf.math.divide_no_nan(tf.reduce_sum(hard * labeled),
                                 tf.reduce_sum(labeled))
    return alpha * hard + (1.0 - alpha) * soft


class Distiller(CheckpointLayout, keras.Model):
    """A student task model trained on a teacher's outputs.

    Args:
        student: a task model (e.g. a `BertClassifier`); what is trained.
        teacher: the teacher task model (frozen), run on each batch whose
            inputs carry no `teacher_logits`; None when every batch does.
        temperature: T of the softened distributions (> 0).
        alpha: weight of the hard-label loss, in [0, 1].

    Examples:
        >>> import numpy as np
        >>> from bert_tf.models.encoder import BertEncoder
        >>> from bert_tf.tasks.classification.model import BertClassifier
        >>> keras.utils.set_random_seed(0)
        >>> teacher = BertClassifier(BertEncoder.from_preset("bert_tiny"), 2)
        >>> student = BertClassifier(BertEncoder.from_preset(
        ...     "bert_tiny", num_layers=1), 2)
        >>> distiller = Distiller(student, teacher, temperature=2.0)
        >>> distiller.compile(optimizer=keras.optimizers.Adam(1e-3))
        >>> x = {"input_word_ids": np.full((8, 8), 1000, "int32"),
        ...      "input_mask": np.ones((8, 8), "int32"),
        ...      "input_type_ids": np.zeros((8, 8), "int32")}
        >>> history = distiller.fit(x, np.array([0, 1] * 4), epochs=2,
        ...                         verbose=0)
        >>> distiller.predict(x, verbose=0).shape
        (8, 2)
    """

    def __init__(self, student, teacher=None, temperature=2.0, alpha=0.5,
                 **kwargs):
        super().__init__(**kwargs)
        if not temperature > 0:
            raise ValueError(f"temperature = {temperature}: must be > 0.")
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"alpha = {alpha}: must be in [0, 1].")
        # === Layers ===
        self.student = student
        self.teacher = teacher
        if teacher is not None:
            teacher.trainable = False
        # === Config ===
        self.temperature = float(temperature)
        self.alpha = float(alpha)

    @property
    def encoder(self):
        return self.student.encoder

    def checkpoint_heads(self):
        return self.student.checkpoint_heads()

    def call(self, inputs, training=None):
        return self.student(inputs, training=training)

    def teacher_logits(self, x):
        if isinstance(x, dict) and TEACHER_KEY in x:
            return x[TEACHER_KEY]
        if self.teacher is None:
            raise ValueError(f"the batch carries no `{TEACHER_KEY}` and the "
                             "distiller has no teacher to compute them.")
        return tf.stop_gradient(self.teacher(x, training=False))

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None,
                     training=True):
        return distillation_loss(y, y_pred, self.teacher_logits(x),
                                 self.temperature, self.alpha, sample_weight)
