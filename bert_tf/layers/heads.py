"""Output heads: masked LM (tied to the token embeddings), NSP, classification.

Every head returns float32 logits, also under mixed precision, so that
softmax and losses run in float32.
"""

import keras
from keras import ops

from bert_tf.layers.base import ConfigLayer, norm_policy, truncated_normal
from bert_tf.layers.dropout import Dropout
from bert_tf.layers.norm import LayerNorm
from bert_tf.layers.transformer import activation


def gather_positions(sequence, positions):
    """[batch, seq, H] at int positions [batch, P] -> [batch, P, H]."""
    positions = ops.cast(positions, "int32")
    return ops.take_along_axis(sequence, positions[:, :, None], axis=1)


@keras.saving.register_keras_serializable(package="bert_tf")
class MaskedLMHead(ConfigLayer):
    """Predicts the original tokens at `masked_lm_positions` only.

    dense + activation + LayerNorm, then logits = x · Eᵀ + bias, where E is
    the encoder's token embedding matrix (tied weights). Computing logits
    only at the masked positions (not the whole sequence) is what keeps the
    vocab projection cheap.

    Args:
        vocab_size: number of output classes (rows of E).
        hidden_size: width H.
        hidden_act: activation of the transform (`gelu`, `gelu_exact`).
        layer_norm_eps: LayerNorm epsilon.
        initializer_range: stddev of the truncated-normal initializers.
        token_embedding: the encoder's `keras.layers.Embedding` to tie to;
            if None the head owns an untied output matrix.

    Examples:
        >>> import numpy as np
        >>> head = MaskedLMHead(vocab_size=50, hidden_size=8)
        >>> seq = np.random.rand(2, 6, 8).astype("float32")
        >>> tuple(head(seq, np.array([[1, 2], [3, 0]])).shape)
        (2, 2, 50)
    """

    CONFIG_ARGS = ("vocab_size", "hidden_size", "hidden_act", "layer_norm_eps",
                   "initializer_range")

    def __init__(self, vocab_size, hidden_size, hidden_act="gelu",
                 layer_norm_eps=1e-12, initializer_range=0.02,
                 token_embedding=None, **kwargs):
        super().__init__(**kwargs)
        # === Config ===
        self.keep_config(locals())

        # === Layers ===
        # Held outside Keras/TF tracking: the table belongs to the encoder,
        # and one owner keeps one checkpoint path per variable.
        object.__setattr__(self, "token_embedding", token_embedding)
        self.transform = keras.layers.Dense(
            hidden_size, activation=activation(hidden_act),
            kernel_initializer=truncated_normal(
                initializer_range), dtype=self.dtype_policy, name="transform")
        self.layer_norm = LayerNorm(
            epsilon=layer_norm_eps, dtype=norm_policy(self.dtype_policy),
            name="layer_norm")

    def build(self, sequence_output_shape, masked_lm_positions_shape=None):
        self.transform.build((None, None, self.hidden_size))
        self.layer_norm.build((None, None, self.hidden_size))
        if self.token_embedding is None:
            self.output_embeddings = self.add_weight(
                shape=(self.vocab_size, self.hidden_size),
                initializer=truncated_normal(self.initializer_range),
                name="output_embeddings")
        self.output_bias = self.add_weight(
            shape=(self.vocab_size,), initializer="zeros", name="output_bias")
        self.built = True

    def call(self, sequence_output, masked_lm_positions):
        x = gather_positions(sequence_output, masked_lm_positions)
        x = self.layer_norm(self.transform(x))
        table = ops.convert_to_tensor(
            self.token_embedding.embeddings if self.token_embedding
            is not None else self.output_embeddings)
        # In the table's dtype: a float32 table (the embeddings of a bf16
        # model stay float32) is not cast whole on every call.
        logits = ops.matmul(ops.cast(x, table.dtype), ops.transpose(table))
        return ops.cast(logits, "float32") + ops.cast(self.output_bias,
                                                      "float32")

    def compute_output_spec(self, sequence_output, masked_lm_positions):
        return keras.KerasTensor(
            tuple(masked_lm_positions.shape) + (self.vocab_size,),
            dtype="float32")


