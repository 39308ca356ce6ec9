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


def interleaved_latencies(functions, items, calls, rounds=5, warmup=10):
    """{name: ms array} of `function(item)` for each of `functions`
    ({name: function}), `calls` calls each cycling through `items`, timed
    in `rounds` interleaved rounds (every function takes its turn in each
    round), so that a slow spell of the machine falls on every row alike.
    """
    for function in functions.values():
        for item in items[:warmup]:
            function(item)
    times = {name: [] for name in functions}
    per_round = max(1, calls // rounds)
    for round_index in range(rounds):
        for name, function in functions.items():
            for i in range(per_round):
                item = items[(round_index * per_round + i) % len(items)]
                start = time.perf_counter()
                function(item)
                times[name].append((time.perf_counter() - start) * 1e3)
    return {name: np.array(ms) for name, ms in times.items()}


def interleaved_rates(functions, batches, rounds=5):
    """{name: median items per second} of `function(batch)` for each of
    `functions` ({name: function of a list}) over `batches` (lists), in
    `rounds` interleaved rounds, each on its own share of `batches`
    (after one untimed call each)."""
    for function in functions.values():
        function(batches[0])
    rates = {name: [] for name in functions}
    for round_index in range(rounds):
        mine = batches[round_index::rounds] or batches[:1]
        for name, function in functions.items():
            start = time.perf_counter()
            for batch in mine:
                function(batch)
            rates[name].append(sum(map(len, mine)) / (
                time.perf_counter() - start))
    return {name: float(np.median(r)) for name, r in rates.items()}


def executed_nodes(export_dir, feeds):
    """Nodes one request executes as TF Serving runs a SavedModel: a v1
    Session over the `serve` meta graph (Grappler on), the request traced
    with FULL_TRACE, node stats counted over devices. `feeds`: {input of
    `serving_default`: list of strings}."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (registers the tf-text ops)

    with tf.Graph().as_default() as graph, \
            tf.compat.v1.Session(graph=graph) as session:
        meta = tf.compat.v1.saved_model.loader.load(
            session, ["serve"], str(export_dir))
        signature = meta.signature_def["serving_default"]
        feed = {signature.inputs[k].name: v for k, v in feeds.items()}
        fetch = [t.name for t in signature.outputs.values()]
        for _ in range(3):
            session.run(fetch, feed)
        metadata = tf.compat.v1.RunMetadata()
        session.run(fetch, feed, options=tf.compat.v1.RunOptions(
            trace_level=tf.compat.v1.RunOptions.FULL_TRACE),
            run_metadata=metadata)
    return sum(len(d.node_stats) for d in metadata.step_stats.dev_stats)


def run_serving_process(argv, frozen_weights):
    """Runs this script again with `argv` in a new process that only
    serves: with `TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1` when `frozen_weights`,
    without it otherwise (oneDNN reads it once per process;
    `bert_tf.serving.runtime`)."""
    env = {k: v for k, v in os.environ.items() if k != FROZEN_WEIGHTS}
    if frozen_weights:
        env[FROZEN_WEIGHTS] = "1"
    subprocess.run([sys.executable, sys.argv[0], *argv], env=env, check=True)
