"""Dropout's cost in a training step: Keras's layer (TensorFlow's
`stateless_dropout`, one uniform draw per unit, compare and select) beside
ours (`bert_tf.layers.dropout.Dropout`, 16 random bits per unit and a
multiply), forward and gradient, on the shapes a pre-training step drops:
attention probabilities and hidden states of L4/H256 at batch 32 and of
BERT-Base at batch 8, in float32 and bfloat16. Interleaved rounds; the
figure is each one's median ms per call.

    .venv/bin/python benchmarks/dropout.py [--rounds 5]
"""

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from timing import interleaved_latencies  # noqa: E402

from bert_tf.layers.dropout import Dropout  # noqa: E402

SHAPES = {"L4/H256 b32 attention [32, 4, 128, 128]": [32, 4, 128, 128],
          "L4/H256 b32 hidden [32, 128, 256]": [32, 128, 256],
          "BERT-Base b8 attention [8, 12, 128, 128]": [8, 12, 128, 128],
          "BERT-Base b8 hidden [8, 128, 768]": [8, 128, 768]}


def forward_and_gradient(layer):
    @tf.function(autograph=False)
    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            total = tf.reduce_sum(tf.cast(layer(x, training=True),
                                          tf.float32))
        return tape.gradient(total, x)
    return lambda x: step(x).numpy()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args()
    print(f"{'shape':<42} {'dtype':<9} {'keras ms':>9} {'ours ms':>8} "
          f"{'speed-up':>8}")
    for label, shape in SHAPES.items():
        for dtype in ("float32", "bfloat16"):
            x = tf.cast(tf.random.normal(shape), dtype)
            times = interleaved_latencies(
                {"keras": forward_and_gradient(
                    keras.layers.Dropout(0.1, seed=1, dtype=dtype)),
                 "ours": forward_and_gradient(Dropout(0.1, seed=1,
                                                      dtype=dtype))},
                [x], args.calls, rounds=args.rounds, warmup=3)
            stock, ours = (float(np.median(times[k]))
                           for k in ("keras", "ours"))
            print(f"{label:<42} {dtype:<9} {stock:9.2f} {ours:8.2f} "
                  f"{stock / ours:7.2f}x")


if __name__ == "__main__":
    main()
