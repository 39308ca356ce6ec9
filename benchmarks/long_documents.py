"""Documents longer than the model: RT critic digests (about 300 words,
`bert_tf/tasks/classification/digests.py`) classified by windows with
each pooling, against truncation to the model's length, all fine-tuned
from the same all-MiniLM-L6-v2 with the same schedule
(`configs/finetune/rt_digests_minilm.yaml`); then the mean-pooled export
answering a 20,000-word document in one request.

    python benchmarks/long_documents.py --out runs/long_documents
    python benchmarks/long_documents.py --out runs/long_documents --skip-training

Each variant is an ordinary `bert-tf finetune` run; with `--skip-training`
the runs already under `--out` are read back.
"""

import argparse
import json
import os
import resource
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from bert_tf import finetune  # noqa: E402

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "finetune" / \
    "rt_digests_minilm.yaml"
VARIANTS = {
    "truncated": ["task.long_document=false"],
    "windows, mean": ["task.window_pooling=mean"],
    "windows, max": ["task.window_pooling=max"],
    "windows, attention": ["task.window_pooling=attention"],
}


def train(out, name, overrides):
    run_dir = out / name.replace(", ", "_")
    finetune.run(finetune.load(CONFIG, overrides + [
        f"trainer.model_dir={run_dir}"]))
    return run_dir, read_run(run_dir)


def read_run(run_dir):
    """Dev and test accuracy and minutes of a finished run."""
    metrics = json.loads((run_dir / "best" / "metrics.json").read_text())
    return {"dev": metrics["best"]["value"],
            "test": metrics["test"]["accuracy"],
            "minutes": metrics["seconds"] / 60}


def serve_long(run_dir, out, words=20_000):
    import tensorflow_text  # noqa: F401

    from bert_tf.serving.export import export_model
    export = out / "export" / "digests" / "1"
    if not export.exists():
        export_model(run_dir, export, log=lambda line: None)
    serve = tf.saved_model.load(str(export)).signatures["serving_default"]
    digest = " ".join(["a gripping, beautifully acted and moving film ."]
                      * (words // 8))
    serve(text=tf.constant(["warm up"]))
    times = []
    for _ in range(3):
        start = time.perf_counter()
        result = serve(text=tf.constant([digest]))
        times.append(time.perf_counter() - start)
    return {"words": len(digest.split()),
            "windows": int(result["windows"][0]),
            "label": result["label"].numpy()[0].decode(),
            "seconds": float(np.median(times)),
            "peak_rss_mb": resource.getrusage(
                resource.RUSAGE_SELF).ru_maxrss / 1024}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--skip-training", action="store_true")
    args = parser.parse_args()
    rows = {}
    for name, overrides in VARIANTS.items():
        run_dir = args.out / name.replace(", ", "_")
        rows[name] = (read_run(run_dir) if args.skip_training
                      else train(args.out, name, overrides)[1])
    print(f"{'variant':<20} {'dev':>6} {'test':>6} {'minutes':>8}")
    for name, row in rows.items():
        print(f"{name:<20} {100 * row['dev']:6.1f} {100 * row['test']:6.1f} "
              f"{row['minutes']:8.1f}")
    long = serve_long(args.out / "windows_mean", args.out)
    print(f"one request of {long['words']:,} words: {long['windows']} "
          f"windows, label {long['label']}, {long['seconds']:.1f} s, peak "
          f"RSS {long['peak_rss_mb']:,.0f} MB")


if __name__ == "__main__":
    main()
