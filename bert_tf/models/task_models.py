"""Task models: an encoder plus a small head, each a functional Keras model
on the encoder inputs that compiles and fits with standard Keras losses.

Every task model has `encoder`, `head`, a `CHECKPOINT_ROOT` (its head's
root in checkpoints, see `models/checkpoint_layout.py`) and
`checkpoint_heads()`, so the trainer, checkpoints and the exporter handle
them alike.
"""

import keras

from bert_tf.layers.heads import (ChoiceLogits, ClassificationHead,
                                  FlattenChoices, MaskedMeanPool, SpanHead)
from bert_tf.models.checkpoint_layout import CheckpointLayout
from bert_tf.models.encoder import (INPUT_NAMES, encoder_inputs,
                                    from_config_with_encoder, select_inputs)


class TaskModel(CheckpointLayout, keras.Model):
    """What every task model shares: it takes the encoder inputs by name
    (other entries of a feature dict are dropped), keeps its head under
    `CHECKPOINT_ROOT` and serializes with its encoder and `CONFIG_ARGS`."""

    CHECKPOINT_ROOT = None
    CONFIG_ARGS = ()

    def _build(self, encoder, head, encoder_output, **kwargs):
        """Keeps `encoder` and `head`, then builds the functional model:
        `head` on the encoder's `encoder_output` for the encoder inputs
        (`mean_pooled`: the mean of `sequence_output` over real tokens)."""
        # === Layers ===
        self.encoder = encoder
        self.head = head

        # === Functional model ===
        inputs = encoder_inputs()
        outputs = encoder(inputs)
        if encoder_output == "mean_pooled":
            features = MaskedMeanPool(dtype=encoder.dtype_policy)(
                outputs["sequence_output"], inputs["input_mask"])
        else:
            features = outputs[encoder_output]
        super().__init__(inputs=inputs, outputs=head(features), **kwargs)

    def _build_dense(self, encoder, count_arg, count, dropout,
                     encoder_output, **kwargs):
        """`_build` with dropout + a dense layer of `count` outputs (the
        constructor argument `count_arg`) as the head."""
        if count < 1:
            raise ValueError(f"{count_arg} = {count}: must be >= 1.")
        head = ClassificationHead(count, dropout, **self._head_args(encoder))
        self._build(encoder, head, encoder_output, **kwargs)
        # === Config ===
        setattr(self, count_arg, count)
        self.dropout = dropout

    def _head_args(self, encoder):
        """What every head takes from the encoder, and its name."""
        return {"initializer_range": encoder.config.initializer_range,
                "dtype": encoder.dtype_policy, "name": self.CHECKPOINT_ROOT}

    def call(self, inputs, training=None, mask=None, **kwargs):
        return super().call(select_inputs(inputs, INPUT_NAMES),
                            training=training, mask=mask, **kwargs)

    def checkpoint_heads(self):
        """The head by checkpoint root (see `models/checkpoint_layout.py`)."""
        return {self.CHECKPOINT_ROOT: self.head}

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "encoder": keras.saving.serialize_keras_object(self.encoder),
            **{arg: getattr(self, arg) for arg in self.CONFIG_ARGS},
        }

    @classmethod
    def from_config(cls, config):
        return from_config_with_encoder(cls, config)


@keras.saving.register_keras_serializable(package="bert_tf")
class BertClassifier(TaskModel):
    """Sentence or sentence-pair classification (or regression) with BERT.

    Dropout + dense on the encoder's pooled `[CLS]` output, as in the paper.
    Outputs float32 logits [batch, num_classes]; with `num_classes=1` the
    single output is a regression score (STS-B style).

    Args:
        encoder: a `BertEncoder`.
        num_classes: number of classes (1: regression).
        dropout: dropout rate before the output layer.
        pooling: `cls`, the pooled `[CLS]` output (the paper), or `mean`,
            the mean of the final hidden states of the real tokens.

    Example:
    >>> import numpy as np, keras
    >>> from bert_tf.models.encoder import BertEncoder
    >>> model = BertClassifier(BertEncoder.from_preset("bert_tiny"), 2)
    >>> x = {"input_word_ids": np.full((4, 8), 1000, "int32"),
    ...      "input_mask": np.ones((4, 8), "int32"),
    ...      "input_type_ids": np.zeros((4, 8), "int32")}
    >>> model.compile(optimizer=keras.optimizers.AdamW(2e-5),
    ...               loss=keras.losses.SparseCategoricalCrossentropy(
    ...                   from_logits=True), metrics=["accuracy"])
    >>> history = model.fit(x, np.array([0, 1, 0, 1]), epochs=2, verbose=0)
    >>> model.predict(x, verbose=0).shape
    (4, 2)
    """

    CHECKPOINT_ROOT = "classifier"
    CONFIG_ARGS = ("num_classes", "dropout", "pooling")
    POOLED = {"cls": "pooled_output", "mean": "mean_pooled"}

    def __init__(self, encoder, num_classes, dropout=0.1, pooling="cls",
                 **kwargs):
        if pooling not in self.POOLED:
            raise ValueError(f"pooling = {pooling!r}: must be one of "
                             f"{', '.join(self.POOLED)}.")
        self._build_dense(encoder, "num_classes", num_classes, dropout,
                          self.POOLED[pooling], **kwargs)
        self.pooling = pooling


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

    Example:
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

    def __init__(self, encoder, **kwargs):
        self._build(encoder, SpanHead(**self._head_args(encoder)),
                    "sequence_output", **kwargs)


