"""int8 dense layers for served encoders: oneDNN's VNNI / AMX-INT8 matmul
kernels through TensorFlow's internal `_QuantizedMatMul`, the op Grappler
itself rewrites quantized graphs into.

A matmul is two ops: the input quantized to int8 (symmetric, one scale per
tensor: `QuantizeV2`), and one `_QuantizedMatMul` that multiplies it with
the int8 weights (one scale per output channel, given to the kernel as
per-channel ranges), adds the bias, applies GELU where the feed-forward
layer has it, and dequantizes, all inside oneDNN's kernel. Its weights are
constants (`is_weight_const`): the kernel packs them once, on its first
call, and keeps them. (The public `QuantizedMatMulWithBiasAndDequantize`
took one scalar weight range, so each call also multiplied its output by
the per-channel scales, and, in the oneDNN v3 path, packed its weights
again on every call: 0.30 ms a node at one row.)

Calibrated (each input channel's range over some real texts,
`InputRangeRecorder`), outlier channels are first smoothed into the
weights (SmoothQuant: one `Mul` on the input) and the input's range is
fixed; uncalibrated, each call quantizes its input by its own largest
magnitude. So an int8 layer cannot train: it is built from a trained
`keras.layers.Dense` (`Int8Dense.from_dense`) for export only.

`_QuantizedMatMul` is registered by the oneDNN builds of TensorFlow (the
x86 Linux wheels); `available()` says whether the running one has it.
"""

import math

import keras
import numpy as np
import tensorflow as tf
from tensorflow.python.framework import op_def_library, op_def_registry

from bert_tf.layers.copies import added_copies
from bert_tf.layers.transformer import gelu_erf, gelu_tanh

QUANTIZED_MATMUL = "_QuantizedMatMul"

# The weights' scalar range as the op sees it: int8 values at scale 1.
WEIGHT_LIMIT = 127.0
# The narrowest activation range quantized: a constant input stays finite.
_MIN_RANGE = 1e-6


def quantize_kernel(kernel, limit=WEIGHT_LIMIT):
    """(int8 kernel, float32 per-output-channel scale) of a float kernel
    [in, out], symmetric: `kernel ~= int8 * scale`, the codes within
    +-`limit` (63: 7-bit weights, for CPUs without VNNI:
    `bert_tf.serving.quantize.weight_limit`).

    Examples:
        >>> q, scale = quantize_kernel(np.array([[0.5, -2.0], [-1.0, 1.0]]))
        >>> q.tolist(), [round(float(s), 4) for s in scale]
        ([[64, -127], [-127, 64]], [0.0079, 0.0157])
    """
    kernel = np.asarray(kernel, np.float32)
    scale = np.abs(kernel).max(axis=0) / limit
    scale = np.where(scale > 0, scale, 1.0).astype(np.float32)
    quantized = np.clip(np.round(kernel / scale), -limit,
                        limit).astype(np.int8)
    return quantized, scale


def _quantize_min_first(x, low, high):
    """uint8 codes of `x` over [low, high] (QuantizeV2's MIN_FIRST mode):
    `round(x * s) - round(low * s)` with `s = 255 / (high - low)`.

    `narrow_range`, which MIN_FIRST ignores, keeps TensorFlow's own kernel:
    oneDNN's rewrite (`_MklQuantizeV2`) skips such nodes. Its kernel took
    78 us a call on [24, 384] on 2 EPYC cores against 23 us for TF's, and
    rounded one code in five away from that formula."""
    return tf.raw_ops.QuantizeV2(input=x, min_range=low, max_range=high,
                                 T=tf.quint8, mode="MIN_FIRST",
                                 narrow_range=True)[0]


def _quantizable_range(low, high):
    """(low, high, zero) as QuantizeV2's MIN_FIRST mode quantizes: the
    range holds 0 and is at least `_MIN_RANGE` wide; `zero` is the code of
    0.0 (asked of the kernel itself, whose rounding decides it)."""
    low = min(float(low), 0.0)
    high = max(float(high), 0.0, low + _MIN_RANGE)
    zero = _quantize_min_first(tf.zeros((1, 1)), low, high)
    return low, high, int(tf.bitcast(zero, tf.uint8).numpy()[0, 0])


