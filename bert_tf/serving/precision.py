"""The precision of an export: fp32, bf16 weights where the CPU computes
bf16 natively, or int8 matmuls where it has VNNI or AMX-INT8.

bf16 halves the bytes every matmul reads and, on CPUs with AVX512_BF16 or
AMX, doubles the arithmetic per cycle. Elsewhere oneDNN emulates it and it
is slower than fp32, so `auto` looks at the CPU and an export records its
precision: loading a bf16 export on a CPU without bf16 warns. int8
quarters the bytes and changes results a little, so `auto` never picks
it; an int8 export on a CPU without VNNI or AMX-INT8 says it is emulated.
"""

from bert_tf.training.precision import (cpu_bf16_flags, cpu_int8_flags,
                                        describe_choice, warn_if_emulated)

PRECISIONS = ("fp32", "bf16", "int8", "auto")
# The Keras dtype policy each precision builds the model in: `bfloat16`
# stores the variables as bf16, so no weight is cast per call (layer norms
# stay float32: `bert_tf.layers.base.norm_policy`). int8 is built in
# float32, then its encoder's matmuls are quantized (`to_int8`).
POLICIES = {"fp32": "float32", "bf16": "bfloat16", "int8": "float32"}


def resolve(precision, log=print, cpuinfo="/proc/cpuinfo"):
    """`fp32` or `bf16` for `precision` (`auto`: bf16 where the CPU has
    AVX512_BF16 or AMX, fp32 otherwise; the choice is logged).

    Examples:
        >>> resolve("fp32")
        'fp32'
        >>> resolve("auto", log=lambda line: None, cpuinfo="/nonexistent")
        'fp32'
    """
    if precision not in PRECISIONS:
        raise ValueError(f"--precision {precision}: use one of "
                         f"{', '.join(PRECISIONS)}.")
    if precision == "int8":
        warn_if_emulated("int8", "this export", cpuinfo=cpuinfo)
    if precision != "auto":
        return precision
    flags = cpu_bf16_flags(cpuinfo)
    chosen = "bf16" if flags else "fp32"
    log("precision auto: " + describe_choice(chosen, flags))
    return chosen


def quantize(model, precision):
    """`model` (a task model, a pre-trainer or an encoder) with its
    encoder's matmuls on int8 weights when `precision` is `int8`."""
    if precision == "int8":
        encoder = getattr(model, "encoder", model)
        encoder.to_int8()
    return model


__all__ = ["POLICIES", "PRECISIONS", "quantize", "resolve",
           "warn_if_emulated", "cpu_int8_flags"]
