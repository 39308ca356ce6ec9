"""Load test of an exported model: concurrent clients, mixed lengths,
hostile strings and huge requests; latency and memory over the run.

Loads a SavedModel as a server process would (after `import
tensorflow_text`) and drives its `serving_default` from N client threads
(no TF Serving binary here). Normal requests are real RT sentences, one
to four per request (for span QA: a question over them), mixed with
hostile ones, one in ten: empty, whitespace-only, 10,000 words, invalid
UTF-8, control characters, emoji and CJK. Every answer is checked (one
per text; a classifier's probabilities sum to 1).

The run has two phases in one process: first without huge requests, then
with one request in `--huge-every` (default 50) a huge one: alternately a
text at the export's `max_input_chars` (90,000 characters, about 15,000
words, for a MiniLM-L6 QA or NER export; 1,000,000 for a classifier),
which must be answered, and one six times over it, which must be refused
with INVALID_ARGUMENT. A hostile text over the limit (10,000 words to a
BERT-Base QA export) must be refused the same way. Latency of
the normal requests (p50, p99) is reported for each phase, and resident
memory is sampled every 0.1 s; the run fails if it passes
`--rss-ceiling-mb` or a normal request fails.

    .venv/bin/python benchmarks/load_test.py \
        [--model demo_out/export/rt_sentiment/1] [--clients 8] \
        [--requests 10000] [--huge-every 50] [--rss-ceiling-mb 3000] \
        [--intra-op-threads 0]
"""

import argparse
import collections
import json
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
# A huge request's text: the export's limit times this.
HUGE = {"huge at the limit": 1, "huge 6x the limit": 6}
QUESTION = b"Who made the film?"


def rss_mb():
    """Resident memory of this process in MB (Linux /proc)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Kind:
    """How to ask an export of `kind` about texts, and check its answer."""

    def __init__(self, kind):
        self.text_input = "context" if kind == "span_qa" else "text"
        self.kind = kind

    def inputs(self, texts):
        inputs = {self.text_input: tf.constant(texts)}
        if self.kind == "span_qa":
            inputs["question"] = tf.constant([QUESTION] * len(texts))
        return inputs

    def answered(self, out, texts):
        if "probabilities" in out:  # a classifier
            return (len(out["label"]) == len(texts) and np.allclose(
                out["probabilities"].numpy().sum(-1), 1.0, atol=1e-4))
        return len(out["count"]) == len(texts)


def text_of(pool, chars):
    """Words of `pool`, repeated, in at most `chars` characters."""
    text = " ".join(pool)
    text = (text + " ") * (chars // (len(text) + 1) + 1)
    return text[:chars].rsplit(" ", 1)[0]


def plan_requests(count, texts, rng, huge_every, limit):
    """(name, [bytes]) per request, decided up front."""
    names, plan, huge = list(HOSTILE), [], 0
    pool = " ".join(texts).split()
    for _ in range(count):
        if huge_every and rng.random() < 1 / huge_every:
            name = list(HUGE)[huge % 2]
            huge += 1
            plan.append((name, [text_of(pool, HUGE[name] * limit).encode()]))
        elif rng.random() < 0.1:
            name = names[rng.integers(len(names))]
            plan.append((name, HOSTILE[name]))
        else:
            size = int(rng.integers(1, 5))
            picked = rng.integers(len(texts), size=size)
            plan.append((f"real x{size}",
                         [texts[i].encode() for i in picked]))
    return plan


def refusal_expected(batch, limit):
    """Whether a request holds a text over the export's limit."""
    return any(len(text.decode("utf-8", "replace")) > limit
               for text in batch)


