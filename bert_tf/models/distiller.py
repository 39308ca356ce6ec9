"""Knowledge distillation (Hinton et al. 2015; DistilBERT, TinyBERT): a
student learns the teacher's softened output distribution as well as the
labels.

`Distiller` wraps a student task model and trains with `fit` (or the
trainer): its loss is `alpha` x the hard-label cross-entropy plus
`(1 - alpha)` x T^2 x the KL divergence from the teacher's to the
student's distribution at temperature T (the cross-entropy minus the
teacher's entropy: the same gradients, and 0 when they agree). The
teacher's logits come from the batch (`teacher_logits`, computed once
beforehand, as `bert-tf distill` does) or from a teacher model run on
each batch (a notebook).
Labels below 0 mark unlabeled examples (a transfer set of raw text): only
the soft loss reads them.

Span QA students learn the teacher's start and end distributions over
each window's real tokens. Intermediate-layer matching (TinyBERT, MiniLM)
adds, per matched block, the mean squared error between the student's
hidden states (through a learned projection when the widths differ) and
the teacher's, and the KL divergence between their attention
distributions (when the head counts match); it runs the teacher's encoder
on each batch.

Checkpoints, evaluation and export see the student alone: the distiller
exposes its encoder and heads, so a distillation run's `best/` is an
ordinary fine-tuning run of the student (the projection is kept in
training checkpoints, for an exact resume, under its own root).
"""

import keras
import tensorflow as tf

from bert_tf.models.encoder import INPUT_NAMES, select_inputs

TEACHER_KEY = "teacher_logits"
PROJECTION_ROOT = "distill_projection"
_MASKED = -1e9


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


def position_distillation_loss(labels, student, teacher_logits, input_mask,
                               temperature, alpha, names):
    """The mean of `distillation_loss` over several distributions over a
    window's positions (span QA's start and end), each over the window's
    real tokens.

    Args:
        labels: int [W, N], a position per distribution (< 0: unlabeled).
        student: {name: [W, L]} for each of `names`.
        teacher_logits: [W, L, N], the distributions stacked in the order
            of `names`.
        input_mask: [W, L], 1 for real tokens.
        names: the student's outputs, in stacking order.

    Examples:
        >>> import numpy as np
        >>> t = np.zeros((1, 3, 2), "float32"); t[0, 1] = 4.0
        >>> s = {"start_logits": t[..., 0], "end_logits": t[..., 1]}
        >>> round(float(position_distillation_loss(np.array([[1, 1]]), s, t,
        ...     np.array([[1, 1, 0]]), 2.0, 0.0,
        ...     ("start_logits", "end_logits"))), 4)  # they agree
        0.0
    """
    outside = (1.0 - tf.cast(input_mask, tf.float32)) * _MASKED
    labels = tf.cast(labels, tf.int64)
    total = 0.0
    for i, name in enumerate(names):
        total += distillation_loss(
            labels[:, i], tf.cast(student[name], tf.float32) + outside,
            tf.cast(teacher_logits[..., i], tf.float32) + outside,
            temperature, alpha)
    return total / len(names)


def stacked_positions(model, outputs):
    """A model's outputs as one tensor: a dict of distributions over
    positions (`model.POSITION_OUTPUTS`) stacked on a last axis; logits
    as they are."""
    if not isinstance(outputs, dict):
        return outputs
    return tf.stack([outputs[name] for name in model.POSITION_OUTPUTS], -1)


def score_distillation_loss(labels, student, teacher, alpha):
    """Regression (one score per text): alpha x the squared error to the
    label plus (1 - alpha) x the squared error to the teacher's score,
    each a mean over the batch (the hard term over labeled rows; a NaN
    label is unlabeled). A score has no distribution to soften, so no
    temperature.

    Examples:
        >>> import numpy as np
        >>> s = np.array([[1.0], [2.0]], "float32")
        >>> float(score_distillation_loss(np.array([1.0, np.nan]), s,
        ...                               s + 1.0, 0.5))
        0.5
    """
    student = tf.cast(student, tf.float32)[:, 0]
    teacher = tf.cast(teacher, tf.float32)[:, 0]
    labels = tf.cast(labels, tf.float32)
    labeled = tf.logical_not(tf.math.is_nan(labels))
    hard = tf.math.divide_no_nan(
        tf.reduce_sum(tf.where(labeled, tf.square(
            student - tf.where(labeled, labels, 0.0)), 0.0)),
        tf.reduce_sum(tf.cast(labeled, tf.float32)))
    soft = tf.reduce_mean(tf.square(student - teacher))
    return alpha * hard + (1.0 - alpha) * soft


