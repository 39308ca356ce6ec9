"""Distilled students beside their teacher: test metric, parameters, and
the serving speed of each one's SavedModel (batch-1 p50/p99 and batch-32
requests/s on real test inputs, 2 threads), all in one run. The kind is
the runs': RT sentences for classifiers, WNUT-16 tweets for taggers, WNUT
QA questions with their tweets for span QA.

    python benchmarks/distillation.py --teacher runs/rt_sentiment_minilm \\
        --student "MiniLM L3 distilled=runs/rt_l3_distilled" \\
        --student "MiniLM L3 direct=runs/rt_l3_direct"

Each run is a `bert-tf finetune` or `bert-tf distill` model_dir; its test
metric (accuracy, entity F1, or best F1 for QA) is read from
`best/metrics.json`.
"""

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from timing import batch1_latencies  # noqa: E402

from bert_tf.samples.readers import rt_splits  # noqa: E402
from bert_tf.serving.export import export_model  # noqa: E402
from bert_tf.tasks import load_finetuned, read_spec  # noqa: E402


def real_requests(kind):
    """The kind's real test inputs, as `serving_default` keyword arguments
    of one request each."""
    if kind == "span_qa":
        from bert_tf.tasks.span_qa.data import load_wnut_qa
        return [{"question": [e["question"]], "context": [e["context"]]}
                for e in load_wnut_qa().split("test")]
    if kind == "tagging":
        from bert_tf.tasks.tagging.data import load_wnut_ner
        return [{"text": [" ".join(words)]}
                for words, _ in load_wnut_ner().split("test")]
    return [{"text": [t]} for t in rt_splits()["test"][0]]


def batched(requests, size):
    return [{k: sum((r[k] for r in requests[i:i + size]), [])
             for k in requests[0]}
            for i in range(0, len(requests) - size + 1, size)]


def measure(run, out, calls=300):
    import tensorflow_text  # noqa: F401

    report = export_model(run, out, log=lambda line: None)
    serve = tf.saved_model.load(str(report["path"])).signatures[
        "serving_default"]
    kind = read_spec(run)[1].kind
    requests = real_requests(kind)

    def call(request):
        return serve(**{k: tf.constant(v) for k, v in request.items()})

    p50, p99 = batch1_latencies(call, requests, calls)
    batches = batched(requests, 32)[:10]
    for batch in batches[:2]:
        call(batch)
    start = time.perf_counter()
    for batch in batches:
        call(batch)
    throughput = 32 * len(batches) / (time.perf_counter() - start)
    metrics = json.loads((Path(run) / "best" / "metrics.json").read_text())
    metric = {"span_qa": "best_f1", "tagging": "f1"}.get(kind, "accuracy")
    scale = 1 if kind == "span_qa" else 100
    parameters = load_finetuned(run)[1].count_params()
    return {"test": scale * metrics["test"][metric], "p50": p50, "p99": p99,
            "throughput": throughput, "parameters": parameters}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--teacher", required=True)
    parser.add_argument("--student", action="append", default=[],
                        metavar="NAME=RUN")
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(2)
    tf.config.threading.set_inter_op_parallelism_threads(2)
    runs = [("teacher", args.teacher)] + [
        tuple(s.split("=", 1)) for s in args.student]
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, run) in enumerate(runs):
            rows[name] = measure(run, Path(tmp) / f"m{i}" / "1", args.calls)
    teacher = rows["teacher"]
    print(f"{'model':<28} {'test':>6} {'params':>11} {'b1 p50':>8} "
          f"{'b1 p99':>8} {'b32/s':>7} {'b1 speed-up':>11}")
    for name, row in rows.items():
        print(f"{name:<28} {row['test']:6.1f} {row['parameters']:>11,} "
              f"{row['p50']:8.1f} {row['p99']:8.1f} {row['throughput']:7.1f} "
              f"{teacher['p50'] / row['p50']:10.2f}x")


if __name__ == "__main__":
    main()
