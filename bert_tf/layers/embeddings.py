"""BERT input embeddings: token + segment + learned position, LayerNorm,
dropout (and, for ELECTRA-Small's narrower embeddings, a projection)."""

import keras
import tensorflow as tf

# truncated_normal is re-exported: it lived here first.
from bert_tf.layers.base import (ConfigLayer, norm_policy,  # noqa: F401
                                 truncated_normal)
from bert_tf.layers.dropout import Dropout
from bert_tf.layers.norm import LayerNorm


@keras.saving.register_keras_serializable(package="bert_tf")
class BertEmbeddings(ConfigLayer):
    """Sum of token, segment and position embeddings, normalized.

    Args:
        vocab_size: rows of the token embedding.
        hidden_size: embedding width H.
        max_position_embeddings: rows of the position embedding.
        type_vocab_size: rows of the segment embedding.
        dropout: dropout rate after the LayerNorm.
        initializer_range: stddev of the truncated-normal initializers.
        layer_norm_eps: LayerNorm epsilon.
        embedding_size: width of the embedding tables when it differs from
            `hidden_size` (a dense layer then projects to `hidden_size`, as
            ELECTRA); 0: `hidden_size`.

    With `type_vocab_size=0` there is no segment embedding (DistilBERT):
    the type ids are accepted and ignored.

    Examples:
        >>> import numpy as np
        >>> layer = BertEmbeddings(vocab_size=100, hidden_size=8)
        >>> ids = np.ones((2, 5), "int32")
        >>> tuple(layer(ids, np.zeros_like(ids)).shape)
        (2, 5, 8)
    """

    CONFIG_ARGS = ("vocab_size", "hidden_size", "max_position_embeddings",
                   "type_vocab_size", "dropout", "initializer_range",
                   "layer_norm_eps", "embedding_size")

    def __init__(self, vocab_size, hidden_size, max_position_embeddings=512,
                 type_vocab_size=2, dropout=0.1, initializer_range=0.02,
                 layer_norm_eps=1e-12, embedding_size=0, **kwargs):
        super().__init__(**kwargs)
        # === Config ===
        self.keep_config(locals())

        # === Layers ===
        init = truncated_normal(initializer_range)
        width = self.width = embedding_size or hidden_size
        self.word_embeddings = keras.layers.Embedding(
            vocab_size, width, embeddings_initializer=init,
            dtype=norm_policy(self.dtype_policy), name="word_embeddings")
        self.type_embeddings = keras.layers.Embedding(
            type_vocab_size, width, embeddings_initializer=init,
            dtype=norm_policy(self.dtype_policy),
            name="type_embeddings") if type_vocab_size else None
        self.position_embeddings = keras.layers.Embedding(
            max_position_embeddings, width, embeddings_initializer=init,
            dtype=norm_policy(self.dtype_policy), name="position_embeddings")
        self.projection = keras.layers.Dense(
            hidden_size, kernel_initializer=init, dtype=self.dtype_policy,
            name="projection") if width != hidden_size else None
        self.layer_norm = LayerNorm(
            epsilon=layer_norm_eps, dtype=norm_policy(self.dtype_policy),
            name="layer_norm")
        self.dropout = Dropout(dropout, dtype=norm_policy(self.dtype_policy))

    def build(self, word_ids_shape, type_ids_shape=None):
        self.word_embeddings.build(None)
        if self.type_embeddings is not None:
            self.type_embeddings.build(None)
        self.position_embeddings.build(None)
        self.layer_norm.build((None, None, self.width))
        if self.projection is not None:
            self.projection.build((None, None, self.width))
        self.built = True

    def call(self, word_ids, type_ids, training=None, norm=None):
        """`norm`: the layer norm as a function of the summed embeddings
        (a served graph passes `bert_tf.layers.norm.served_layer_norm`'s);
        None: `self.layer_norm`."""
        length = word_ids.shape[1]
        if length is not None and length > self.max_position_embeddings:
            raise ValueError(
                f"input_word_ids has {length} positions but this model has "
                f"max_position_embeddings = {self.max_position_embeddings}: "
                "pack the text to at most that sequence length.")
        # Plain gathers (Keras's also wrap negative ids: two ops more
        # each) and the positions as the table's first rows.
        x = tf.gather(self.word_embeddings.embeddings, word_ids) + \
            self.position_embeddings.embeddings[:tf.shape(word_ids)[1]]
        if self.type_embeddings is not None:
            x = x + tf.gather(self.type_embeddings.embeddings, type_ids)
        x = self.dropout((norm or self.layer_norm)(x), training=training)
        return x if self.projection is None else self.projection(x)

    def compute_output_shape(self, word_ids_shape, type_ids_shape=None):
        return tuple(word_ids_shape) + (self.hidden_size,)