@keras.saving.register_keras_serializable(package="bert_tf")
class BertTokenClassifier(TaskModel):
    """Token tagging (NER) with BERT: dropout + dense on every final hidden
    state T_i, float32 logits [batch, seq, num_labels].

    As in the paper, train with each word's label on its first piece and
    a sample weight of 0 on the other pieces and the special tokens
    (`TaggingPreprocessor` makes both).

    Args:
        encoder: a `BertEncoder`.
        num_labels: number of tags.
        dropout: dropout rate before the output layer.

    Example:
    >>> import numpy as np, keras
    >>> from bert_tf.models.encoder import BertEncoder
    >>> model = BertTokenClassifier(BertEncoder.from_preset("bert_tiny"), 5)
    >>> x = {"input_word_ids": np.full((4, 8), 1000, "int32"),
    ...      "input_mask": np.ones((4, 8), "int32"),
    ...      "input_type_ids": np.zeros((4, 8), "int32")}
    >>> y, weights = np.ones((4, 8), "int32"), np.ones((4, 8), "float32")
    >>> model.compile(optimizer=keras.optimizers.AdamW(5e-5),
    ...               loss=keras.losses.SparseCategoricalCrossentropy(
    ...                   from_logits=True))
    >>> history = model.fit(x, y, sample_weight=weights, epochs=2, verbose=0)
    >>> tuple(model.predict(x, verbose=0).shape)
    (4, 8, 5)
    """

    CHECKPOINT_ROOT = "token_classifier"
    CONFIG_ARGS = ("num_labels", "dropout")

    def __init__(self, encoder, num_labels, dropout=0.1, **kwargs):
        self._build_dense(encoder, "num_labels", num_labels, dropout,
                          "sequence_output", **kwargs)


@keras.saving.register_keras_serializable(package="bert_tf")
class BertMultipleChoice(TaskModel):
    """Multiple choice (SWAG) with BERT: the context paired with each of C
    choices, inputs [batch, C, seq], flattened to [batch * C, seq] for the
    encoder; dropout + dense(1) on each pooled `[CLS]` output gives a
    score, and the scores are float32 logits [batch, C], trained with
    softmax cross-entropy over the choices as in the paper. C is whatever
    the inputs hold (it may differ between datasets and batches).

    Args:
        encoder: a `BertEncoder`.
        dropout: dropout rate before the scoring layer.

    Example:
    >>> import numpy as np, keras
    >>> from bert_tf.models.encoder import BertEncoder
    >>> model = BertMultipleChoice(BertEncoder.from_preset("bert_tiny"))
    >>> x = {"input_word_ids": np.full((4, 3, 8), 1000, "int32"),
    ...      "input_mask": np.ones((4, 3, 8), "int32"),
    ...      "input_type_ids": np.zeros((4, 3, 8), "int32")}
    >>> model.compile(optimizer=keras.optimizers.AdamW(2e-5),
    ...               loss=keras.losses.SparseCategoricalCrossentropy(
    ...                   from_logits=True), metrics=["accuracy"])
    >>> history = model.fit(x, np.array([0, 1, 2, 0]), epochs=2, verbose=0)
    >>> model.predict(x, verbose=0).shape
    (4, 3)
    """

    CHECKPOINT_ROOT = "multiple_choice"
    CONFIG_ARGS = ("dropout",)

    def __init__(self, encoder, dropout=0.1, **kwargs):
        # === Layers ===
        self.encoder = encoder
        self.head = ClassificationHead(1, dropout, **self._head_args(encoder))

        # === Functional model ===
        inputs = {name: keras.Input(shape=(None, None), dtype="int32",
                                    name=name) for name in INPUT_NAMES}
        rows = {name: FlattenChoices(name=f"flatten_{name}")(tensor)
                for name, tensor in inputs.items()}
        scores = self.head(encoder(rows)["pooled_output"])
        logits = ChoiceLogits(name="choice_logits")(
            scores, inputs["input_word_ids"])
        super().__init__(inputs=inputs, outputs=logits, **kwargs)

        # === Config ===
        self.dropout = dropout


TASK_MODELS = (BertClassifier, BertSpanLabeler, BertTokenClassifier,
               BertMultipleChoice)