@keras.saving.register_keras_serializable(package="bert_tf")
class ClassificationHead(ConfigLayer):
    """Dropout + dense on a pooled vector: K-way logits (K=1: regression).
    With `hidden_activation`, a dense layer of the vector's own width and
    that activation comes first (DistilBERT's `pre_classifier` + ReLU,
    ELECTRA's `classifier.dense` + GELU, on the first token's vector).

    Args:
        num_classes: number of outputs.
        dropout: dropout rate before the dense layer.
        initializer_range: stddev of the truncated-normal kernel initializer.
        hidden_activation: None, or an `EncoderConfig.hidden_act` name
            (`relu`, `gelu_exact`, `gelu`) for the layer before.

    Examples:
        >>> import numpy as np
        >>> pooled = np.random.rand(4, 8).astype("float32")
        >>> tuple(ClassificationHead(3)(pooled).shape)
        (4, 3)
        >>> head = ClassificationHead(3, hidden_activation="relu")
        >>> tuple(head(pooled).shape), tuple(head.hidden.kernel.shape)
        ((4, 3), (8, 8))
    """

    CONFIG_ARGS = ("num_classes", "dropout", "initializer_range",
                   "hidden_activation")

    def __init__(self, num_classes, dropout=0.1, initializer_range=0.02,
                 hidden_activation=None, **kwargs):
        super().__init__(**kwargs)
        # === Config ===
        self.keep_config(locals())

        # === Layers ===
        self.hidden = None
        if hidden_activation:
            self.hidden_function = activation(hidden_activation)
        self.dropout = Dropout(dropout, dtype=self.dtype_policy)
        self.dense = keras.layers.Dense(
            num_classes, kernel_initializer=truncated_normal(
                initializer_range), dtype=self.dtype_policy, name="dense")

    def build(self, input_shape):
        if self.hidden_activation:
            # Its width is the input's, known only here.
            self.hidden = keras.layers.Dense(
                input_shape[-1], activation=self.hidden_function,
                kernel_initializer=truncated_normal(self.initializer_range),
                dtype=self.dtype_policy, name="hidden")
            self.hidden.build(input_shape)
        self.dense.build(input_shape)
        self.built = True

    def call(self, pooled_output, training=None):
        if self.hidden is not None:
            pooled_output = self.hidden(pooled_output)
        return ops.cast(
            self.dense(self.dropout(pooled_output, training=training)),
            "float32")

    def compute_output_spec(self, pooled_output, training=None):
        return keras.KerasTensor(
            tuple(pooled_output.shape[:-1]) + (self.num_classes,),
            dtype="float32")

    def set_dense_weights(self, output, hidden=None):
        """Sets the output layer's (kernel, bias) `output` and the hidden
        layer's `hidden` (if it has one), as a Keras `Dense` holds them:
        how a converted checkpoint's head arrives
        (`bert_tf.formats.hf.linear`)."""
        if (hidden is None) != (self.hidden is None):
            raise ValueError(
                f"{self.name} has {'a' if self.hidden else 'no'} hidden "
                "layer; the weights given "
                f"{'lack' if hidden is None else 'add'} one.")
        if hidden is not None:
            self.hidden.set_weights(list(hidden))
        self.dense.set_weights(list(output))


class MaskedMeanPool(keras.layers.Layer):
    """The mean of a sequence's vectors over its real (mask 1) positions.

    Examples:
        >>> import numpy as np
        >>> x = np.arange(6, dtype="float32").reshape(1, 3, 2)
        >>> MaskedMeanPool()(x, np.array([[1, 1, 0]])).numpy().tolist()
        [[1.0, 2.0]]
    """

    def call(self, sequence, input_mask):
        mask = ops.expand_dims(ops.cast(input_mask, sequence.dtype), -1)
        count = ops.maximum(ops.sum(mask, axis=1), 1.0)
        return ops.sum(sequence * mask, axis=1) / count

    def compute_output_shape(self, sequence_shape, input_mask_shape=None):
        return (sequence_shape[0], sequence_shape[-1])


@keras.saving.register_keras_serializable(package="bert_tf")
class NextSentenceHead(ClassificationHead):
    """Binary IsNext (0) / NotNext (1) classifier on the pooled `[CLS]`.

    The original BERT has no dropout here; the pooled output already passed
    through the pooler.

    Args:
        initializer_range: stddev of the truncated-normal kernel initializer.

    Examples:
        >>> import numpy as np
        >>> pooled = np.random.rand(4, 8).astype("float32")
        >>> tuple(NextSentenceHead()(pooled).shape)
        (4, 2)
    """

    def __init__(self, initializer_range=0.02, **kwargs):
        kwargs.pop("num_classes", None)
        kwargs.pop("dropout", None)
        super().__init__(num_classes=2, dropout=0.0,
                         initializer_range=initializer_range, **kwargs)


@keras.saving.register_keras_serializable(package="bert_tf")
class ReplacedTokenHead(ConfigLayer):
    """ELECTRA's discriminator head: for each token, the logit that it was
    replaced (dense + activation, then dense to one output).

    Args:
        hidden_size: width H of the sequence output.
        hidden_act: activation between the two dense layers.
        initializer_range: stddev of the truncated-normal initializers.

    Examples:
        >>> import numpy as np
        >>> head = ReplacedTokenHead(8)
        >>> tuple(head(np.random.rand(2, 5, 8).astype("float32")).shape)
        (2, 5)
    """

    CONFIG_ARGS = ("hidden_size", "hidden_act", "initializer_range")

    def __init__(self, hidden_size, hidden_act="gelu_exact",
                 initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        # === Config ===
        self.keep_config(locals())

        # === Layers ===
        init = truncated_normal(initializer_range)
        self.dense = keras.layers.Dense(
            hidden_size, activation=activation(hidden_act),
            kernel_initializer=init, dtype=self.dtype_policy, name="dense")
        self.dense_prediction = keras.layers.Dense(
            1, kernel_initializer=init, dtype=self.dtype_policy,
            name="dense_prediction")

    def build(self, sequence_output_shape):
        self.dense.build(sequence_output_shape)
        self.dense_prediction.build(
            tuple(sequence_output_shape[:-1]) + (self.hidden_size,))
        self.built = True

    def call(self, sequence_output):
        logits = self.dense_prediction(self.dense(sequence_output))
        return ops.cast(ops.squeeze(logits, -1), "float32")

    def compute_output_spec(self, sequence_output):
        return keras.KerasTensor(tuple(sequence_output.shape[:-1]),
                                 dtype="float32")
