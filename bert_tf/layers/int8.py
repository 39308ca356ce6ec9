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

from bert_tf.layers.copies import added_copies
from bert_tf.layers.quantized_ops import (  # noqa: F401 (their old path)
    QUANTIZED_MATMUL, WEIGHT_LIMIT, MIN_RANGE as _MIN_RANGE, available,
    quantizable_range, quantize_kernel, quantize_min_first,
    quantized_matmul)
from bert_tf.layers.transformer import gelu_erf, gelu_tanh


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
        input_shift: float32 [in] subtracted from the input before it is
            smoothed and quantized (the beta of the layer norm before,
            which a served block leaves out of the rows: `shifted`), its
            product with the weights already in `bias`; or None.

    Called with `residual` (float32 rows of the output's shape), it
    returns `residual + layer(x)`, the add inside the kernel (oneDNN's sum
    post-op: `fused_ops` BiasAdd, Add, Dequantize): served blocks add
    their residual so, one node and one pass over the rows fewer.

    Called with `shifted=True`, `x` is the input less `input_shift`
    already; `residual_lacks` (float32 [out]) is a vector the residual
    lacks, added with the bias: a served block's rows lack their norm's
    beta (`bert_tf.layers.folding`), two ops fewer per norm.

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
                 input_shift=None, **kwargs):
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
            quantizable_range(*input_range)
        self.input_shift = None if input_shift is None else \
            np.asarray(input_shift, np.float32)
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
                   output_dtype="float32", weight_limit=WEIGHT_LIMIT,
                   input_shift=None):
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
            input_shift: as in `Int8Dense`: the smoothing is the input's
                own, the quantized range that of the shifted input
                (MiniLM, served in int8 against fp32 on 300 RT sentences:
                the embeddings' cosine at least 0.9952, mean 0.9978;
                0.9950 and 0.9978 unshifted).
        """
        kernel = dense.kernel.numpy().astype(np.float32)
        bias = dense.bias.numpy() if dense.use_bias else None
        if input_shift is not None:  # x W = (x - shift) W + shift W
            input_shift = np.asarray(input_shift, np.float32)
            bias = ((0.0 if bias is None else bias.astype(np.float64)) +
                    input_shift.astype(np.float64) @ kernel).astype(
                        np.float32)
        smoothing = input_range = None
        if input_max is not None:
            largest = np.maximum(np.abs(input_min), np.abs(input_max))
            weight_max = np.abs(kernel).max(axis=1)
            smoothing = (np.maximum(largest, 1e-5) ** alpha / np.maximum(
                weight_max, 1e-5) ** (1 - alpha)).astype(np.float32)
            kernel = kernel * smoothing[:, None]
            if input_shift is not None:
                input_min = input_min - input_shift
                input_max = input_max - input_shift
            input_range = (float((input_min / smoothing).min()),
                           float((input_max / smoothing).max()))
        kernel, scale = quantize_kernel(kernel, weight_limit)
        return cls(kernel, scale, bias, dense.activation,
                   input_scale=smoothing, input_range=input_range,
                   output_dtype=output_dtype, input_shift=input_shift,
                   name=dense.name)

    def call(self, x, residual=None, column_parts=1, output_parts=False,
             part=None, copies=1, shifted=False, residual_lacks=None):
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
        returns that sum as a list of copies kept apart. `shifted`,
        `residual_lacks`: see the class docstring."""
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
        if residual_lacks is not None:  # hashable: it keys the functions
            # Keras hands a NumPy argument over as a (constant) tensor.
            value = tf.get_static_value(residual_lacks)
            residual_lacks = None if value is None else np.asarray(
                value, np.float32)
            if residual is None or residual_lacks is None or \
                    residual_lacks.shape != (self.units,):
                raise ValueError(f"Int8Dense {self.name}: residual_lacks "
                                 f"takes a residual and {self.units} "
                                 "constant values.")
            residual_lacks = tuple(residual_lacks.tolist())
        shifted = bool(shifted and self.input_shift is not None)
        outs = self._function(widths, residual is not None, column_parts,
                              output_parts, copies,
                              (shifted, residual_lacks))(*rows)
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
                  copies=1, folded=(False, None)):
        """The layer's function for these arguments of `call` (`folded`:
        its `shifted` and `residual_lacks`)."""
        key = (widths, plus_residual, column_parts, output_parts, copies,
               folded)
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
                    return self._sliced_input_matmul(parts, residual, copies,
                                                     folded)
                return self._rows_matmul(parts[0], residual, column_parts,
                                         output_parts, folded)

            self._functions[key] = tf.function(
                rows_matmul, autograph=False, input_signature=signature)
        return self._functions[key]

    def _quantized(self, parts, folded=(False, None)):
        """(uint8 codes, their low and high) of each of the input slices
        `parts` (one range for all), and the bias that brings the codes'
        shift back (and the residual's `folded[1]`)."""
        slices = _slices([int(part.shape[-1]) for part in parts])
        shifted, residual_lacks = folded
        if self.input_shift is not None and not shifted:
            parts = [part - tf.constant(self.input_shift[rows])
                     for part, rows in zip(parts, slices)]
        bias = self.bias if residual_lacks is None else \
            self.bias + np.asarray(residual_lacks, np.float32)
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
            return ([(quantize_min_first(part, low, high), q_low, q_high)
                     for part in parts],
                    bias - zero * step * self.column_sums)
        # This call's own range; an empty batch has none.
        nonempty = tf.size(parts[0]) > 0
        low = tf.where(nonempty, tf.minimum(
            _over_parts(tf.reduce_min, parts), 0.0), 0.0)
        width = tf.maximum(tf.where(
            nonempty, _over_parts(tf.reduce_max, parts), 0.0) - low,
            _MIN_RANGE)
        bias = tf.constant(bias) + low * tf.constant(self.column_sums)
        return ([tuple(tf.raw_ops.QuantizeV2(
            input=part - low, min_range=0.0, max_range=width, T=tf.quint8,
            mode="SCALED")[:3]) for part in parts], bias)

    def _rows_matmul(self, rows, residual=None, column_parts=1,
                     output_parts=False, folded=(False, None)):
        """The layer on rows [n, in] (plus `residual` [n, out]): quantize,
        then one fused kernel per column part, concatenated unless
        `output_parts`."""
        [(quantized, q_low, q_high)], bias = self._quantized([rows], folded)
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

    def _sliced_input_matmul(self, parts, residual=None, copies=1,
                             folded=(False, None)):
        """The layer on its input's column slices `parts` [n, in_i]: one
        kernel per slice on its rows of the kernel, the bias (and
        `residual`) added in the first, the products added (`copies`
        times, as a list, if more than once). The slices share one
        quantization range, so the codes are the whole input's and the sum
        is the one kernel's (to float32 rounding)."""
        codes, bias = self._quantized(parts, folded)
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
        return quantized_matmul(
            quantized, q_low, q_high, self.kernel_int8[rows, columns],
            self.kernel_scale[columns], bias, residual,
            _FUSED_ACTIVATIONS.get(self.activation),
            tout or (tf.float32 if residual is not None
                     else self.output_dtype),
            bias_is_constant=self.input_range is not None)

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
            "input_shift": None if self.input_shift is None else
            self.input_shift.tolist(),
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
