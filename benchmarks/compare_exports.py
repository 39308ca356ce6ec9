"""Before and after: the same classifier exported by two checkouts of
bert_tf, timed in one process, interleaved, as TF Serving loads it.

Each checkout (a directory holding `bert_tf/` and `benchmarks/`, such as
a `git worktree` of an older commit) exports the random-init classifier
of `serving_profile.py` in each precision, in a process of its own that
imports that checkout's code. This process then loads every export as TF
Serving does (a TF1 session, Grappler on, `TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1`)
and times batch 1 (p50 ms) and batch 32 (sentences/s) on real RT
sentences in rounds, each export taking its turn in every round, with the
nodes one request executes. This host moved identical exports by up to
16% in five rounds: ten rounds or more, and compare within one run.

The exports are timed twice, each time in a fresh process: loaded and
called in the checkouts' order, then in the reverse order, and the table
gives both and their mean. In one order alone, the exports loaded and
called later ran faster at batch 32 (MiniLM bf16: the same tree 616
sentences/s first, 778 second), which reads as a change that is not
there.

    git worktree add ../before <commit>
    .venv/bin/python benchmarks/compare_exports.py ../before . \\
        [--precisions fp32 bf16 int8] [--preset bert_base] [--rounds 10] \\
        [--intra-op-threads 1]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ["TF_ONEDNN_ASSUME_FROZEN_WEIGHTS"] = "1"  # as served

import numpy as np  # noqa: E402

from timing import (executed_nodes, interleaved_latencies,  # noqa: E402
                    interleaved_rates)

BUILD = ("from serving_profile import build_export; "
         "build_export({out!r}, {preset!r}, {precision!r})")


def build(checkout, out, preset, precision):
    """Exports with `checkout`'s code: its directory first on the path
    (a `-c` script puts the working directory first, so run there)."""
    checkout = Path(checkout).resolve()
    env = {**os.environ, "PYTHONPATH": f"{checkout}:{checkout}/benchmarks"}
    env.pop("TF_ONEDNN_ASSUME_FROZEN_WEIGHTS")
    subprocess.run([sys.executable, "-c", BUILD.format(
        out=str(out), preset=preset, precision=precision)],
        cwd=checkout, env=env, check=True)
    return out


def _request(session, text_input, outputs):
    """A function of a batch of texts: one request to the loaded export."""
    return lambda batch: session.run(outputs, {text_input: batch})


def _single(request):
    """`request` as a function of one text."""
    return lambda text: request(np.array([text], dtype=object))


def time_exports(named, rounds, intra_op_threads):
    """{name: (b1 p50 ms, b32 sentences/s, nodes)} of the exports in
    `named` ([(name, path)]), loaded in that order into this process with
    `intra_op_threads` threads within an op, and timed in interleaved
    rounds."""
    from bert_tf.samples.readers import read_rt_snippets
    from serving_profile import load_session

    texts, _ = read_rt_snippets()
    batches = [np.array(texts[i * 32:(i + 1) * 32], dtype=object)
               for i in range(3 * rounds)]
    sessions = {name: (load_session(path, intra_op_threads),
                       executed_nodes(path, {"text": [texts[0]]}))
                for name, path in named}
    calls = {name: _request(*session)
             for name, (session, _) in sessions.items()}
    latencies = interleaved_latencies(
        {name: _single(call) for name, call in calls.items()},
        texts, 20 * rounds, rounds)
    rates = interleaved_rates(calls, batches, rounds)
    return {name: (float(np.median(latencies[name])), float(rates[name]),
                   sessions[name][1]) for name in sessions}


def _timed_in_a_process(named, rounds, intra_op_threads):
    """`time_exports` in a fresh process (this script, `--time`)."""
    process = subprocess.run(
        [sys.executable, __file__, "--time", json.dumps(named),
         "--rounds", str(rounds), "--intra-op-threads",
         str(intra_op_threads)], check=True, capture_output=True,
        text=True)
    return json.loads(process.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkouts", nargs="*", type=Path)
    parser.add_argument("--precisions", nargs="+",
                        default=["fp32", "bf16", "int8"])
    parser.add_argument("--preset", default="bert_base")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--intra-op-threads", type=int, default=None,
                        help="threads within an op (default: "
                             "serving_profile.py's; served exports run "
                             "fastest with 1: benchmarks/serving.py)")
    parser.add_argument("--time", help=argparse.SUPPRESS)
    args = parser.parse_args()
    from serving_profile import THREADS

    threads = args.intra_op_threads or THREADS
    if args.time:
        print(json.dumps(time_exports(json.loads(args.time), args.rounds,
                                      threads)))
        return
    if len(args.checkouts) != 2:
        parser.error("give two checkouts: before and after")

    import tensorflow as tf

    with tempfile.TemporaryDirectory() as tmp:
        named = []
        for index, checkout in enumerate(args.checkouts):
            for precision in args.precisions:
                named.append((
                    f"{index}: {checkout.resolve().name} {precision}",
                    str(build(checkout, Path(tmp) / str(index) / precision /
                              "export" / "1", args.preset, precision))))
        forward = _timed_in_a_process(named, args.rounds, threads)
        backward = _timed_in_a_process(named[::-1], args.rounds, threads)
    print(f"{args.preset} classifier; TF {tf.__version__}, {threads} "
          f"threads within an op, {os.cpu_count()} cores; {args.rounds} "
          f"rounds in each load order; {time.strftime('%Y-%m-%d')}")
    print(f"{'export':<28} {'b1 p50 ms (in order / reversed / mean)':>40} "
          f"{'b32 sent/s (in order / reversed / mean)':>41} {'nodes':>6}")
    for name, _ in named:
        (b1, b32, nodes), (b1_r, b32_r, _) = forward[name], backward[name]
        print(f"{name:<28} {b1:16.2f} / {b1_r:7.2f} / {(b1 + b1_r) / 2:7.2f}"
              f" {b32:17.1f} / {b32_r:7.1f} / {(b32 + b32_r) / 2:7.1f}"
              f" {nodes:>6}")


if __name__ == "__main__":
    main()
