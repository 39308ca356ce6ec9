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
fp32 exports therefore run their encoder in one graph copy per class of
row counts (`bert_tf.models.served.ServedModel`, recorded as `row_classes` in
`bert_tf.json`): each kernel then sees one layout, and those exports are
served with it too. Older fp32 exports, without the copies, are not.

A kernel keeps the first weights it saw, so a process that trains or
assigns weights must never set it. `bert-tf predict` sets it for bf16
exports; the demo, which trains in the same process, does not. TF Serving
reads it from its environment (`docker run -e
TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1 ...` for bf16 exports).
"""

import contextlib
import os
import sys
import tempfile

FROZEN_WEIGHTS = "TF_ONEDNN_ASSUME_FROZEN_WEIGHTS"


def keeps_reordered_weights(info):
    """Whether an export (its `bert_tf.json` dict) may be served with
    `TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1`: bf16, or fp32 with one encoder
    copy per row class.

    Examples:
        >>> keeps_reordered_weights({"precision": "bf16"})
        True
        >>> keeps_reordered_weights({"precision": "fp32"})
        False
        >>> keeps_reordered_weights({"precision": "fp32", "row_classes": [7, 81]})
        True
    """
    from bert_tf.precision import BF16, Precision

    precision = Precision.parse(info.get("precision", "fp32"))
    return precision is BF16 or (precision.row_classes and
                                 bool(info.get("row_classes")))


def serving_only_process(info, environ=None):
    """In a process that only serves an export (its `bert_tf.json` dict,
    or just its precision): sets `TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1` where
    `keeps_reordered_weights` allows, unless the environment says
    otherwise; returns the value in force (None: unset). Call it before
    TensorFlow runs its first matmul: oneDNN reads it once.

    Examples:
        >>> serving_only_process("bf16", {})
        '1'
        >>> serving_only_process("bf16", {FROZEN_WEIGHTS: "0"})
        '0'
        >>> print(serving_only_process("fp32", {}))
        None
    """
    environ = os.environ if environ is None else environ
    if isinstance(info, str):
        info = {"precision": info}
    if keeps_reordered_weights(info):
        environ.setdefault(FROZEN_WEIGHTS, "1")
    return environ.get(FROZEN_WEIGHTS)


__all__ = ["FROZEN_WEIGHTS", "keeps_reordered_weights",
           "serving_only_process"]


@contextlib.contextmanager
def native_logs_quiet():
    """Keeps the C++ log lines of a first call (Grappler's cost estimates,
    the TFLite converter's passes, the XNNPACK delegate's INFO) off the
    user's terminal: the process's stderr goes to a scratch file
    meanwhile, while Python's own messages (warnings) still reach it.
    Errors still reach the user, as Python exceptions."""
    sys.stderr.flush()
    saved = os.dup(2)
    python_stderr = sys.stderr
    if python_stderr is sys.__stderr__:
        sys.stderr = open(os.dup(saved), "w", buffering=1)
    try:
        with tempfile.TemporaryFile() as scratch:
            os.dup2(scratch.fileno(), 2)
            try:
                yield
            finally:
                os.dup2(saved, 2)
    finally:
        if sys.stderr is not python_stderr:
            sys.stderr.close()
            sys.stderr = python_stderr
        os.close(saved)