def _slices(widths):
    """Consecutive slices of the given widths."""
    ends = np.cumsum(widths)
    return [slice(int(end - width), int(end))
            for width, end in zip(widths, ends)]


def _over_parts(reduce, parts):
    """`reduce` (`tf.reduce_min` or `max`) over all of the tensors
    `parts`, with no stacking for one."""
    values = [reduce(part) for part in parts]
    return values[0] if len(values) == 1 else reduce(tf.stack(values))


def available():
    """Whether the running TensorFlow has oneDNN's fused int8 matmul."""
    return op_def_registry.get(QUANTIZED_MATMUL) is not None


# The activations oneDNN's kernel applies itself, by the function.
_FUSED_ACTIVATIONS = {gelu_tanh: "GeluApproximate", gelu_erf: "GeluExact",
                      keras.activations.gelu: "GeluExact"}


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
        input_range: (low, high) of the (smoothed) input from calibration:
            a fixed quantization range (values outside are clipped), or
            None to quantize each call's input by its own range.
        output_dtype: `float32`, or `bfloat16` for a layer whose output
            feeds bf16 ops (query/key/value of a bf16 attention): the
            kernel dequantizes to it, no cast after.

    Called with `residual` (float32 rows of the output's shape), it
    returns `residual + layer(x)`, the add inside the kernel (oneDNN's sum
    post-op: `fused_ops` BiasAdd, Add, Dequantize): served blocks add
    their residual so, one node and one pass over the rows fewer.

    Examples:
        >>> dense = keras.layers.Dense(4)
        >>> x = np.random.default_rng(0).normal(size=(3, 8)).astype("float32")
        >>> expected = dense(x).numpy()
        >>> # 7-bit weights: their sums are exact on CPUs without VNNI too
        >>> int8 = Int8Dense.from_dense(dense, weight_limit=63)
        >>> bool(np.abs(int8(x).numpy() - expected).max() < 0.05)
        True
    """

    def __init__(self, kernel, kernel_scale, bias=None, activation=None,
                 input_scale=None, input_range=None, output_dtype="float32",
                 **kwargs):
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
        self.bias = bias
        # Each output's column sum of the dequantized weights: what a
        # shifted input brings back through the bias.
        self.column_sums = kernel.astype(np.float32).sum(axis=0) * \
            self.kernel_scale
        self.activation = keras.activations.get(activation)
        self.input_scale = None if input_scale is None else \
            np.asarray(input_scale, np.float32)
        self.input_range = None if input_range is None else \
            _quantizable_range(*input_range)
        self.output_dtype = tf.as_dtype(output_dtype)
        if self.output_dtype not in (tf.float32, tf.bfloat16):
            raise ValueError(f"Int8Dense {self.name}: output_dtype must be "
                             f"float32 or bfloat16, not {output_dtype}.")
        # One function for every signature that runs the layer (per
        # residual or not, and column parts): a SavedModel then stores its
        # int8 constants once.
        self._functions = {}

    @classmethod
    def from_dense(cls, dense, input_min=None, input_max=None, alpha=0.75,
                   output_dtype="float32", weight_limit=WEIGHT_LIMIT):
        """The int8 copy of a built `keras.layers.Dense` (same name).

        Args:
            dense: the float layer.
            input_min, input_max: per input channel, the smallest and
                largest input seen in calibration, or None. Given, the
                channels are smoothed (SmoothQuant): input channel k is
                divided by `s_k = m_k ** alpha / max|W_k| ** (1 - alpha)`
                (m_k its largest |input|) and kernel row k multiplied by
                it, so that outlier channels no longer set the whole
                activation's int8 step; the smoothed range is then fixed.
            alpha: how much of the activations' range moves into the
                weights (0.75: MiniLM sentence embeddings of 300 RT
                sentences kept a cosine of at least 0.987 to fp32's, mean
                0.996; 0.5 gave 0.921, unsmoothed 0.961).
            output_dtype: as in `Int8Dense`.
            weight_limit: the largest weight code (`quantize_kernel`).
        """
        bias = dense.bias.numpy() if dense.use_bias else None
        kernel = dense.kernel.numpy().astype(np.float32)
        smoothing = input_range = None
        if input_max is not None:
            largest = np.maximum(np.abs(input_min), np.abs(input_max))
            weight_max = np.abs(kernel).max(axis=1)
            smoothing = (np.maximum(largest, 1e-5) ** alpha / np.maximum(
                weight_max, 1e-5) ** (1 - alpha)).astype(np.float32)
            kernel = kernel * smoothing[:, None]
            input_range = (float((input_min / smoothing).min()),
                           float((input_max / smoothing).max()))
        kernel, scale = quantize_kernel(kernel, weight_limit)
        return cls(kernel, scale, bias, dense.activation,
                   input_scale=smoothing, input_range=input_range,
                   output_dtype=output_dtype, name=dense.name)

    def call(self, x, residual=None, column_parts=1, output_parts=False,
             part=None, copies=1):
        """`column_parts`: the kernels the matmul runs as, one per slice
        of the output columns (served encoders:
        `bert_tf.models.split_matmuls`), or a list of each part's columns
        (index arrays of equal length, such as the attention's
        `head_group_columns`); the outputs are the same, or those columns.
        `output_parts`: the column parts' outputs as a list, not
        concatenated. `part`: only that column part's output, from `x`
        alone (each part may then read its own copy of the rows:
        `bert_tf.layers.copies`). `x` may be such a list (its
        input's column slices, in order): each slice multiplies its rows
        of the kernel and the products are added, with no concatenation
        before (a layer with an activation refuses it); `copies` > 1
        returns that sum as a list of copies kept apart."""
        if isinstance(column_parts, int):
            if self.units % column_parts:
                raise ValueError(f"Int8Dense {self.name}: {self.units} "
                                 f"outputs do not split in {column_parts} "
                                 "parts.")
        else:  # hashable: it keys the layer's functions
            column_parts = tuple(tuple(int(c) for c in part)
                                 for part in column_parts)
        inputs = list(x) if isinstance(x, (list, tuple)) else [x]
        widths = tuple(int(part.shape[-1]) for part in inputs)
        if sum(widths) != self.kernel_int8.shape[0]:
            raise ValueError(f"Int8Dense {self.name}: inputs {widths} wide "
                             f"do not add up to its "
                             f"{self.kernel_int8.shape[0]} inputs.")
        if len(inputs) > 1 and (column_parts != 1 or output_parts or
                                self.activation is not
                                keras.activations.linear):
            raise ValueError(f"Int8Dense {self.name}: input slices are "
                             "taken only whole in its columns and without "
                             "an activation.")
        shape = tf.shape(inputs[0])
        rows = [tf.reshape(tf.cast(part, tf.float32), (-1, width))
                for part, width in zip(inputs, widths)]
        if residual is not None:
            rows.append(tf.reshape(tf.cast(residual, tf.float32),
                                   (-1, self.units)))
        if part is not None:
            column_parts, output_parts = self._part(column_parts, part), True
        outs = self._function(widths, residual is not None, column_parts,
                              output_parts, copies)(*rows)
        listed = output_parts or copies > 1
        outs = [tf.reshape(out, tf.concat([shape[:-1], [out.shape[-1]]], 0))
                for out in (outs if listed else [outs])]
        return outs[0] if part is not None or not listed else outs

    def _part(self, column_parts, part):
        """The columns of column part `part` of `column_parts`, as the
        one-part `column_parts` of its own function."""
        if isinstance(column_parts, int):
            width = self.units // column_parts
            column_parts = [range(width * part, width * (part + 1))]
        else:
            column_parts = [column_parts[part]]
        return tuple(tuple(int(c) for c in columns)
                     for columns in column_parts)

    def _function(self, widths, plus_residual, column_parts, output_parts,
                  copies=1):
        key = (widths, plus_residual, column_parts, output_parts, copies)
        if key not in self._functions:
            signature = [tf.TensorSpec((None, width), tf.float32)
                         for width in widths]
            if plus_residual:
                signature.append(tf.TensorSpec((None, self.units),
                                               tf.float32))

            def rows_matmul(*rows):
                parts = list(rows[:len(widths)])
                residual = rows[len(widths)] if plus_residual else None
                if len(parts) > 1:
                    return self._sliced_input_matmul(parts, residual, copies)
                return self._rows_matmul(parts[0], residual, column_parts,
                                         output_parts)

            self._functions[key] = tf.function(
                rows_matmul, autograph=False, input_signature=signature)
        return self._functions[key]

    def _quantized(self, parts):
        """(uint8 codes, their low and high) of each of the input slices
        `parts` (one range for all), and the bias that brings the codes'
        shift back."""
        slices = _slices([int(part.shape[-1]) for part in parts])
        if self.input_scale is not None:
            parts = [part * tf.constant(1.0 / self.input_scale[rows])
                     for part, rows in zip(parts, slices)]
        # uint8 codes of the input shifted by its low end (oneDNN's u8 x s8
        # kernel, and a one-sided input such as GELU's keeps all 256
        # codes); the shift comes back through the bias: x W = (x - lo) W
        # + lo * column_sums(W).
        if self.input_range is not None:
            # MIN_FIRST codes are round(x / step) + zero: the shifted input's
            # codes at no extra op; `zero * step` (the kernel's own rounding
            # of -lo) is the shift.
            low, high, zero = self.input_range
            step = (high - low) / 255.0
            q_low, q_high = tf.constant(0.0), tf.constant(high - low)
            return ([(_quantize_min_first(part, low, high), q_low, q_high)
                     for part in parts],
                    self.bias - zero * step * self.column_sums)
        # This call's own range; an empty batch has none.
        nonempty = tf.size(parts[0]) > 0
        low = tf.where(nonempty, tf.minimum(
            _over_parts(tf.reduce_min, parts), 0.0), 0.0)
        width = tf.maximum(tf.where(
            nonempty, _over_parts(tf.reduce_max, parts), 0.0) - low,
            _MIN_RANGE)
        bias = tf.constant(self.bias) + low * tf.constant(self.column_sums)
        return ([tuple(tf.raw_ops.QuantizeV2(
            input=part - low, min_range=0.0, max_range=width, T=tf.quint8,
            mode="SCALED")[:3]) for part in parts], bias)

    def _rows_matmul(self, rows, residual=None, column_parts=1,
                     output_parts=False):
        """The layer on rows [n, in] (plus `residual` [n, out]): quantize,
        then one fused kernel per column part, concatenated unless
        `output_parts`."""
        [(quantized, q_low, q_high)], bias = self._quantized([rows])
        if residual is not None and self.activation is not \
                keras.activations.linear:
            raise ValueError(f"Int8Dense {self.name}: a residual is added "
                             "in the kernel only without an activation.")
        biases, residuals = [bias], [residual]
        if isinstance(column_parts, int):
            parts = _slices([self.units // column_parts] * column_parts)
            if column_parts > 1:
                biases = [bias[part] for part in parts] if isinstance(
                    bias, np.ndarray) else tf.split(bias, column_parts)
                residuals = [None] * column_parts if residual is None else \
                    tf.split(residual, column_parts, axis=-1)
        else:  # each part's columns
            parts = [np.array(part) for part in column_parts]
            biases = [bias[part] if isinstance(bias, np.ndarray) else
                      tf.gather(bias, part) for part in parts]
            residuals = [None if residual is None else
                         tf.gather(residual, part, axis=-1) for part in parts]
        outs = [self._kernel(quantized, q_low, q_high, *args)
                for args in zip(biases, residuals, parts)]
        if _FUSED_ACTIVATIONS.get(self.activation) is None:
            outs = [self.activation(out) for out in outs]
        if output_parts:
            return outs
        return outs[0] if len(outs) == 1 else tf.concat(outs, -1)

    def _sliced_input_matmul(self, parts, residual=None, copies=1):
        """The layer on its input's column slices `parts` [n, in_i]: one
        kernel per slice on its rows of the kernel, the bias (and
        `residual`) added in the first, the products added (`copies`
        times, as a list, if more than once). The slices share one
        quantization range, so the codes are the whole input's and the sum
        is the one kernel's (to float32 rounding)."""
        codes, bias = self._quantized(parts)
        zeros = np.zeros(self.units, np.float32)
        outs = [self._kernel(quantized, q_low, q_high,
                             bias if index == 0 else zeros,
                             residual if index == 0 else None,
                             slice(None), rows, tf.float32)
                for index, ((quantized, q_low, q_high), rows) in enumerate(
                    zip(codes, _slices([int(p.shape[-1]) for p in parts])))]
        sums = [out if residual is not None else tf.cast(
            out, self.output_dtype) for out in added_copies(
                outs[0], outs[1:], copies)]
        return sums if copies > 1 else sums[0]

    def _kernel(self, quantized, q_low, q_high, bias, residual, columns,
                rows=slice(None), tout=None):
        """One `_QuantizedMatMul` on the kernel's `rows` and `columns`
        (slices); `tout`: its output dtype (None: float32 with a
        residual, else the layer's)."""
        fused = _FUSED_ACTIVATIONS.get(self.activation)
        weight_range = self.kernel_scale[columns] * WEIGHT_LIMIT
        tout = tout or (tf.float32 if residual is not None
                        else self.output_dtype)
        op = op_def_library._apply_op_helper(
            QUANTIZED_MATMUL, name="QuantizedMatMul",
            device_inputs=[quantized, tf.constant(
                self.kernel_int8[rows, columns], tf.qint8),
                tf.convert_to_tensor(bias)] +
            ([] if residual is None else [residual]),
            host_inputs=[q_low, q_high, tf.constant(-weight_range),
                         tf.constant(weight_range)],
            Tdevice_outputs=[tout], Thost_outputs=[], T1=tf.quint8,
            T2=tf.qint8, Tbias=tf.float32, U=tf.float32, Tout=tout,
            transpose_a=False, transpose_b=False, is_weight_const=True,
            is_bias_const=self.input_range is not None,
            fused_ops=["BiasAdd"] + ([fused] if fused else []) +
            ([] if residual is None else ["Add"]) + ["Dequantize"],
            input_quant_mode="SCALED", output_quant_mode="SCALED",
            leakyrelu_alpha=0.2)[2]
        return op.outputs[0]

    def compute_output_shape(self, input_shape):
        return (*input_shape[:-1], self.units)

    def get_config(self):
        config = super().get_config()
        config.update({
            "kernel": self.kernel_int8.tolist(),
            "kernel_scale": self.kernel_scale.tolist(),
            "bias": self.bias.tolist(),
            "activation": keras.activations.serialize(self.activation),
            "input_scale": None if self.input_scale is None else
            self.input_scale.tolist(),
            "input_range": None if self.input_range is None else
            list(self.input_range[:2]),
            "output_dtype": self.output_dtype.name})
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["kernel"] = np.asarray(config["kernel"], np.int8)
        config["activation"] = keras.activations.deserialize(
            config["activation"])
        return cls(**config)


class InputRangeRecorder(keras.layers.Layer):
    """Runs `dense` and keeps the smallest and largest input per channel it
    has seen (the calibration pass before `Int8Dense.from_dense`; eagerly
    or inside a `tf.function`, as the task model calls its encoder)."""

    def __init__(self, dense, **kwargs):
        super().__init__(name=dense.name, **kwargs)
        self.dense = dense
        width = dense.kernel.shape[0]
        self.low = self.add_weight(shape=(width,), initializer="zeros",
                                   trainable=False, name="input_min")
        self.high = self.add_weight(shape=(width,), initializer="zeros",
                                    trainable=False, name="input_max")
        self.rows = self.add_weight(shape=(), initializer="zeros",
                                    trainable=False, name="rows")

    @property
    def seen(self):
        """(input_min, input_max) float32 [in], or None before any row."""
        if self.rows.numpy() == 0:
            return None
        return self.low.numpy(), self.high.numpy()

    def call(self, x):
        rows = tf.reshape(tf.cast(x, tf.float32), (-1, x.shape[-1]))
        self.low.assign(tf.reduce_min(tf.concat([rows, self.low[None]], 0),
                                      axis=0))
        self.high.assign(tf.reduce_max(tf.concat([rows, self.high[None]],
                                                 0), axis=0))
        self.rows.assign_add(tf.cast(tf.shape(rows)[0], self.rows.dtype))
        return self.dense(x)


def served_parameter_count(model):
    """`model`'s parameters as served: its Keras weights plus the int8
    kernels and biases of its `Int8Dense` layers, which are constants,
    not weights (so `count_params` alone misses most of an int8 model)."""
    # Counted from the weights: a subclassed model that only its served
    # form ran (`bert_tf.models.served`) is never marked built.
    weights = sum(math.prod(v.shape) for v in model.weights)
    return weights + sum(
        layer.kernel_int8.size + layer.bias.size
        for layer in model._flatten_layers() if isinstance(layer, Int8Dense))