def run_phase(serve, kind, plan, clients, limit):
    """Drives `plan` from `clients` threads; returns its figures."""
    lock = threading.Lock()
    counts, failures = collections.Counter(), collections.Counter()
    normal_ms, peak, position = [], [rss_mb()], [0]
    done = threading.Event()

    def sample():
        while not done.wait(0.1):
            peak[0] = max(peak[0], rss_mb())

    def client():
        while True:
            with lock:
                index = position[0]
                position[0] += 1
            if index >= len(plan):
                return
            name, batch = plan[index]
            start = time.perf_counter()
            try:
                ok = kind.answered(serve(**kind.inputs(batch)), batch) \
                    and not refusal_expected(batch, limit)
                result = "answered" if ok else "WRONG"
            except tf.errors.InvalidArgumentError as error:
                ok = refusal_expected(batch, limit) and \
                    "--max-input-chars" in error.message
                result = "refused" if ok else "FAILED"
                if not ok:
                    with lock:
                        failures[f"{name}: {error.message[:200]}"] += 1
            except Exception as error:  # noqa: BLE001 (counted, reported)
                ok, result = False, "FAILED"
                with lock:
                    failures[f"{name}: {type(error).__name__}"] += 1
            milliseconds = (time.perf_counter() - start) * 1e3
            with lock:
                counts[f"{name} {result}"] += 1
                if not name.startswith("huge"):
                    normal_ms.append(milliseconds)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    done.set()
    sampler.join()
    ms = np.array(normal_ms)
    return {"requests": len(plan), "seconds": elapsed,
            "p50": np.percentile(ms, 50), "p99": np.percentile(ms, 99),
            "max": ms.max(), "counts": counts, "failures": failures,
            "peak_rss": max(peak[0], rss_mb()), "end_rss": rss_mb()}


def report(title, figures):
    print(f"{title}: {figures['requests']:,} requests in "
          f"{figures['seconds']:.1f} s; normal requests p50 "
          f"{figures['p50']:.1f} ms, p99 {figures['p99']:.1f} ms, max "
          f"{figures['max']:.1f} ms; RSS peak {figures['peak_rss']:.0f} MB,"
          f" end {figures['end_rss']:.0f} MB")
    print("  " + ", ".join(f"{k} {v}" for k, v in
                           sorted(figures["counts"].items())))
    print("  failures: " + (", ".join(f"{k} {v}" for k, v in
                                      figures["failures"].items())
                            or "none"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="demo_out/export/rt_sentiment/1")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=10_000,
                        help="per phase")
    parser.add_argument("--huge-every", type=int, default=50,
                        help="one request in N is huge in the second "
                        "phase (0: no second phase)")
    parser.add_argument("--rss-ceiling-mb", type=float, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--intra-op-threads", type=int, default=0,
                        help="TensorFlow's threads within one op (TF "
                        "Serving's --tensorflow_intra_op_parallelism); 0, "
                        "the default: one per core")
    args = parser.parse_args()
    # Before TensorFlow's first op: the pool is made once per process.
    tf.config.threading.set_intra_op_parallelism_threads(
        args.intra_op_threads)

    from bert_tf.samples.readers import read_rt_snippets
    from bert_tf.serving.export import load_exported

    info = json.loads((Path(args.model) / "assets.extra" / "bert_tf.json")
                      .read_text())
    kind = Kind(info.get("kind", "classification"))
    serve = load_exported(args.model).signatures["serving_default"]
    texts, _ = read_rt_snippets()
    rng = np.random.default_rng(args.seed)
    limit = int(info.get("max_input_chars", 10 ** 12))
    for batch in HOSTILE.values():  # warm-up: each hostile shape once
        if not refusal_expected(batch, limit):
            serve(**kind.inputs(batch))
    print(f"{args.model} ({info.get('kind')}, at most "
          f"{info.get('max_input_chars', 'unlimited')} characters per "
          f"text): {args.clients} client threads, {os.cpu_count()} CPU "
          f"cores, {args.intra_op_threads or 'default'} intra-op threads; "
          f"RSS {rss_mb():.0f} MB after load and warm-up")
    phases = [("without huge requests", 0)]
    if args.huge_every:
        phases.append((f"with one in {args.huge_every} huge", args.huge_every))
    failures, peak = 0, 0.0
    for title, huge_every in phases:
        plan = plan_requests(args.requests, texts, rng, huge_every, limit)
        figures = run_phase(serve, kind, plan, args.clients, limit)
        report(title, figures)
        failures += sum(figures["failures"].values())
        peak = max(peak, figures["peak_rss"])
    held = peak <= args.rss_ceiling_mb
    print(f"RSS peak {peak:.0f} MB: the ceiling of "
          f"{args.rss_ceiling_mb:.0f} MB {'held' if held else 'was EXCEEDED'}"
          f"; {failures} requests failed")
    raise SystemExit(0 if held and not failures else 1)


if __name__ == "__main__":
    main()
