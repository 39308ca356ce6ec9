"""BertDiscriminator: an encoder with ELECTRA's replaced-token head."""

import keras

from bert_tf import formats
from bert_tf.formats.canonical import assign_weights
from bert_tf.layers.heads import ReplacedTokenHead
from bert_tf.models.encoder import (INPUT_NAMES, BertEncoder, encoder_inputs,
                                    from_config_with_encoder, select_inputs)


@keras.saving.register_keras_serializable(package="bert_tf")
class BertDiscriminator(keras.Model):
    """ELECTRA's discriminator: for each token, the logit that it is not
    the original (a fill-in check: a word swapped into a sentence scores
    high). Outputs float32 `replaced_logits` [batch, seq].

    Load a pre-trained one with `BertDiscriminator.from_preset(name)`
    (`"electra_base_discriminator"`, `"hf://google/electra-small-
    discriminator"`, ...).

    Args:
        encoder: a `BertEncoder`.

    Examples:
        >>> import numpy as np
        >>> from bert_tf.models.encoder import BertEncoder
        >>> model = BertDiscriminator(BertEncoder.from_size("bert_tiny"))
        >>> ids = np.array([[101, 7592, 102]], "int32")
        >>> out = model({"input_word_ids": ids, "input_mask": ids * 0 + 1,
        ...              "input_type_ids": ids * 0})
        >>> tuple(out["replaced_logits"].shape)
        (1, 3)
    """

    CHECKPOINT_ROOT = "discriminator"

    def __init__(self, encoder, **kwargs):
        config = encoder.config
        # === Layers ===
        self.encoder = encoder
        self.head = ReplacedTokenHead(
            config.hidden_size, config.hidden_act, config.initializer_range,
            dtype=encoder.dtype_policy, name="discriminator_predictions")

        # === Functional model ===
        inputs = encoder_inputs()
        outputs = {"replaced_logits": self.head(
            encoder(inputs)["sequence_output"])}
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

    @classmethod
    def from_preset(cls, name, dtype=None):
        """The discriminator `name` names (an ELECTRA checkpoint), its
        encoder and head with their pre-trained weights."""
        config, weights, _ = formats.read_named(name)
        model = cls(BertEncoder.from_config_object(config, dtype=dtype))
        assign_weights(weights, model.encoder, discriminator=model.head,
                       source=str(name))
        return model

    def call(self, inputs, training=None, mask=None, **kwargs):
        return super().call(select_inputs(inputs, INPUT_NAMES),
                            training=training, mask=mask, **kwargs)

    def get_config(self):
        return {"name": self.name, "trainable": self.trainable,
                "encoder": keras.saving.serialize_keras_object(self.encoder)}

    @classmethod
    def from_config(cls, config):
        return from_config_with_encoder(cls, config)
