"""fp32 forward latency of the bare BERT-Base encoder (random weights, seed
0, 2 threads) of the bert_tf on the path: batch 1 x 32 tokens p50 and
batch 32 x 48 tokens sequences/s. Run it for two checkouts, alternating,
to see what a change of the layers costs; hold oneDNN to an older
instruction set to see what a CPU without AVX-512 would see:

    ONEDNN_MAX_CPU_ISA=AVX2 PYTHONPATH=. python benchmarks/encoder_forward.py
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from bert_tf.models.encoder import BertEncoder  # noqa: E402


def inputs(batch, length):
    ids = np.random.default_rng(0).integers(1000, 30000, (batch, length))
    ids = ids.astype("int32")
    return {"input_word_ids": ids, "input_mask": np.ones_like(ids),
            "input_type_ids": np.zeros_like(ids)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=150)
    args = parser.parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(2)
    tf.config.threading.set_inter_op_parallelism_threads(2)
    keras.utils.set_random_seed(0)
    encoder = BertEncoder.from_preset("bert_base")
    forward = tf.function(
        lambda x: encoder(x, training=False)["pooled_output"])
    one, many = inputs(1, 32), inputs(32, 48)
    for _ in range(10):
        forward(one)
    times = []
    for _ in range(args.calls):
        start = time.perf_counter()
        forward(one)
        times.append(time.perf_counter() - start)
    forward(many)
    forward(many)
    start = time.perf_counter()
    for _ in range(5):
        forward(many)
    throughput = 5 * 32 / (time.perf_counter() - start)
    print(f"oneDNN ISA {os.environ.get('ONEDNN_MAX_CPU_ISA', 'default')}: "
          f"batch 1 p50 {1e3 * np.percentile(times, 50):.1f} ms, batch 32 "
          f"{throughput:.1f} sequences/s")


if __name__ == "__main__":
    main()