def hidden_state_loss(student, teacher, input_mask):
    """Mean squared error between hidden states [batch, seq, H] over the
    real tokens (TinyBERT's hidden-state loss)."""
    mask = tf.cast(input_mask, tf.float32)[..., None]
    error = tf.reduce_mean(tf.square(tf.cast(student, tf.float32) -
                                     tf.cast(teacher, tf.float32)), -1)
    return tf.math.divide_no_nan(tf.reduce_sum(error * mask[..., 0]),
                                 tf.reduce_sum(mask))


def attention_loss(student, teacher, input_mask):
    """KL(teacher || student) of attention distributions [batch, heads,
    seq, seq], averaged over heads and real query tokens (MiniLM's
    self-attention distribution transfer)."""
    student = tf.cast(student, tf.float32)
    teacher = tf.cast(teacher, tf.float32)
    kl = tf.reduce_sum(teacher * (tf.math.log(teacher + 1e-9) -
                                  tf.math.log(student + 1e-9)), -1)
    mask = tf.cast(input_mask, tf.float32)[:, None, :]
    return tf.math.divide_no_nan(
        tf.reduce_sum(kl * mask),
        tf.reduce_sum(mask) * tf.cast(tf.shape(kl)[1], tf.float32))


def uniform_layer_map(student_layers, teacher_layers):
    """The teacher block each student block matches, spread evenly and
    ending at the last (TinyBERT's uniform strategy).

    Examples:
        >>> uniform_layer_map(3, 6), uniform_layer_map(2, 6)
        ([1, 3, 5], [2, 5])
    """
    return [(i + 1) * teacher_layers // student_layers - 1
            for i in range(student_layers)]


def checked_layer_map(student, teacher, layer_map, attention_weight):
    """The teacher block each student block matches (`layer_map`, or
    `uniform_layer_map` when empty), for the encoder configs `student`
    and `teacher`; a clear error for a map that does not fit, or for
    attention matching across head counts."""
    layer_map = list(layer_map or uniform_layer_map(student.num_layers,
                                                    teacher.num_layers))
    if len(layer_map) != student.num_layers or any(
            not 0 <= i < teacher.num_layers for i in layer_map):
        raise ValueError(
            f"layer_map = {layer_map}: one teacher block (0 to "
            f"{teacher.num_layers - 1}) per student block "
            f"({student.num_layers}).")
    if attention_weight > 0 and student.num_heads != teacher.num_heads:
        raise ValueError(
            f"attention matching needs equal head counts: the student has "
            f"{student.num_heads}, the teacher {teacher.num_heads}; set "
            "attention_weight to 0 (hidden states still match).")
    return layer_map


