"""What bf16 serving costs in quality: each fine-tuning run's official test
metric with the model in fp32 and in bf16 (weights stored as bf16, as
`bert-tf export --precision bf16` builds it; evaluation runs the same
featurize-forward-decode graph as the signature), and for classifiers the
largest probability difference between the fp32 and bf16 SavedModels over
the whole test split.

    python benchmarks/precision_quality.py demo_out/rt_sentiment_minilm \\
        demo_out/wnut_qa_minilm demo_out/wnut_ner_minilm
"""

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from bert_tf import tasks  # noqa: E402
from bert_tf.serving.export import export_model, load_exported  # noqa: E402
from bert_tf.training.precision import cpu_bf16_flags  # noqa: E402


def evaluate(run, dtype):
    """(official metric, {metric: value}, seconds) of `run` on its test
    split with the model built in `dtype`."""
    task, model, vocab, _ = tasks.load_finetuned(run, dtype=dtype)
    data = task.load_data(task.spec)
    start = time.perf_counter()
    results = task.evaluate(model, data, "test", vocab, 64)
    return task.official_metric, results, time.perf_counter() - start, \
        task, data


def probability_delta(run, task, data, directory):
    """Max |p_fp32 - p_bf16| of the two SavedModels over the test split."""
    texts = [t.decode("utf-8", "replace") for t in
             data.split("test").map(lambda e: e["text"]).as_numpy_iterator()]
    served = {}
    for precision in ("fp32", "bf16"):
        out = directory / precision / "1"
        export_model(run, out, log=lambda *a: None, precision=precision)
        serve = load_exported(out).signatures["serving_default"]
        served[precision] = np.concatenate([
            serve(text=tf.constant(texts[i:i + 64]))["probabilities"].numpy()
            for i in range(0, len(texts), 64)])
    agree = np.mean(served["fp32"].argmax(1) == served["bf16"].argmax(1))
    return np.abs(served["fp32"] - served["bf16"]).max(), agree


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", help="fine-tuning run dirs")
    args = parser.parse_args()
    print(f"bf16 flags: {', '.join(cpu_bf16_flags()) or 'none'}; TF "
          f"{tf.__version__}; {time.strftime('%Y-%m-%d')}")
    print(f"{'run':<28} {'metric':<10} {'fp32':>8} {'bf16':>8} {'delta':>7} "
          f"{'fp32 s':>7} {'bf16 s':>7}")
    for run in args.runs:
        name, fp32, fp32_s, task, data = evaluate(run, None)
        _, bf16, bf16_s, _, _ = evaluate(run, "bfloat16")
        scale = 1 if name in ("f1", "best_f1", "exact") and \
            task.kind == "span_qa" else 100
        a, b = fp32[name] * scale, bf16[name] * scale
        print(f"{Path(run).name:<28} {name:<10} {a:8.2f} {b:8.2f} "
              f"{b - a:+7.2f} {fp32_s:7.1f} {bf16_s:7.1f}")
        if task.kind == "classification":
            with tempfile.TemporaryDirectory() as tmp:
                delta, agree = probability_delta(run, task, data, Path(tmp))
            print(f"{'':<28} SavedModels: max |p fp32 - p bf16| "
                  f"{delta:.1e}, labels agree on {agree:.1%}")


if __name__ == "__main__":
    main()
