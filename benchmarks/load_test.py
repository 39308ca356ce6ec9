"""Load test of an exported model: concurrent clients, mixed lengths and
hostile strings, memory over the run.

Loads a SavedModel as a server process would (after `import
tensorflow_text`) and drives its `serving_default` from N client threads
(no TF Serving binary here). Requests are real RT sentences, one to four
per request, mixed with hostile ones: empty, whitespace-only, 10,000
words, invalid UTF-8, control characters, emoji and CJK. Every answer is
checked (one label per text, probabilities that sum to 1); the process's
resident memory is read at 1,000 requests and at the end.

    .venv/bin/python benchmarks/load_test.py \
        [--model demo_out/export/rt_sentiment/1] [--clients 8] \
        [--requests 10000]
"""

import argparse
import collections
import os
import threading
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

HOSTILE = {
    "empty": [b""],
    "whitespace": [b" \t\n "],
    "10k words": [b"word " * 10_000],
    "invalid utf-8": [b"\xff\xfe bad \xc3\x28 bytes"],
    "control chars": [b"a\x00b\x07c\x1b[31m"],
    "emoji + CJK": ["🎬 電影很好 👍".encode()],
}


def rss_mb():
    """Resident memory of this process in MB (Linux /proc)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="demo_out/export/rt_sentiment/1")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from bert_tf.data.sample_texts import read_rt_snippets
    from bert_tf.serving.export import load_exported

    serve = load_exported(args.model).signatures["serving_default"]
    texts, _ = read_rt_snippets()
    rng = np.random.default_rng(args.seed)
    kinds = list(HOSTILE)
    plan = []  # (kind, [bytes]) per request, decided up front
    for _ in range(args.requests):
        if rng.random() < 0.1:
            kind = kinds[rng.integers(len(kinds))]
            plan.append((kind, HOSTILE[kind]))
        else:
            size = int(rng.integers(1, 5))
            picked = rng.integers(len(texts), size=size)
            plan.append((f"real x{size}",
                         [texts[i].encode() for i in picked]))
    for kind in kinds:  # warm-up: each hostile shape once
        serve(text=tf.constant(HOSTILE[kind]))

    lock = threading.Lock()
    counts = collections.Counter()
    failures = collections.Counter()
    latencies = []
    memory = {"start": rss_mb()}
    position = [0]

    def client():
        while True:
            with lock:
                index = position[0]
                position[0] += 1
            if index >= len(plan):
                return
            kind, batch = plan[index]
            start = time.perf_counter()
            try:
                out = serve(text=tf.constant(batch))
                probabilities = out["probabilities"].numpy()
                ok = (len(out["label"]) == len(batch) and
                      np.allclose(probabilities.sum(-1), 1.0, atol=1e-4))
            except Exception as error:  # noqa: BLE001 (counted, reported)
                ok = False
                with lock:
                    failures[f"{kind}: {type(error).__name__}"] += 1
            seconds = time.perf_counter() - start
            with lock:
                counts[kind if ok else f"{kind} WRONG"] += 1
                latencies.append(seconds)
                done = sum(counts.values())
                if done == 1000:
                    memory["after 1,000"] = rss_mb()

    started = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(args.clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    memory[f"after {len(plan):,}"] = rss_mb()
    ms = np.array(latencies) * 1e3
    print(f"{args.model}: {len(plan):,} requests from {args.clients} "
          f"client threads in {elapsed:.1f} s ({len(plan) / elapsed:.0f} "
          f"requests/s), {os.cpu_count()} CPU cores")
    print(f"latency p50 {np.percentile(ms, 50):.1f} ms, p99 "
          f"{np.percentile(ms, 99):.1f} ms, max {ms.max():.1f} ms")
    print("answered: " + ", ".join(f"{k} {v}" for k, v in
                                   sorted(counts.items())))
    print("failures: " + (", ".join(f"{k} {v}" for k, v in
                                    failures.items()) or "none"))
    print("RSS MB: " + ", ".join(f"{k} {v:.0f}" for k, v in memory.items()))


if __name__ == "__main__":
    main()
