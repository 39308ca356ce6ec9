"""The post-LayerNorm transformer block of BERT: self-attention + feed-forward.

Attention is written out (fused QKV projection, batched matmuls, float32
softmax) rather than taken from `keras.layers.MultiHeadAttention` so that
the weight layout maps one-to-one onto the original BERT checkpoints and
the whole block stays XLA-friendly.

The block works on token rows [batch * seq, H]: every dense layer is then a
plain MatMul, which Grappler fuses with its bias and GELU into one oneDNN
kernel (a MatMul on [batch, seq, H] becomes a BatchMatMulV2 that does not
fuse); the attention scores are matmul, scale, mask-add in that order,
which oneDNN fuses into one batched-matmul kernel.
"""

import math

import keras
from keras import ops
import numpy as np
import tensorflow as tf

from bert_tf.layers.base import ConfigLayer, norm_policy, truncated_normal
from bert_tf.layers.dropout import Dropout
from bert_tf.layers.norm import LayerNorm
# Moved to token_rows.py; still importable from here.
from bert_tf.layers.token_rows import (  # noqa: F401
    TokenRows, attention_logit_bias)


@keras.saving.register_keras_serializable(package="bert_tf")
def gelu_tanh(x):
    """The original BERT's GELU: the tanh approximation."""
    return keras.activations.gelu(x, approximate=True)


@keras.saving.register_keras_serializable(package="bert_tf")
def gelu_erf(x):
    """The exact GELU, x * Phi(x)."""
    return keras.activations.gelu(x, approximate=False)


def activation(name):
    """The feed-forward activation named in `EncoderConfig.hidden_act`."""
    if name == "gelu":  # The original BERT's tanh approximation.
        return gelu_tanh
    if name == "gelu_exact":
        return gelu_erf
    if name == "relu":
        return keras.activations.relu
    raise ValueError(
        f"hidden_act = {name!r}: must be one of gelu, gelu_exact, relu.")


# Integers of each float type's width: a transpose of them is a copy of the
# same bits.
_SAME_WIDTH_INT = {tf.float32: tf.int32, tf.bfloat16: tf.int16,
                   tf.float16: tf.int16}


def transpose_heads(x, perm):
    """`tf.transpose(x, perm)` by TensorFlow's own kernel, on the bits of
    `x` as integers: oneDNN's rewrite (`_MklTranspose`, float types only)
    costs about 45 us more a call whatever the size (54 against 11 us
    beyond an add, at one sentence's [1, 24, 3, 12, 32] on 2 EPYC cores;
    within 16% either way at 32 sentences). Not for training: a bitcast
    has no gradient. (Served encoders no longer transpose their heads:
    their layouts gather them, `bert_tf.layers.token_rows`.)

    Examples:
        >>> x = tf.reshape(tf.range(6.0), (1, 2, 3))
        >>> transpose_heads(x, (0, 2, 1)).numpy().tolist()
        [[[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]]
    """
    x = tf.convert_to_tensor(x)
    bits = _SAME_WIDTH_INT.get(x.dtype)
    if bits is None:
        return tf.transpose(x, perm)
    return tf.bitcast(tf.transpose(tf.bitcast(x, bits), perm), x.dtype)


