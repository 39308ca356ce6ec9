"""int8 dense layers for served encoders: oneDNN's VNNI / AMX-INT8 matmul
kernels through TensorFlow's stock `QuantizedMatMulWithBiasAndDequantize`.

Weights are int8 per output channel; activations are quantized per tensor
on every call, from the tensor's own range. Calibration (the largest input
per channel over some real texts, `InputMaxRecorder`) lets outlier
channels be smoothed into the weights first (SmoothQuant).
The op takes one scalar weight range, so the kernel runs on the int8
weights as they are (scale 1) and the per-channel scales multiply its
float output. Its quint8 input must be non-negative (the SCALED mode;
the op's MIN_FIRST bias compensation is wrong in oneDNN v3 builds): the
activation is shifted by its minimum and the shift comes back through the
bias, `lo * column_sums(W)`.

The weights are constants of the serving function, not variables: fed as
a variable the kernel reorders an int8 weight on every call (a 768x3072
matmul at 27 rows took 1.34 ms, as constants 0.70 ms, fp32 1.45 ms; 2
AVX512_VNNI cores). So an int8 layer cannot train; it is built from a
trained `keras.layers.Dense` (`Int8Dense.from_dense`) for export only.
"""

import keras
import numpy as np
import tensorflow as tf

# The weights' scalar range as the op sees it: int8 values at scale 1.
_WEIGHT_LIMIT = 127.0
# The narrowest activation range quantized: a constant input stays finite.
_MIN_RANGE = 1e-6


def quantize_kernel(kernel):
    """(int8 kernel, float32 per-output-channel scale) of a float kernel
    [in, out], symmetric: `kernel ~= int8 * scale`.

    Examples:
        >>> q, scale = quantize_kernel(np.array([[0.5, -2.0], [-1.0, 1.0]]))
        >>> q.tolist(), [round(float(s), 4) for s in scale]
        ([[64, -127], [-127, 64]], [0.0079, 0.0157])
    """
    kernel = np.asarray(kernel, np.float32)
    scale = np.abs(kernel).max(axis=0) / _WEIGHT_LIMIT
    scale = np.where(scale > 0, scale, 1.0).astype(np.float32)
    quantized = np.clip(np.round(kernel / scale), -_WEIGHT_LIMIT,
                        _WEIGHT_LIMIT).astype(np.int8)
    return quantized, scale


