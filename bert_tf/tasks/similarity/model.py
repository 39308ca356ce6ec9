"""The bi-encoder: one encoder embeds each text of a pair alone; the score
is the cosine of the two embeddings."""

import keras
from keras import ops

from bert_tf.layers.heads import MaskedMeanPool
from bert_tf.models.encoder import INPUT_NAMES, from_config_with_encoder


def normalized(vectors):
    """Rows scaled to unit length (float32; a zero row stays zero)."""
    vectors = ops.cast(vectors, "float32")
    norm = ops.sqrt(ops.sum(vectors * vectors, axis=-1, keepdims=True))
    return vectors / ops.maximum(norm, 1e-12)


@keras.saving.register_keras_serializable(package="bert_tf")
class BertBiEncoder(keras.Model):
    """Sentence-pair similarity with one shared encoder (sentence-BERT).

    Inputs are the encoder inputs of both texts stacked on axis 1,
    [batch, 2, seq]; each text is embedded alone (the mean of its final
    hidden states over real tokens, L2-normalised) and the output is the
    cosine of the two, float32 [batch]. It has no head of its own: every
    weight is the encoder's.

    Args:
        encoder: a `BertEncoder`.

    Examples:
        >>> import numpy as np
        >>> from bert_tf.models.encoder import BertEncoder
        >>> model = BertBiEncoder(BertEncoder.from_preset("bert_tiny"))
        >>> ids = np.full((3, 2, 8), 1000, "int32")
        >>> x = {"input_word_ids": ids, "input_mask": np.ones_like(ids),
        ...      "input_type_ids": np.zeros_like(ids)}
        >>> np.round(model(x).numpy(), 4).tolist()  # identical texts
        [1.0, 1.0, 1.0]
    """

    def __init__(self, encoder, **kwargs):
        super().__init__(**kwargs)
        # === Layers ===
        self.encoder = encoder
        self.pool = MaskedMeanPool(dtype=encoder.dtype_policy)

    def embed(self, inputs, training=None):
        """Unit-length embeddings [rows, H] of encoder inputs [rows, seq]."""
        return self.embed_with(
            lambda rows: self.encoder(rows, training=training), inputs)

    def embed_with(self, encode, inputs):
        """`embed` with `encode` (inputs -> the encoder's outputs) as the
        encoder: an export's served encoder (`bert_tf.models.served`)."""
        outputs = encode({k: inputs[k] for k in INPUT_NAMES})
        return normalized(self.pool(outputs["sequence_output"],
                                    inputs["input_mask"]))

    def call(self, inputs, training=None):
        return self.call_with(
            lambda rows: self.encoder(rows, training=training), inputs)

    def call_with(self, encode, inputs):
        """The cosine of each pair (`call`) with `encode` as the encoder."""
        rows = {k: ops.reshape(inputs[k], (-1, ops.shape(inputs[k])[-1]))
                for k in INPUT_NAMES}
        pairs = ops.reshape(self.embed_with(encode, rows),
                            (-1, 2, self.encoder.config.hidden_size))
        return ops.sum(pairs[:, 0] * pairs[:, 1], axis=-1)

    @property
    def reads_pooled_output(self):
        """The embeddings pool the sequence: the pooler is not read."""
        return False

    def checkpoint_heads(self):
        return {}

    def get_config(self):
        return {"name": self.name, "trainable": self.trainable,
                "encoder": keras.saving.serialize_keras_object(self.encoder)}

    @classmethod
    def from_config(cls, config):
        return from_config_with_encoder(cls, config)
