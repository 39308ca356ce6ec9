"""The precision of an export: fp32, or bf16 weights where the CPU computes
bf16 natively.

bf16 halves the bytes every matmul reads and, on CPUs with AVX512_BF16 or
AMX, doubles the arithmetic per cycle. Elsewhere oneDNN emulates it and it
is slower than fp32, so `auto` looks at the CPU and an export records its
precision: loading a bf16 export on a CPU without bf16 warns.
"""

from bert_tf.training.precision import (cpu_bf16_flags, describe_choice,
                                        warn_if_emulated)

PRECISIONS = ("fp32", "bf16", "auto")
# The Keras dtype policy each precision builds the model in: `bfloat16`
# stores the variables as bf16, so no weight is cast per call (layer norms
# stay float32: `bert_tf.layers.base.norm_policy`).
POLICIES = {"fp32": "float32", "bf16": "bfloat16"}


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
    if precision != "auto":
        return precision
    flags = cpu_bf16_flags(cpuinfo)
    chosen = "bf16" if flags else "fp32"
    log("precision auto: " + describe_choice(chosen, flags))
    return chosen


__all__ = ["POLICIES", "PRECISIONS", "resolve", "warn_if_emulated"]
