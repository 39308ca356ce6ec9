"""The latency loop every benchmark here shares."""

import time

import numpy as np


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
