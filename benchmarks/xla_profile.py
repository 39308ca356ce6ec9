"""Where an XLA-compiled pre-training step spends its time, per HLO op.

Runs our `BertPretrainer` train step (the one `model_throughput.py` times)
under the TensorFlow profiler with XLA's per-thunk trace events on, and
prints milliseconds per step by HLO kind and by the TensorFlow op each HLO
instruction came from (`?` where XLA kept no op name, e.g. inside fused
or outlined computations). Caveat: a dot that Eigen spreads over the thread
pool is traced only while it is dispatched, so dot times read low; fusions,
reductions and copies read true.

    .venv/bin/python benchmarks/xla_profile.py --shape l4_h256
"""

import argparse
import collections
import glob
import os
import re
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ["XLA_FLAGS"] = " ".join(filter(None, [
    os.environ.get("XLA_FLAGS"), "--xla_cpu_enable_xprof_traceme=true"]))

import tensorflow as tf  # noqa: E402
from tensorflow.tsl.profiler.protobuf import xplane_pb2  # noqa: E402

from model_throughput import SHAPES, batch_arrays, our_steps  # noqa: E402


def op_names(hlo_text):
    """HLO instruction name -> the TensorFlow op_name it was lowered from."""
    names = {}
    for line in hlo_text.splitlines():
        match = re.match(r"\s*(?:ROOT )?%([\w.\-]+) = .*?op_name=\"([^\"]+)\"",
                         line)
        if match:
            names[match.group(1)] = match.group(2)
    return names


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shape", choices=list(SHAPES), default="l4_h256")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    shape = SHAPES[args.shape]
    x = {k: tf.constant(v) for k, v in batch_arrays(shape["batch"]).items()}
    _, train = our_steps(shape)
    work = tempfile.mkdtemp(prefix="xla_profile_")
    train(x).numpy()
    train(x).numpy()
    tf.profiler.experimental.start(work)
    for _ in range(args.steps):
        train(x).numpy()
    tf.profiler.experimental.stop()
    space = xplane_pb2.XSpace()
    space.ParseFromString(open(glob.glob(f"{work}/**/*.xplane.pb",
                                         recursive=True)[-1], "rb").read())
    # The same program compiled again, for its HLO -> TF op mapping.
    names = op_names(train.experimental_get_compiler_ir(x)(
        stage="optimized_hlo"))
    by_kind, by_op = collections.Counter(), collections.Counter()
    step_ms = 0.0
    for plane in space.planes:
        for line in plane.lines:
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                ms = event.duration_ps / 1e9 / args.steps
                if line.name == "python" and name.startswith(
                        "__inference_train"):
                    step_ms += ms
                if "Eigen" not in line.name or name.startswith(
                        ("call", "ThunkExecutor")):
                    continue
                base = name.replace(".clone", "")
                by_kind[re.sub(r"[.\d]+$", "", base)] += ms
                op = re.sub(r"_\d+(/|$)", r"\1", names.get(base, "?"))
                by_op[(re.sub(r"[.\d]+$", "", base),
                       re.sub(r"layer_\d+", "layer_N", op))] += ms
    print(f"{args.shape}: {step_ms:.0f} ms per step (wall, profiler on); "
          f"thread time per step by HLO kind:")
    for kind, ms in by_kind.most_common(args.top):
        print(f"  {ms:8.1f} ms  {kind}")
    print("by HLO kind and TensorFlow op (layers folded together):")
    for (kind, op), ms in by_op.most_common(args.top):
        print(f"  {ms:8.1f} ms  {kind:<28} {op[:100]}")


if __name__ == "__main__":
    main()
