"""What a process that only serves tells TensorFlow's oneDNN kernels.

With `TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1`, each oneDNN matmul reorders its
weights once, on its first call, into the blocked layout of its fastest
kernel (brgemm) and keeps them. Without it the weights stay in
TensorFlow's plain layout, where bf16 matmuls run a slower kernel.

It pays for bf16 exports: their blocked layout is the same for every
batch, and the BERT-Base classifier's batch-1 p50 drops from 34 to 25 ms
(2 cores with AVX512_BF16; docs/benchmarks.md). An fp32 matmul's layout
depends on its row count (tokens in the batch): it keeps the layout of its
first call and reorders its weights on every call of the other kind, so
after one batch of 8 sentences single sentences took 71 ms instead of 36.
fp32 exports are therefore served without it.

A kernel keeps the first weights it saw, so a process that trains or
assigns weights must never set it. `bert-tf predict` sets it for bf16
exports; the demo, which trains in the same process, does not. TF Serving
reads it from its environment (`docker run -e
TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1 ...` for bf16 exports).
"""

import os

FROZEN_WEIGHTS = "TF_ONEDNN_ASSUME_FROZEN_WEIGHTS"


def serving_only_process(precision, environ=None):
    """In a process that only serves an export of `precision`: sets
    `TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1` for bf16 unless the environment
    says otherwise; returns the value in force (None: unset). Call it
    before TensorFlow runs its first matmul: oneDNN reads it once.

    Examples:
        >>> serving_only_process("bf16", {})
        '1'
        >>> serving_only_process("bf16", {FROZEN_WEIGHTS: "0"})
        '0'
        >>> print(serving_only_process("fp32", {}))
        None
    """
    environ = os.environ if environ is None else environ
    if precision == "bf16":
        environ.setdefault(FROZEN_WEIGHTS, "1")
    return environ.get(FROZEN_WEIGHTS)


__all__ = ["FROZEN_WEIGHTS", "serving_only_process"]