@keras.saving.register_keras_serializable(package="bert_tf")
class Int8Dense(keras.layers.Layer):
    """A served Dense layer with int8 weights, run by oneDNN's int8 kernels.

    Args:
        kernel: int8 array [in, out].
        kernel_scale: float32 [out], the per-channel dequantization scale.
        bias: float32 [out] or None.
        activation: a Keras activation (name or callable) or None.
        input_scale: float32 [in] the input is divided by per channel
            (smoothing; already multiplied into `kernel`), or None.

    Examples:
        >>> dense = keras.layers.Dense(4)
        >>> x = np.random.default_rng(0).normal(size=(3, 8)).astype("float32")
        >>> expected = dense(x).numpy()
        >>> int8 = Int8Dense.from_dense(dense)
        >>> bool(np.abs(int8(x).numpy() - expected).max() < 0.05)
        True
    """

    def __init__(self, kernel, kernel_scale, bias=None, activation=None,
                 input_scale=None, **kwargs):
        super().__init__(**kwargs)
        kernel = np.asarray(kernel)
        if kernel.dtype != np.int8 or kernel.ndim != 2:
            raise ValueError(f"Int8Dense {self.name}: kernel must be an int8 "
                             f"matrix, got {kernel.dtype} {kernel.shape}.")
        self.kernel_int8 = kernel
        self.kernel_scale = np.asarray(kernel_scale, np.float32)
        self.units = kernel.shape[1]
        bias = np.zeros(self.units, np.float32) if bias is None else \
            np.asarray(bias, np.float32)
        # What the op adds before the per-channel scale, and the column
        # sums that bring back the input's shift.
        self.bias_over_scale = bias / self.kernel_scale
        self.column_sums = kernel.astype(np.float32).sum(axis=0)
        self.activation = keras.activations.get(activation)
        self.input_scale = None if input_scale is None else \
            np.asarray(input_scale, np.float32)

    @classmethod
    def from_dense(cls, dense, input_max=None, alpha=0.75):
        """The int8 copy of a built `keras.layers.Dense` (same name).

        Args:
            dense: the float layer.
            input_max: per input channel, the largest |input| seen in
                calibration, or None. Given, the channels are smoothed
                (SmoothQuant): input channel k is divided by
                `s_k = input_max_k ** alpha / max|W_k| ** (1 - alpha)` and
                kernel row k multiplied by it, so that outlier channels
                no longer set the whole activation's int8 step.
            alpha: how much of the activations' range moves into the
                weights (0.75: MiniLM sentence embeddings of 300 RT
                sentences kept a cosine of at least 0.987 to fp32's, mean
                0.996; 0.5 gave 0.921, unsmoothed 0.961).
        """
        bias = dense.bias.numpy() if dense.use_bias else None
        kernel = dense.kernel.numpy().astype(np.float32)
        smoothing = None
        if input_max is not None:
            weight_max = np.abs(kernel).max(axis=1)
            smoothing = (np.maximum(input_max, 1e-5) ** alpha / np.maximum(
                weight_max, 1e-5) ** (1 - alpha)).astype(np.float32)
            kernel = kernel * smoothing[:, None]
        kernel, scale = quantize_kernel(kernel)
        return cls(kernel, scale, bias, dense.activation,
                   input_scale=smoothing, name=dense.name)

    @staticmethod
    def _input_range(x):
        # An empty batch has no range: 0 keeps the graph finite.
        nonempty = tf.size(x) > 0
        low = tf.where(nonempty, tf.reduce_min(x), 0.0)
        high = tf.where(nonempty, tf.reduce_max(x) - low, 0.0)
        return low, tf.maximum(high, _MIN_RANGE)

    def call(self, x):
        shape = tf.shape(x)
        rows = tf.reshape(tf.cast(x, tf.float32), (-1, shape[-1]))
        if self.input_scale is not None:
            rows = rows * tf.constant(1.0 / self.input_scale)
        low, width = self._input_range(rows)
        quantized, q_low, q_high = tf.raw_ops.QuantizeV2(
            input=rows - low, min_range=0.0, max_range=width, T=tf.quint8,
            mode="SCALED")
        bias = tf.constant(self.bias_over_scale) + low * tf.constant(
            self.column_sums)
        out = tf.raw_ops.QuantizedMatMulWithBiasAndDequantize(
            a=quantized, b=tf.constant(self.kernel_int8, tf.qint8),
            bias=bias, min_a=q_low, max_a=q_high,
            min_b=-_WEIGHT_LIMIT, max_b=_WEIGHT_LIMIT,
            min_freezed_output=0.0, max_freezed_output=0.0,
            Toutput=tf.float32, input_quant_mode="SCALED")
        out = out * tf.constant(self.kernel_scale)
        if self.activation is not None:
            out = self.activation(out)
        return tf.reshape(out, tf.concat([shape[:-1], [self.units]], 0))

    def compute_output_shape(self, input_shape):
        return (*input_shape[:-1], self.units)

    def get_config(self):
        config = super().get_config()
        config.update({
            "kernel": self.kernel_int8.tolist(),
            "kernel_scale": self.kernel_scale.tolist(),
            "bias": (self.bias_over_scale * self.kernel_scale).tolist(),
            "activation": keras.activations.serialize(self.activation),
            "input_scale": None if self.input_scale is None else
            self.input_scale.tolist()})
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["kernel"] = np.asarray(config["kernel"], np.int8)
        config["activation"] = keras.activations.deserialize(
            config["activation"])
        return cls(**config)


class InputMaxRecorder(keras.layers.Layer):
    """Runs `dense` and keeps the largest |input| per channel it has seen
    (the calibration pass before `Int8Dense.from_dense`; eagerly or inside
    a `tf.function`, as the task model calls its encoder)."""

    def __init__(self, dense, **kwargs):
        super().__init__(name=dense.name, **kwargs)
        self.dense = dense
        self.seen = self.add_weight(
            shape=(dense.kernel.shape[0],), initializer="zeros",
            trainable=False, name="input_max")
        self.rows = self.add_weight(shape=(), initializer="zeros",
                                    trainable=False, name="rows")

    @property
    def input_max(self):
        """float32 [in], or None before any input row."""
        return self.seen.numpy() if self.rows.numpy() > 0 else None

    def call(self, x):
        rows = tf.reshape(tf.abs(tf.cast(x, tf.float32)), (-1, x.shape[-1]))
        seen = tf.reduce_max(tf.concat([rows, self.seen[None]], 0), axis=0)
        self.seen.assign(seen)
        self.rows.assign_add(tf.cast(tf.shape(rows)[0], self.rows.dtype))
        return self.dense(x)
