"""The multiple-choice model: `BertMultipleChoice`, with the layers that
flatten choices into encoder rows and fold the scores back."""

import keras
from keras import ops

from bert_tf.layers.heads import ClassificationHead
from bert_tf.models.encoder import INPUT_NAMES
from bert_tf.models.task_model import TaskModel


@keras.saving.register_keras_serializable(package="bert_tf")
class FlattenChoices(keras.layers.Layer):
    """[batch, choices, seq] -> [batch * choices, seq] (multiple choice:
    every choice is one encoder row).

    Examples:
        >>> import numpy as np
        >>> tuple(FlattenChoices()(np.zeros((2, 4, 8), "int32")).shape)
        (8, 8)
    """

    def call(self, inputs):
        return ops.reshape(inputs, (-1, ops.shape(inputs)[-1]))

    def compute_output_spec(self, inputs):
        batch, choices, length = inputs.shape
        rows = None if batch is None or choices is None else batch * choices
        return keras.KerasTensor((rows, length), dtype=inputs.dtype)


@keras.saving.register_keras_serializable(package="bert_tf")
class ChoiceLogits(keras.layers.Layer):
    """One score per row [batch * choices, 1] -> [batch, choices] logits,
    shaped like `choices_like` [batch, choices, ...].

    Examples:
        >>> import numpy as np
        >>> scores = np.arange(6, dtype="float32").reshape(6, 1)
        >>> ChoiceLogits()(scores, np.zeros((2, 3, 5))).numpy().tolist()
        [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    """

    def call(self, scores, choices_like):
        shape = ops.shape(choices_like)
        return ops.reshape(scores, (shape[0], shape[1]))

    def compute_output_spec(self, scores, choices_like):
        return keras.KerasTensor(tuple(choices_like.shape[:2]),
                                 dtype=scores.dtype)


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
        pooling: what is scored: `cls`, the pooled `[CLS]` output (the
            paper), or `cls_relu` / `cls_gelu`, the final hidden state of
            `[CLS]` through a dense layer of the head's own and ReLU
            (DistilBERT's multiple-choice head) or exact GELU (ELECTRA's
            sequence summary).

    Examples:
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
    CONFIG_ARGS = ("dropout", "pooling")
    HIDDEN_ACTIVATIONS = {"cls": None, "cls_relu": "relu",
                          "cls_gelu": "gelu_exact"}

    def __init__(self, encoder, dropout=0.1, pooling="cls", **kwargs):
        if pooling not in self.HIDDEN_ACTIVATIONS:
            raise ValueError(f"pooling = {pooling!r}: must be one of "
                             f"{', '.join(self.HIDDEN_ACTIVATIONS)}.")
        # === Layers ===
        self.encoder = encoder
        self.head = ClassificationHead(
            1, dropout, hidden_activation=self.HIDDEN_ACTIVATIONS[pooling],
            **self._head_args(encoder))

        self.flatten = {name: FlattenChoices(name=f"flatten_{name}")
                        for name in INPUT_NAMES}
        self.choice_logits = ChoiceLogits(name="choice_logits")
        self.pooling = pooling

        # === Functional model ===
        inputs = {name: keras.Input(shape=(None, None), dtype="int32",
                                    name=name) for name in INPUT_NAMES}
        super().__init__(inputs=inputs, outputs=self.call_with(
            encoder, inputs), **kwargs)

        # === Config ===
        self.dropout = dropout

    @property
    def reads_pooled_output(self):
        """Whether the head reads the encoder's pooler."""
        return self.pooling == "cls"

    @property
    def reads_first_token_only(self):
        """The head reads `[CLS]` alone (pooled or not)."""
        return True

    def call_with(self, encode, inputs):
        """The choices' logits [batch, C] with `encode` as the encoder (the
        encoder, or an export's served one: `bert_tf.models.served`)."""
        outputs = encode({name: self.flatten[name](inputs[name])
                          for name in INPUT_NAMES})
        scores = self.head(outputs["pooled_output"] if self.pooling == "cls"
                           else outputs["sequence_output"][:, 0, :])
        return self.choice_logits(scores, inputs["input_word_ids"])
