"""XLA for the served encoder, measured: the real MiniLM-L6 encoder in its
served form (`bert_tf.models.served.ServedEncoder`, weights as variables, as exports
run it) as a plain TF graph and as an XLA-compiled function (`jit_compile=True`),
at batch 1 and batch 32 over the request lengths the exports' buckets
round to, timed in interleaved rounds in one process. XLA compiles once
per (batch, length) shape it meets, so lengths are rounded to buckets; the
compile time per shape is reported too.

A SavedModel whose function is XLA-compiled needs TF Serving's
experimental `--xla_cpu_compilation_enabled=true`; our exports therefore
stay plain graphs unless this shows XLA winning.

    .venv/bin/python benchmarks/serving_xla.py [--calls 200]
"""

import argparse
import os
import platform
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from timing import interleaved_latencies  # noqa: E402

LENGTHS = (16, 32, 64, 128)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(2)
    tf.config.threading.set_inter_op_parallelism_threads(2)

    from bert_tf.models.encoder import BertEncoder
    from bert_tf.models.served import ServedEncoder

    encoder = ServedEncoder(BertEncoder.from_preset("sample:minilm"))
    spec = {name: tf.TensorSpec([None, None], tf.int32) for name in
            ("input_word_ids", "input_mask", "input_type_ids")}

    def pooled(inputs):
        return encoder(inputs, training=False)["pooled_output"]

    functions = {"graph": tf.function(pooled, input_signature=[spec]),
                 "XLA": tf.function(pooled, input_signature=[spec],
                                    jit_compile=True)}
    rng = np.random.default_rng(0)

    def batch(size, length):
        ids = rng.integers(1000, 20000, (size, length)).astype("int32")
        return {"input_word_ids": ids, "input_mask": np.ones_like(ids),
                "input_type_ids": np.zeros_like(ids)}

    print(f"MiniLM-L6 encoder (real weights, served form), 2 threads; "
          f"{platform.processor() or platform.machine()}, TF "
          f"{tf.__version__}; {time.strftime('%Y-%m-%d')}")
    print(f"{'batch x length':<16} {'graph p50 ms':>13} {'XLA p50 ms':>11}"
          f" {'XLA / graph':>12} {'XLA compile s':>14}")
    for size, length in [(1, n) for n in LENGTHS] + [(32, 16), (32, 32)]:
        inputs = batch(size, length)
        start = time.perf_counter()
        functions["XLA"](inputs)
        compile_seconds = time.perf_counter() - start
        ms = interleaved_latencies(
            {name: (lambda f: lambda item: f(item))(function)
             for name, function in functions.items()}, [inputs],
            args.calls, args.rounds)
        graph, xla = (np.percentile(ms[k], 50) for k in ("graph", "XLA"))
        print(f"{f'{size} x {length}':<16} {graph:13.2f} {xla:11.2f} "
              f"{xla / graph:12.2f} {compile_seconds:14.1f}")


if __name__ == "__main__":
    main()
