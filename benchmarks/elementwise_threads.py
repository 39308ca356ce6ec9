"""What one element-wise op costs at the row counts a served encoder sees,
with 1 and 2 intra-op threads: a float `Mul` (layer norms, the int8
smoothing) and the `QuantizeV2` our int8 layers run (MIN_FIRST, as
`bert_tf.layers.int8` calls it). TensorFlow splits an op over the
intra-op threads once its cost model says it pays; on a small 2-core
machine the hand-off can cost more than the op, and that is a floor for
batch 1 (and small batches) that no graph change in Python removes.

Each figure is the time one more op adds to a session run: a chain of
`--ops` ops against a chain of one, Grappler off (so nothing folds), the
best of `--rounds` runs of `--calls` calls. Each thread count runs in a
process of its own (TensorFlow fixes it per process).

    .venv/bin/python benchmarks/elementwise_threads.py [--ops 60]
        [--calls 300] [--rounds 5]
"""

import argparse
import os
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

HIDDEN = 768
SHAPES = ((27, HIDDEN), (27, 2 * HIDDEN), (27, 4 * HIDDEN), (64, HIDDEN),
          (128, HIDDEN), (256, HIDDEN), (870, HIDDEN), (870, 4 * HIDDEN))


def chain(kind, x, ops):
    """`ops` ops of `kind` on `x` (a chain of Muls; independent
    QuantizeV2s, whose codes nothing reads back as floats)."""
    import tensorflow as tf

    if kind == "Mul":
        for _ in range(ops):
            x = x * tf.compat.v1.placeholder_with_default(1.0, [])
        return x[:1, :1]
    return tf.group(*[tf.raw_ops.QuantizeV2(
        input=x, min_range=-1.0 - 0.01 * i, max_range=5.0, T=tf.quint8,
        mode="MIN_FIRST", narrow_range=True)[0] for i in range(ops)])


def seconds_per_run(kind, shape, ops, threads, calls, rounds):
    """Best mean seconds of a session run of `ops` ops of `kind`."""
    import tensorflow as tf

    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, shape)
        fetch = chain(kind, x, ops)
    config = tf.compat.v1.ConfigProto(
        intra_op_parallelism_threads=threads,
        inter_op_parallelism_threads=1)
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    value = np.random.default_rng(0).normal(size=shape).astype(np.float32)
    with tf.compat.v1.Session(graph=graph, config=config) as session:
        for _ in range(calls // 5):
            session.run(fetch, {x: value})
        best = float("inf")
        for _ in range(rounds):
            start = time.perf_counter()
            for _ in range(calls):
                session.run(fetch, {x: value})
            best = min(best, (time.perf_counter() - start) / calls)
    return best


def measure(threads, ops, calls, rounds):
    """Prints `kind rows cols us` lines: microseconds per op."""
    for kind in ("Mul", "QuantizeV2"):
        for shape in SHAPES:
            base = seconds_per_run(kind, shape, 1, threads, calls, rounds)
            more = seconds_per_run(kind, shape, ops, threads, calls, rounds)
            print(kind, *shape, f"{(more - base) / (ops - 1) * 1e6:.2f}",
                  flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=60)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.threads:
        measure(args.threads, args.ops, args.calls, args.rounds)
        return
    results = {}
    for threads in (1, 2):
        out = subprocess.run(
            [sys.executable, sys.argv[0], "--threads", str(threads),
             "--ops", str(args.ops), "--calls", str(args.calls),
             "--rounds", str(args.rounds)],
            check=True, capture_output=True, text=True).stdout
        for line in out.splitlines():
            kind, rows, cols, micros = line.split()
            results[kind, int(rows), int(cols), threads] = float(micros)
    import tensorflow as tf
    print(f"TF {tf.__version__}, {os.cpu_count()} cores; microseconds one "
          f"more op adds to a run (best of {args.rounds} x {args.calls})")
    print(f"{'op':<11} {'shape':>11} {'values':>9} {'1 thread':>9} "
          f"{'2 threads':>10} {'2 / 1':>6}")
    for kind in ("Mul", "QuantizeV2"):
        for rows, cols in SHAPES:
            one, two = (results[kind, rows, cols, t] for t in (1, 2))
            print(f"{kind:<11} {f'[{rows}, {cols}]':>11} {rows * cols:>9,} "
                  f"{one:9.1f} {two:10.1f} {two / max(one, 1e-3):6.2f}")


if __name__ == "__main__":
    main()
