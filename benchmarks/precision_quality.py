"""What bf16 and int8 serving cost in quality: each fine-tuning run's
official test metric with the model in fp32, in bf16 (weights stored as
bf16, as `bert-tf export --precision bf16` builds it) and in int8 (the
encoder's matmuls on int8 weights, as `--precision int8` builds it);
evaluation runs the same featurize-forward-decode graph as the signature.
For classifiers, the largest probability difference between the fp32 and
the bf16 / int8 SavedModels over the whole test split and how often their
labels agree; with `--embeddings`, the cosine between the fp32 and int8
MiniLM sentence embeddings of real RT sentences.

    python benchmarks/precision_quality.py demo_out/rt_sentiment_minilm \\
        demo_out/wnut_qa_minilm demo_out/wnut_ner_minilm --embeddings
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
from bert_tf import precision as precision_lib  # noqa: E402
from bert_tf.serving import quantize as quantize_lib  # noqa: E402
from bert_tf.serving.export import (export, export_model,  # noqa: E402
                                    load_exported)
from bert_tf.precision import (cpu_bf16_flags,  # noqa: E402
                                        cpu_int8_flags)

REDUCED = ("bf16", "int8")


def evaluate(run, precision):
    """(official metric, {metric: value}, seconds, task, data) of `run` on
    its test split with the model in `precision`."""
    dtype = "bfloat16" if precision == "bf16" else None
    task, model, vocab, _ = tasks.load_finetuned(run, dtype=dtype)
    # As `bert-tf export --precision int8` does: calibrated on 256 of the
    # run's training examples.
    quantize_lib.quantize(model, precision_lib.Precision.parse(precision),
                          task.spec, vocab,
                           precision_lib.CALIBRATION_EXAMPLES,
                           log=lambda *a: None)
    data = task.load_data(task.spec)
    start = time.perf_counter()
    results = task.evaluate(model, data, "test", vocab, 64)
    return task.official_metric, results, time.perf_counter() - start, \
        task, data


def probability_deltas(run, data, directory):
    """{precision: (max |p_fp32 - p|, share of equal labels)} of the
    SavedModels over the test split."""
    texts = [t.decode("utf-8", "replace") for t in
             data.split("test").map(lambda e: e["text"]).as_numpy_iterator()]
    served = {}
    for precision in ("fp32", *REDUCED):
        out = directory / precision / "1"
        export_model(run, out, log=lambda *a: None, precision=precision)
        serve = load_exported(out).signatures["serving_default"]
        served[precision] = np.concatenate([
            serve(text=tf.constant(texts[i:i + 64]))["probabilities"].numpy()
            for i in range(0, len(texts), 64)])
    fp32 = served["fp32"]
    return {p: (np.abs(fp32 - served[p]).max(),
                np.mean(fp32.argmax(1) == served[p].argmax(1)))
            for p in REDUCED}


def embedding_cosines(directory, count=1000):
    """{int8 export: cosines to the fp32 export's embeddings} of the real
    MiniLM weights over `count` real RT sentences: uncalibrated, and
    calibrated on 256 other RT sentences (`--calibration-texts`)."""
    from bert_tf import samples
    from bert_tf.samples.readers import read_rt_snippets

    sentences = read_rt_snippets()[0]
    texts = list(sentences[-count:])
    calibration = directory / "calibration.txt"
    calibration.write_text("\n".join(sentences[:256]) + "\n")
    embedded = {}
    for name, precision, texts_file in (
            ("fp32", "fp32", None), ("int8", "int8", None),
            ("int8, calibrated", "int8", calibration)):
        out = directory / name.replace(", ", "_") / "1"
        export("embeddings", f"hf:{samples.fetch('minilm')}", out,
               log=lambda *a: None, precision=precision,
               calibration_texts=texts_file)
        serve = load_exported(out).signatures["serving_default"]
        embedded[name] = np.concatenate([
            serve(text=tf.constant(texts[i:i + 64]))["embedding"].numpy()
            for i in range(0, len(texts), 64)])
    a = embedded.pop("fp32")
    return {name: np.sum(a * b, 1) / (np.linalg.norm(a, axis=1) *
                                      np.linalg.norm(b, axis=1))
            for name, b in embedded.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="*", help="fine-tuning run dirs")
    parser.add_argument("--embeddings", action="store_true",
                        help="also compare fp32 and int8 MiniLM embeddings")
    args = parser.parse_args()
    print(f"bf16 flags: {', '.join(cpu_bf16_flags()) or 'none'}; int8 flags:"
          f" {', '.join(cpu_int8_flags()) or 'none'}; TF {tf.__version__}; "
          f"{time.strftime('%Y-%m-%d')}")
    print(f"{'run':<28} {'metric':<10} {'fp32':>8} {'bf16':>8} {'delta':>7} "
          f"{'int8':>8} {'delta':>7}")
    for run in args.runs:
        scores = {}
        for precision in ("fp32", *REDUCED):
            name, results, _, task, data = evaluate(run, precision)
            scale = 1 if name in ("f1", "best_f1", "exact") and \
                task.kind == "span_qa" else 100
            scores[precision] = results[name] * scale
        a = scores["fp32"]
        print(f"{Path(run).name:<28} {name:<10} {a:8.2f} "
              + " ".join(f"{scores[p]:8.2f} {scores[p] - a:+7.2f}"
                         for p in REDUCED))
        if task.kind == "classification" and not task.spec.pair:
            with tempfile.TemporaryDirectory() as tmp:
                deltas = probability_deltas(run, data, Path(tmp))
            for precision, (delta, agree) in deltas.items():
                print(f"{'':<28} SavedModels: max |p fp32 - p {precision}| "
                      f"{delta:.1e}, labels agree on {agree:.1%}")
    if args.embeddings:
        with tempfile.TemporaryDirectory() as tmp:
            for name, cosines in embedding_cosines(Path(tmp)).items():
                print(f"MiniLM embeddings, fp32 vs {name} SavedModels, "
                      f"{len(cosines)} RT sentences: cosine min "
                      f"{cosines.min():.4f}, mean {cosines.mean():.4f}")


if __name__ == "__main__":
    main()
