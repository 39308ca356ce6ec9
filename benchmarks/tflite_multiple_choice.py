"""The multiple-choice TFLite export against the SavedModel, on the real
next-sentence choice set (test split: a context sentence and 4 candidate
next sentences, one of them the real one).

Exports a fine-tuned multiple-choice run (default: `bert-tf finetune
--config configs/finetune/next_sentence_mc_minilm.yaml`'s) as a
SavedModel and as TFLite fp32 and dynamic-range int8, then prints each
one's test accuracy, its agreement with the SavedModel's choices, the
largest probability difference, file size and batch-1 latency (p50/p99
over real examples, 2 threads each).

    .venv/bin/python benchmarks/tflite_multiple_choice.py \\
        [--checkpoint runs/next_sentence_mc_minilm]
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
from timing import batch1_latencies  # noqa: E402

tf.config.threading.set_intra_op_parallelism_threads(THREADS)
tf.config.threading.set_inter_op_parallelism_threads(THREADS)


def _answer(function, examples, batch=16):
    parts = [function([c for c, _, _ in examples[i:i + batch]],
                      [list(x) for _, x, _ in examples[i:i + batch]])
             for i in range(0, len(examples), batch)]
    return np.concatenate(parts)


def main():
    from bert_tf.serving.export import export_model, load_exported
    from bert_tf.serving.tflite import TFLiteModel, export_tflite
    from bert_tf.tasks.multiple_choice.data import load_next_sentence

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", default="runs/next_sentence_mc_minilm")
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()

    test = list(load_next_sentence().split("test"))
    labels = np.array([label for _, _, label in test])
    out = Path(tempfile.mkdtemp(prefix="bench_tflite_mc_"))
    quiet = dict(log=lambda line: None)
    saved_path = export_model(args.checkpoint, out / "saved" / "1",
                              **quiet)["path"]
    serve = load_exported(saved_path).signatures["serving_default"]
    runners = {"SavedModel": lambda c, x: serve(
        context=tf.constant(c), choices=tf.constant(x))[
            "probabilities"].numpy()}
    sizes = {"SavedModel": sum(p.stat().st_size for p in
                               saved_path.rglob("*") if p.is_file())}
    for name, quantize in (("TFLite fp32", "none"),
                           ("TFLite int8", "dynamic_int8")):
        path = export_tflite(args.checkpoint, out / f"{quantize}.tflite",
                             quantize, **quiet)["path"]
        model = TFLiteModel(path, THREADS)
        runners[name] = lambda c, x, m=model: m(
            context=c, choices=x)["probabilities"]
        sizes[name] = path.stat().st_size
    print(f"{args.checkpoint}: next-sentence choice, {len(test)} test "
          f"examples of 4 choices; {THREADS} threads; TF {tf.__version__}; "
          f"{time.strftime('%Y-%m-%d')}")
    print(f"{'':<12} {'accuracy':>9} {'agree':>7} {'max |dp|':>9} "
          f"{'MB':>7} {'b1 p50 ms':>10} {'b1 p99 ms':>10}")
    reference = _answer(runners["SavedModel"], test)
    for name, run in runners.items():
        probabilities = _answer(run, test)
        agree = np.mean(probabilities.argmax(1) == reference.argmax(1))
        delta = np.abs(probabilities - reference).max()
        accuracy = np.mean(probabilities.argmax(1) == labels)
        p50, p99 = batch1_latencies(
            lambda e: run([e[0]], [list(e[1])]), test, args.calls)
        print(f"{name:<12} {accuracy:9.2%} {agree:7.1%} {delta:9.1e} "
              f"{sizes[name] / 1e6:7.1f} {p50:10.2f} {p99:10.2f}",
              flush=True)


if __name__ == "__main__":
    main()