@keras.saving.register_keras_serializable(package="bert_tf")
class MultiHeadSelfAttention(ConfigLayer):
    """Multi-head scaled dot-product self-attention with a padding mask.

    Args:
        hidden_size: input and output width H.
        num_heads: number of heads A; H must be divisible by A.
        dropout: dropout rate on the attention probabilities.
        initializer_range: stddev of the truncated-normal kernel initializer.
        causal: if True, position i attends only to positions <= i.

    Examples:
        >>> import numpy as np
        >>> layer = MultiHeadSelfAttention(hidden_size=8, num_heads=2)
        >>> x = np.random.rand(2, 5, 8).astype("float32")
        >>> tuple(layer(x, np.ones((2, 5), "int32")).shape)
        (2, 5, 8)
    """

    CONFIG_ARGS = ("hidden_size", "num_heads", "dropout", "initializer_range",
                   "causal")

    def __init__(self, hidden_size, num_heads, dropout=0.1,
                 initializer_range=0.02, causal=False, **kwargs):
        super().__init__(**kwargs)
        if hidden_size % num_heads:
            raise ValueError(
                f"hidden_size = {hidden_size} is not divisible by num_heads "
                f"= {num_heads}.")
        # === Config ===
        self.keep_config(locals())
        self.head_size = hidden_size // num_heads

        # === Layers ===
        init = truncated_normal(initializer_range)
        # One [H, 3H] projection: columns are [query | key | value].
        self.qkv = keras.layers.Dense(
            3 * hidden_size, kernel_initializer=init, dtype=self.dtype_policy,
            name="qkv")
        self.output_dense = keras.layers.Dense(
            hidden_size, kernel_initializer=init, dtype=self.dtype_policy,
            name="output_dense")
        self.dropout = Dropout(dropout, dtype=self.dtype_policy)

    def build(self, x_shape, input_mask_shape=None):
        self.qkv.build((None, None, self.hidden_size))
        self.output_dense.build((None, None, self.hidden_size))
        self.built = True

    def head_group_columns(self, groups):
        """The `qkv` kernel's columns of each of `groups` groups of heads,
        in order: its heads' query, key and value columns. Served graphs
        run each group's matmul and attention on a thread of its own."""
        if self.num_heads % groups:
            raise ValueError(f"{self.num_heads} heads do not split in "
                             f"{groups} groups.")
        width = self.hidden_size // groups
        return [np.concatenate([np.arange(group * width, (group + 1) * width)
                                + kind * self.hidden_size
                                for kind in range(3)])
                for group in range(groups)]

    def _attend(self, x, input_mask, attention_bias=None,
                transpose=ops.transpose, token_rows=None, first_query=False,
                float32_softmax=True, qkv=None):
        """[(attention probabilities [batch, heads, queries, seq], float32
        if `float32_softmax` else in the logits' dtype; values [batch,
        heads, seq, head_size])] of `x`, for every position's query, or
        each sequence's first only if `first_query`: one pair, or one per
        head group where `qkv` returns a list (of `head_group_columns`)."""
        if attention_bias is None:
            attention_bias = attention_logit_bias(input_mask, self.causal)
        qkv = (qkv or self.qkv)(ops.reshape(x, (-1, self.hidden_size)))
        return [self._group(part, attention_bias, transpose, token_rows,
                            first_query, float32_softmax)
                for part in (qkv if isinstance(qkv, list) else [qkv])]

    def _group(self, qkv, attention_bias, transpose, token_rows, first_query,
               float32_softmax):
        """`_attend` for the query/key/value rows of some heads."""
        heads = qkv.shape[-1] // (3 * self.head_size)
        if token_rows is not None:  # one gather (`bert_tf.layers.token_rows`)
            query, key, value = token_rows.to_heads(qkv, heads,
                                                    self.head_size)
        else:
            # [batch, seq, 3, heads, head_size]: the batch and length are
            # the bias's, which every layer shares.
            qkv = ops.reshape(qkv, (
                -1, ops.shape(attention_bias)[-1], 3, heads, self.head_size))
            # [3, batch, heads, seq, head_size]: one transpose for q, k, v.
            query, key, value = ops.unstack(
                transpose(qkv, (2, 0, 3, 1, 4)), 3, axis=0)
        if first_query:
            query = query[:, :, :1]
            if self.causal:  # else [batch, 1, 1, seq] already
                attention_bias = attention_bias[:, :, :1]
        logits = tf.linalg.matmul(query, key, transpose_b=True) * ops.cast(
            1.0 / math.sqrt(self.head_size), query.dtype)
        # Keras casts a float argument to the layer's compute dtype: the
        # bias comes back to the softmax's dtype (a no-op in float32).
        dtype = "float32" if float32_softmax else logits.dtype
        return ops.softmax(ops.cast(logits, dtype) + ops.cast(
            attention_bias, dtype), axis=-1), value

    def scale_values(self, qkv, scale):
        """Multiplies the value columns of the float `qkv` Dense (this
        layer's, or the one it wraps) by `scale` [H]: the attention's
        output before `output_dense` is then scaled per channel alike
        (probabilities x values is linear in the values). For int8
        export."""
        kernel, bias = qkv.kernel.numpy(), qkv.bias.numpy()
        values = slice(2 * self.hidden_size, 3 * self.hidden_size)
        kernel[:, values] *= scale
        bias[values] *= scale
        qkv.kernel.assign(kernel)
        qkv.bias.assign(bias)

    def probabilities(self, x, input_mask):
        """The attention distributions (float32 [batch, heads, seq, seq],
        before dropout) of the input `x` [batch, seq, H]: what
        distillation matches (MiniLM, TinyBERT)."""
        return self._attend(x, input_mask)[0][0]

    def call(self, x, input_mask=None, training=None, attention_bias=None,
             rows_shape=None, transpose=None, token_rows=None,
             first_query=False, float32_softmax=True):
        """`x`: [batch, seq, H], or token rows [batch * seq, H] of
        `input_mask`'s [batch, seq] (returned in the same shape). The
        other arguments are `context`'s."""
        out = self.output_dense(self.context(
            x, input_mask, training, attention_bias, rows_shape, transpose,
            token_rows, first_query, float32_softmax))
        return out if len(x.shape) == 2 else ops.reshape(out, ops.shape(x))

    def context(self, x, input_mask=None, training=None, attention_bias=None,
                rows_shape=None, transpose=None, token_rows=None,
                first_query=False, float32_softmax=True, qkv=None):
        """The attention's output rows before `output_dense`, [rows, H]:
        `call` without its last matmul (served blocks run that matmul
        themselves, with the residual's add: `bert_tf.models.served`).

        `attention_bias`: `attention_logit_bias(input_mask)`, or
        `token_rows.attention_bias()`, when the caller computed it once for
        all layers (then `input_mask` may be None); `rows_shape`: the shape
        of token rows `x`, likewise, or of the output rows. `transpose`: the
        heads' transpose without `token_rows` (None: `ops.transpose`).
        `token_rows`: a
        `TokenRows` when `x` holds only its kept rows (served graphs): the
        attention runs on its layout (a `PackedRows` packs the sequences),
        which takes the heads in one gather each way.
        `first_query`: token rows `x` of `token_rows`; the output at each
        sequence's first token only, [batch, H] (served graphs whose head
        reads `[CLS]` alone). `float32_softmax`: False computes the
        softmax in the logits' dtype (served bf16 graphs: oneDNN's bf16
        softmax accumulates in float32 and rounds its output, which the
        bf16 matmul after it would round anyway). `qkv`: what computes
        the query/key/value rows in place of the `qkv` layer (served
        graphs: `bert_tf.models.split_matmuls.SplitMatmuls`); where it returns a
        list, the rows of each group of heads (`head_group_columns`), the
        output is a list too: each group's [rows, H / groups]."""
        transpose = transpose or ops.transpose
        groups = self._attend(x, input_mask, attention_bias, transpose,
                              token_rows, first_query, float32_softmax, qkv)
        if len(groups) > 1 and rows_shape is not None:  # each group's
            rows_shape = tf.concat([rows_shape[:-1], [
                self.hidden_size // len(groups)]], 0)
        contexts = [self._context(probs, value, x, training, rows_shape,
                                  transpose, token_rows, first_query,
                                  len(groups))
                    for probs, value in groups]
        return contexts if len(groups) > 1 else contexts[0]

    def _context(self, probs, value, x, training, rows_shape, transpose,
                 token_rows, first_query, groups):
        """`context` for the heads of `probs` and `value`, one of `groups`
        head groups: [rows, H / groups] (`rows_shape`, if given, is
        that)."""
        width = self.hidden_size // groups
        if training:
            probs = self.dropout(ops.cast(probs, self.compute_dtype),
                                 training=training)
        # The values' dtype: bf16 from an int8 query/key/value whose
        # attention runs in bf16 (`BertEncoder.to_int8`).
        context = ops.matmul(ops.cast(probs, value.dtype), value)
        if first_query:  # [batch, heads, 1, head_size] is [batch, W] as is
            return tf.reshape(context, (-1, width)
                              if rows_shape is None else rows_shape)
        if token_rows is not None:
            context = token_rows.from_heads(context)
        else:
            context = transpose(context, (0, 2, 1, 3))
        if len(x.shape) == 2:
            # The rows' own shape, not (-1, W): Grappler then knows that the
            # output has the residual's rows and fuses the block's residual
            # add into the matmul after.
            if rows_shape is None:
                rows_shape = tf.shape(x) if groups == 1 else tf.concat(
                    [tf.shape(x)[:-1], [width]], 0)
            return tf.reshape(context, rows_shape)
        return ops.reshape(context, (-1, width))

    def compute_output_shape(self, x_shape, input_mask_shape=None):
        return x_shape


@keras.saving.register_keras_serializable(package="bert_tf")
class TransformerBlock(ConfigLayer):
    """Post-LayerNorm block: x = LN(x + Attn(x)); x = LN(x + FFN(x)).

    Args:
        hidden_size: width H.
        num_heads: attention heads A.
        intermediate_size: feed-forward width.
        hidden_act: `gelu`, `gelu_exact` or `relu`.
        hidden_dropout: dropout on both sub-layer outputs.
        attention_dropout: dropout on attention probabilities.
        initializer_range: stddev of the truncated-normal initializers.
        layer_norm_eps: LayerNorm epsilon.
        causal: left-to-right attention instead of bidirectional.

    Examples:
        >>> import numpy as np
        >>> block = TransformerBlock(hidden_size=8, num_heads=2,
        ...                          intermediate_size=32)
        >>> x = np.random.rand(2, 5, 8).astype("float32")
        >>> tuple(block(x, np.ones((2, 5), "int32")).shape)
        (2, 5, 8)
    """

    CONFIG_ARGS = ("hidden_size", "num_heads", "intermediate_size",
                   "hidden_act", "hidden_dropout", "attention_dropout",
                   "initializer_range", "layer_norm_eps", "causal")

    def __init__(self, hidden_size, num_heads, intermediate_size,
                 hidden_act="gelu", hidden_dropout=0.1, attention_dropout=0.1,
                 initializer_range=0.02, layer_norm_eps=1e-12, causal=False,
                 **kwargs):
        super().__init__(**kwargs)
        # === Config ===
        self.keep_config(locals())

        # === Layers ===
        init = truncated_normal(initializer_range)
        policy = self.dtype_policy
        self.attention = MultiHeadSelfAttention(
            hidden_size, num_heads, attention_dropout, initializer_range,
            causal, dtype=policy, name="attention")
        self.attention_output_dropout = Dropout(hidden_dropout, dtype=policy)
        self.attention_norm = LayerNorm(
            epsilon=layer_norm_eps, dtype=norm_policy(policy),
            name="attention_norm")
        # The activation inside the Dense: its ops then sort after the
        # matmul's by name, which is what lets Grappler fuse them with it.
        self.intermediate = keras.layers.Dense(
            intermediate_size, activation=activation(hidden_act),
            kernel_initializer=init, dtype=policy, name="intermediate")
        self.output_dense = keras.layers.Dense(
            hidden_size, kernel_initializer=init, dtype=policy,
            name="output_dense")
        self.output_dropout = Dropout(hidden_dropout, dtype=policy)
        self.output_norm = LayerNorm(
            epsilon=layer_norm_eps, dtype=norm_policy(policy),
            name="output_norm")

    def build(self, x_shape, input_mask_shape=None):
        shape = (None, None, self.hidden_size)
        self.attention.build(shape)
        self.attention_norm.build(shape)
        self.intermediate.build(shape)
        self.output_dense.build((None, None, self.intermediate_size))
        self.output_norm.build(shape)
        self.built = True

    def call(self, x, input_mask=None, training=None, attention_bias=None,
             rows_shape=None):
        """`x`: [batch, seq, H] or token rows [batch * seq, H] (returned in
        the same shape); `attention_bias`, `rows_shape`: as in
        `MultiHeadSelfAttention.call`."""
        # Token rows [batch * seq, H] (see the module docstring). Under
        # 16-bit policies the residual stream stays in the norms' float32;
        # the sub-layers compute in 16 bits (their inputs cast).
        rows = x if len(x.shape) == 2 else ops.reshape(x, (-1, self.hidden_size))
        if attention_bias is None:
            attention_bias = attention_logit_bias(input_mask, self.causal)
        attended = self.attention(rows, training=training,
                                  attention_bias=attention_bias,
                                  rows_shape=rows_shape)
        attended = self.attention_output_dropout(attended, training=training)
        rows = self.attention_norm(rows + ops.cast(attended, rows.dtype))
        hidden = self.intermediate(rows)
        hidden = self.output_dropout(self.output_dense(hidden),
                                     training=training)
        rows = self.output_norm(rows + ops.cast(hidden, rows.dtype))
        return rows if len(x.shape) == 2 else ops.reshape(rows, ops.shape(x))

    def int8_matmuls(self):
        """(owner layer, attribute) of the block's four matmuls that int8
        exports quantize: attention output, query/key/value, feed-forward
        in and out. Attention scores, softmax, layer norms and the
        residual stream stay float32."""
        if self.compute_dtype != "float32":
            raise ValueError(f"{self.name}: int8 is made from a float32 "
                             f"block, not {self.compute_dtype}.")
        # The attention output first: its smoothing folds into the value
        # columns of query/key/value (`MultiHeadSelfAttention.scale_values`).
        return [(self.attention, "output_dense"), (self.attention, "qkv"),
                (self, "intermediate"), (self, "output_dense")]

    def compute_output_shape(self, x_shape, input_mask_shape=None):
        return x_shape