class Distiller(keras.Model):
    """A student task model trained on a teacher's outputs.

    Args:
        student: a task model (e.g. a `BertClassifier`); what is trained.
        teacher: the teacher task model (frozen), run on each batch whose
            inputs carry no `teacher_logits` (and on every batch when
            intermediate layers are matched); None when every batch
            carries them.
        temperature: T of the softened distributions (> 0).
        alpha: weight of the hard-label loss, in [0, 1].
        hidden_weight: weight of the hidden-state loss of matched blocks
            (0: off).
        attention_weight: weight of the attention-distribution loss of
            matched blocks (0: off; needs equal head counts).
        layer_map: the teacher block each student block matches (default
            `uniform_layer_map`).

    Examples:
        >>> import numpy as np
        >>> from bert_tf.models.encoder import BertEncoder
        >>> from bert_tf.tasks.classification.model import BertClassifier
        >>> keras.utils.set_random_seed(0)
        >>> teacher = BertClassifier(BertEncoder.from_preset("bert_tiny"), 2)
        >>> student = BertClassifier(BertEncoder.from_preset(
        ...     "bert_tiny", num_layers=1), 2)
        >>> distiller = Distiller(student, teacher, temperature=2.0,
        ...                       hidden_weight=1.0, attention_weight=1.0)
        >>> distiller.layer_map
        [1]
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
                 hidden_weight=0.0, attention_weight=0.0, layer_map=None,
                 **kwargs):
        super().__init__(**kwargs)
        if not temperature > 0:
            raise ValueError(f"temperature = {temperature}: must be > 0.")
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"alpha = {alpha}: must be in [0, 1].")
        if hidden_weight < 0 or attention_weight < 0:
            raise ValueError("hidden_weight and attention_weight must be "
                             ">= 0.")
        # === Layers ===
        self.student = student
        self.teacher = teacher
        if teacher is not None:
            teacher.trainable = False
        self.projection = None
        # === Config ===
        self.temperature = float(temperature)
        self.alpha = float(alpha)
        self.hidden_weight = float(hidden_weight)
        self.attention_weight = float(attention_weight)
        self.layer_map = None
        if self.matches_layers:
            self._set_up_matching(layer_map)

    @property
    def matches_layers(self):
        return self.hidden_weight > 0 or self.attention_weight > 0

    def _set_up_matching(self, layer_map):
        if self.teacher is None:
            raise ValueError("matching intermediate layers needs the "
                             "teacher model (it runs on each batch).")
        s, t = self.student.encoder.config, self.teacher.encoder.config
        self.layer_map = checked_layer_map(s, t, layer_map,
                                           self.attention_weight)
        if self.hidden_weight > 0 and s.hidden_size != t.hidden_size:
            # TinyBERT's learned W_h: student width to the teacher's.
            self.projection = keras.layers.Dense(
                t.hidden_size, name=PROJECTION_ROOT)
            self.projection.build((None, s.hidden_size))

    @property
    def encoder(self):
        return self.student.encoder

    def checkpoint_heads(self):
        return self.student.checkpoint_heads()

    def extra_checkpoint_roots(self):
        """The projection of matched hidden states, if any: trained, so a
        resumed run restores it; best weights are the student's only."""
        if self.projection is None:
            return {}
        return {PROJECTION_ROOT: self.projection}

    def call(self, inputs, training=None):
        if not (training and self.matches_layers):
            return self.student(inputs, training=training)
        states = self.student.encoder(inputs, training=training)
        # The loss reads the student's hidden states of this same forward
        # pass; `compute_loss` runs right after `call` in one train step.
        object.__setattr__(self, "_student_states", states)
        return self.student.head_on(states, inputs, training=training)

    def teacher_logits(self, x, states=None):
        if isinstance(x, dict) and TEACHER_KEY in x:
            return x[TEACHER_KEY]
        if self.teacher is None:
            raise ValueError(f"the batch carries no `{TEACHER_KEY}` and the "
                             "distiller has no teacher to compute them.")
        out = (self.teacher.head_on(states, x) if states else
               self.teacher(select_inputs(x, INPUT_NAMES), training=False))
        return tf.stop_gradient(stacked_positions(self.teacher, out))

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None,
                     training=True):
        matching = training and self.matches_layers
        teacher_states = None
        if matching:
            teacher_states = tf.nest.map_structure(
                tf.stop_gradient, self.teacher.encoder(x, training=False))
        logits = self.teacher_logits(x, teacher_states)
        if isinstance(y_pred, dict):
            loss = position_distillation_loss(
                y, y_pred, logits, x["input_mask"], self.temperature,
                self.alpha, self.student.POSITION_OUTPUTS)
        elif y_pred.shape[-1] == 1:  # a regression score
            loss = score_distillation_loss(y, y_pred, logits, self.alpha)
        else:
            loss = distillation_loss(y, y_pred, logits, self.temperature,
                                     self.alpha, sample_weight)
        if matching:
            loss += self.intermediate_loss(
                self._student_states, teacher_states, x["input_mask"])
        return loss

    def intermediate_loss(self, student, teacher, input_mask):
        """The weighted hidden-state and attention losses of the matched
        blocks (student and teacher: the encoders' output dicts)."""
        total = 0.0
        blocks = self.student.encoder.transformer_layers
        teacher_blocks = self.teacher.encoder.transformer_layers

        def block_input(states, i):
            return (states["embedding_output"] if i == 0
                    else states["encoder_outputs"][i - 1])

        for j, t in enumerate(self.layer_map):
            if self.hidden_weight:
                hidden = student["encoder_outputs"][j]
                if self.projection is not None:
                    hidden = self.projection(hidden)
                total += self.hidden_weight * hidden_state_loss(
                    hidden, teacher["encoder_outputs"][t], input_mask)
            if self.attention_weight:
                total += self.attention_weight * attention_loss(
                    blocks[j].attention.probabilities(
                        block_input(student, j), input_mask),
                    tf.stop_gradient(teacher_blocks[t].attention.probabilities(
                        block_input(teacher, t), input_mask)), input_mask)
        return total / len(self.layer_map)
