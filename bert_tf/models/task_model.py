"""The base of every task model: an encoder plus a small head, a
functional Keras model on the encoder inputs that compiles and fits with
standard Keras losses. Each kind's model lives in its folder
(`bert_tf/tasks/<kind>/model.py`).

Every task model has `encoder`, `head`, a `CHECKPOINT_ROOT` (its head's
root in checkpoints, see `checkpoints/layout.py`) and
`checkpoint_heads()`, so the trainer, checkpoints and the exporter handle
them alike.
"""

import keras

from bert_tf.layers.heads import ClassificationHead, MaskedMeanPool
from bert_tf.models.encoder import (INPUT_NAMES, BertEncoder,
                                    encoder_inputs, from_config_with_encoder,
                                    select_inputs)


class TaskModel(keras.Model):
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

        self.encoder_output = encoder_output
        self.feature_pool = (MaskedMeanPool(dtype=encoder.dtype_policy)
                             if encoder_output == "mean_pooled" else None)

        # === Functional model ===
        inputs = encoder_inputs()
        super().__init__(inputs=inputs, outputs=self.head_on(
            encoder(inputs), inputs), **kwargs)

    @classmethod
    def from_preset(cls, name, load_weights=True, dtype=None, **kwargs):
        """This task model on the encoder `name` names, with its
        pre-trained weights (`BertEncoder.from_preset`) and a new head.

        Args:
            name: a preset, `hf://ORG/NAME[@REVISION]`, `sample:NAME`, ...
            load_weights: False: a randomly initialized encoder.
            dtype: the encoder's dtype policy.
            **kwargs: the model's own arguments (`num_classes=2`, ...).

        Examples:
            >>> from bert_tf import BertClassifier
            >>> BertClassifier.from_preset("bert_tiny", num_classes=3
            ...                            ).output_shape
            (None, 3)
        """
        return cls(BertEncoder.from_preset(name, load_weights, dtype=dtype),
                   **kwargs)

    def head_on(self, encoder_outputs, inputs, training=None):
        """The model's outputs from the encoder's (`encoder_outputs`, the
        dict it returns for the feature dict `inputs`): what calling the
        model computes, for a caller that also reads the encoder's hidden
        states (distillation)."""
        return self.head(self.features(encoder_outputs, inputs),
                         training=training)

    @property
    def reads_pooled_output(self):
        """Whether the head reads the encoder's pooler."""
        return self.encoder_output == "pooled_output"

    @property
    def reads_first_token_only(self):
        """Whether the head reads the encoder's output at `[CLS]` alone
        (an export then computes the last layer there only)."""
        return self.encoder_output in ("pooled_output", "first_token")

    def features(self, encoder_outputs, inputs):
        """What the head reads: the encoder output named `encoder_output`,
        `mean_pooled` (the mean over real tokens) or `first_token` (the
        final hidden state of `[CLS]`, without the pooler)."""
        if self.feature_pool is not None:
            return self.feature_pool(encoder_outputs["sequence_output"],
                                     inputs["input_mask"])
        if self.encoder_output == "first_token":
            return encoder_outputs["sequence_output"][:, 0, :]
        return encoder_outputs[self.encoder_output]

    def _build_dense(self, encoder, count_arg, count, dropout,
                     encoder_output, hidden_activation=None, **kwargs):
        """`_build` with dropout + a dense layer of `count` outputs (the
        constructor argument `count_arg`) as the head (after a dense layer
        with `hidden_activation`, if given: `ClassificationHead`)."""
        if count < 1:
            raise ValueError(f"{count_arg} = {count}: must be >= 1.")
        head = ClassificationHead(count, dropout,
                                  hidden_activation=hidden_activation,
                                  **self._head_args(encoder))
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

    def call_with(self, encode, inputs):
        """What calling the model computes (in inference), with `encode`
        (a function of the encoder inputs that returns the encoder's
        outputs) as its encoder: an export's served encoder
        (`bert_tf.models.served`)."""
        return self.head_on(encode(select_inputs(inputs, INPUT_NAMES)),
                            inputs)

    def checkpoint_heads(self):
        """The head by checkpoint root (see `checkpoints/layout.py`)."""
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
