"""Distilled students beside their teacher: test accuracy, parameters, and
the serving speed of each one's SavedModel (batch-1 p50/p99 and batch-32
sentences/s on real RT test sentences, 2 threads), all in one run.

    python benchmarks/distillation.py --teacher runs/rt_sentiment_minilm \\
        --student "MiniLM L3 distilled=runs/rt_l3_distilled" \\
        --student "MiniLM L3 direct=runs/rt_l3_direct"

Each run is a `bert-tf finetune` or `bert-tf distill` model_dir; its test
accuracy is read from `best/metrics.json`.
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

from bert_tf.data.sample_texts import rt_splits  # noqa: E402
from bert_tf.serving.export import export_model  # noqa: E402
from bert_tf.tasks import load_finetuned  # noqa: E402


def measure(run, texts, out, calls=300):
    import tensorflow_text  # noqa: F401

    report = export_model(run, out, log=lambda line: None)
    serve = tf.saved_model.load(str(report["path"])).signatures[
        "serving_default"]
    p50, p99 = batch1_latencies(
        lambda t: serve(text=tf.constant([t])), texts, calls)
    batches = [texts[i:i + 32] for i in range(0, 320, 32)]
    for batch in batches[:2]:
        serve(text=tf.constant(batch))
    start = time.perf_counter()
    for batch in batches:
        serve(text=tf.constant(batch))
    throughput = 320 / (time.perf_counter() - start)
    metrics = json.loads((Path(run) / "best" / "metrics.json").read_text())
    parameters = load_finetuned(run)[1].count_params()
    return {"test": metrics["test"]["accuracy"], "p50": p50, "p99": p99,
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
    texts = rt_splits()["test"][0]
    runs = [("teacher", args.teacher)] + [
        tuple(s.split("=", 1)) for s in args.student]
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, run) in enumerate(runs):
            rows[name] = measure(run, texts, Path(tmp) / f"m{i}" / "1",
                                 args.calls)
    teacher = rows["teacher"]
    print(f"{'model':<28} {'test':>6} {'params':>11} {'b1 p50':>8} "
          f"{'b1 p99':>8} {'b32/s':>7} {'b1 speed-up':>11}")
    for name, row in rows.items():
        print(f"{name:<28} {100 * row['test']:6.1f} {row['parameters']:>11,} "
              f"{row['p50']:8.1f} {row['p99']:8.1f} {row['throughput']:7.1f} "
              f"{teacher['p50'] / row['p50']:10.2f}x")


if __name__ == "__main__":
    main()
