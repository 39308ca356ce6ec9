"""The TFLite export against the SavedModel, on the real RT test set.

Exports a fine-tuned sentiment classifier (default: the demo's MiniLM run)
as a SavedModel and as TFLite fp32 and dynamic-range int8, then prints:
label agreement with the SavedModel and max |delta probability| on the
1,057 RT test sentences, each model's accuracy (so the int8 drop), file
sizes, conversion time and batch-1 latency (p50/p99 over real sentences,
2 threads each: the LiteRT interpreter from ai-edge-litert against the
SavedModel's `serving_default`). Finally every hostile string goes
through the TFLite models.

    .venv/bin/python benchmarks/tflite.py \
        [--checkpoint demo_out/rt_sentiment_minilm] [--calls 300]
"""

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
THREADS = 2

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.config.threading.set_intra_op_parallelism_threads(THREADS)
tf.config.threading.set_inter_op_parallelism_threads(THREADS)

from bert_tf.serving.export import (export_model, load_exported,  # noqa: E402
                                    predict_texts)
from bert_tf.serving.tflite import TFLiteModel  # noqa: E402
from bert_tf.serving.tflite import export_tflite
from bert_tf.tasks.classification.data import load_classification  # noqa: E402
from timing import batch1_latencies  # noqa: E402

HOSTILE = ["", "   \t\n ", "film " * 10000, "\x00\x01 bell\x07",
           "🎸 中文 ünïcödé", b"\xff\xfe invalid utf-8", "\u200b\u200d",
           "ﬁne ß Ｆｕｌｌ"]


def _size(path):
    path = Path(path)
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", default="demo_out/rt_sentiment_minilm")
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()

    data = load_classification("sample:rt_sentiment")
    texts, labels = [], []
    for example in data.split("test"):
        texts.append(example["text"].numpy().decode())
        labels.append(int(example["label"]))
    labels = np.array(labels)
    out = Path(tempfile.mkdtemp(prefix="bench_tflite_"))
    quiet = dict(log=lambda line: None)
    saved_path = export_model(args.checkpoint, out / "saved" / "1",
                              **quiet)["path"]
    files, seconds = {}, {}
    for name, quantize in (("fp32", "none"), ("int8", "dynamic_int8")):
        start = time.perf_counter()
        files[name] = export_tflite(args.checkpoint, out / f"{name}.tflite",
                                    quantize, **quiet)["path"]
        seconds[name] = time.perf_counter() - start

    saved = load_exported(saved_path)
    probabilities = {"SavedModel": np.concatenate([
        predict_texts(saved, texts[i:i + 64])["probabilities"]
        for i in range(0, len(texts), 64)])}
    runners = {name: TFLiteModel(path, THREADS)
               for name, path in files.items()}
    for name, runner in runners.items():
        probabilities[f"TFLite {name}"] = np.concatenate([
            runner(texts[i:i + 64])["probabilities"]
            for i in range(0, len(texts), 64)])

    reference = probabilities["SavedModel"]
    print(f"RT test set: {len(texts):,} real sentences; checkpoint "
          f"{args.checkpoint}")
    print(f"{'model':<14} {'size MB':>8} {'accuracy':>9} {'agree':>8} "
          f"{'max |dp|':>9} {'b1 p50 ms':>10} {'b1 p99 ms':>10}")
    functions = {"SavedModel": lambda t: predict_texts(saved, t),
                 **{f"TFLite {n}": r for n, r in runners.items()}}
    sizes = {"SavedModel": _size(saved_path),
             **{f"TFLite {n}": _size(p) for n, p in files.items()}}
    for name, probs in probabilities.items():
        accuracy = np.mean(probs.argmax(-1) == labels)
        agree = np.mean(probs.argmax(-1) == reference.argmax(-1))
        delta = np.abs(probs - reference).max()
        p50, p99 = batch1_latencies(
            lambda text: functions[name]([text]), texts, args.calls)
        print(f"{name:<14} {sizes[name] / 1e6:8.1f} {accuracy:9.2%} "
              f"{agree:8.2%} {delta:9.2e} {p50:10.2f} {p99:10.2f}")
    print("conversion: " + ", ".join(f"{n} {s:.1f} s"
                                     for n, s in seconds.items()))
    for name, runner in runners.items():
        out_h = runner([t if isinstance(t, str) else t for t in HOSTILE])
        assert np.isfinite(out_h["probabilities"]).all()
        print(f"hostile strings through TFLite {name}: {len(HOSTILE)} "
              f"answered, labels {[l.decode() for l in out_h['label']]}")
    print(f"files under {out}")


if __name__ == "__main__":
    main()
