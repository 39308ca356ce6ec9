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

    git worktree add ../before <commit>
    .venv/bin/python benchmarks/compare_exports.py ../before . \\
        [--precisions fp32 bf16 int8] [--preset bert_base] [--rounds 10]
"""

import argparse
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkouts", nargs=2, type=Path)
    parser.add_argument("--precisions", nargs="+",
                        default=["fp32", "bf16", "int8"])
    parser.add_argument("--preset", default="bert_base")
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()

    import tensorflow as tf

    from bert_tf.samples.readers import read_rt_snippets
    from serving_profile import THREADS, load_session

    texts, _ = read_rt_snippets()
    batches = [np.array(texts[i * 32:(i + 1) * 32], dtype=object)
               for i in range(3 * args.rounds)]
    with tempfile.TemporaryDirectory() as tmp:
        sessions = {}
        for index, checkout in enumerate(args.checkouts):
            for precision in args.precisions:
                name = f"{index}: {checkout.resolve().name} {precision}"
                out = build(checkout, Path(tmp) / str(index) / precision /
                            "export" / "1", args.preset, precision)
                sessions[name] = (load_session(out), executed_nodes(
                    out, {"text": [texts[0]]}))
        calls = {name: _request(*session)
                 for name, (session, _) in sessions.items()}
        latencies = interleaved_latencies(
            {name: _single(call) for name, call in calls.items()},
            texts, 20 * args.rounds, args.rounds)
        rates = interleaved_rates(calls, batches, args.rounds)
    print(f"{args.preset} classifier; TF {tf.__version__}, {THREADS} "
          f"threads, {os.cpu_count()} cores; {args.rounds} rounds; "
          f"{time.strftime('%Y-%m-%d')}")
    print(f"{'export':<32} {'b1 p50 ms':>10} {'b32 sent/s':>11} {'nodes':>6}")
    for name, ms in latencies.items():
        print(f"{name:<32} {np.median(ms):10.2f} {rates[name]:11.1f} "
              f"{sessions[name][1]:>6}")


if __name__ == "__main__":
    main()
