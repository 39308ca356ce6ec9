"""The latency loop every benchmark here shares, and the serving process
the serving benchmarks time in."""

import os
import subprocess
import sys
import time

import numpy as np

from bert_tf.serving.runtime import FROZEN_WEIGHTS


def batch1_latencies(call, items, calls, warmup=10):
    """(p50, p99) in ms of `call(item)` over `calls` calls cycling through
    `items`, after `warmup` untimed calls."""
    for item in items[:warmup]:
        call(item)
    times = []
    for i in range(calls):
        item = items[i % len(items)]
        start = time.perf_counter()
        call(item)
        times.append((time.perf_counter() - start) * 1e3)
    return np.percentile(times, 50), np.percentile(times, 99)


def run_serving_process(argv, frozen_weights):
    """Runs this script again with `argv` in a new process that only
    serves: with `TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1` when `frozen_weights`,
    without it otherwise (oneDNN reads it once per process;
    `bert_tf.serving.runtime`)."""
    env = {k: v for k, v in os.environ.items() if k != FROZEN_WEIGHTS}
    if frozen_weights:
        env[FROZEN_WEIGHTS] = "1"
    subprocess.run([sys.executable, sys.argv[0], *argv], env=env, check=True)
