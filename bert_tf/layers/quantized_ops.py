"""The TensorFlow ops an int8 layer runs (`bert_tf.layers.int8`): its
weights' codes, the input's `QuantizeV2` and oneDNN's fused int8 matmul,
`_QuantizedMatMul`, which TensorFlow's x86 Linux wheels register.
"""

import numpy as np
import tensorflow as tf
from tensorflow.python.framework import op_def_library, op_def_registry

QUANTIZED_MATMUL = "_QuantizedMatMul"

# The weights' scalar range as the op sees it: int8 values at scale 1.
WEIGHT_LIMIT = 127.0
# The narrowest activation range quantized: a constant input stays finite.
MIN_RANGE = 1e-6


def available():
    """Whether the running TensorFlow has oneDNN's fused int8 matmul."""
    return op_def_registry.get(QUANTIZED_MATMUL) is not None


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


def quantize_min_first(x, low, high):
    """uint8 codes of `x` over [low, high] (QuantizeV2's MIN_FIRST mode):
    `round(x * s) - round(low * s)` with `s = 255 / (high - low)`.

    `narrow_range`, which MIN_FIRST ignores, keeps TensorFlow's own kernel:
    oneDNN's rewrite (`_MklQuantizeV2`) skips such nodes. Its kernel took
    78 us a call on [24, 384] on 2 EPYC cores against 23 us for TF's, and
    rounded one code in five away from that formula."""
    return tf.raw_ops.QuantizeV2(input=x, min_range=low, max_range=high,
                                 T=tf.quint8, mode="MIN_FIRST",
                                 narrow_range=True)[0]


def quantizable_range(low, high):
    """(low, high, zero) as QuantizeV2's MIN_FIRST mode quantizes: the
    range holds 0 and is at least `MIN_RANGE` wide; `zero` is the code of
    0.0 (asked of the kernel itself, whose rounding decides it)."""
    low = min(float(low), 0.0)
    high = max(float(high), 0.0, low + MIN_RANGE)
    zero = quantize_min_first(tf.zeros((1, 1)), low, high)
    return low, high, int(tf.bitcast(zero, tf.uint8).numpy()[0, 0])


def quantized_matmul(codes, low, high, weights, weight_scale, bias,
                     residual=None, activation=None, tout=tf.float32,
                     bias_is_constant=False):
    """One `_QuantizedMatMul`: uint8 `codes` of an input over [`low`,
    `high`] times int8 `weights` (NumPy, [in, out]; `weight_scale` [out]
    their per-channel scale), plus `bias` (float32 [out]) and `residual`
    (float32 [n, out], or None), with `activation` ("GeluExact",
    "GeluApproximate" or None) applied inside oneDNN's kernel, dequantized
    to `tout`. The weights are constants (`is_weight_const`): the kernel
    packs them once, on its first call, and keeps them."""
    weight_range = weight_scale * WEIGHT_LIMIT
    op = op_def_library._apply_op_helper(
        QUANTIZED_MATMUL, name="QuantizedMatMul",
        device_inputs=[codes, tf.constant(weights, tf.qint8),
                       tf.convert_to_tensor(bias)] +
        ([] if residual is None else [residual]),
        host_inputs=[low, high, tf.constant(-weight_range),
                     tf.constant(weight_range)],
        Tdevice_outputs=[tout], Thost_outputs=[], T1=tf.quint8,
        T2=tf.qint8, Tbias=tf.float32, U=tf.float32, Tout=tout,
        transpose_a=False, transpose_b=False, is_weight_const=True,
        is_bias_const=bias_is_constant,
        fused_ops=["BiasAdd"] + ([activation] if activation else []) +
        ([] if residual is None else ["Add"]) + ["Dequantize"],
        input_quant_mode="SCALED", output_quant_mode="SCALED",
        leakyrelu_alpha=0.2)[2]
    return op.outputs[0]
