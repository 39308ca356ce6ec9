"""What rounding a batch up to its length bucket costs: the same BERT-Base
classifier exported with our buckets (8, 16, 24, 32, 48, 64, 96, 128), with
buckets every 8 tokens, and with every length its own bucket (each batch
cut to its longest row), timed on the same real RT sentences in one run.

Rounding adds padded positions (a 29-token sentence runs at 32); exact
lengths give the oneDNN kernels a new shape for almost every request.

    .venv/bin/python benchmarks/bucket_rounding.py [--calls 200]
"""

import argparse
import os
import tempfile
import time
from pathlib import Path
from unittest import mock

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
THREADS = 2

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from timing import batch1_latencies  # noqa: E402

tf.config.threading.set_intra_op_parallelism_threads(THREADS)
tf.config.threading.set_inter_op_parallelism_threads(THREADS)


def random_run(directory, vocab_path, preset):
    """A fine-tuning run directory holding a random classifier."""
    import yaml

    from bert_tf.checkpoints.layout import model_roots
    from bert_tf.models.encoder import BertEncoder
    from bert_tf.tasks.classification.model import BertClassifier
    from bert_tf.text.vocab import read_vocab

    encoder = BertEncoder.from_preset(preset)
    model = BertClassifier(encoder, 2)
    best = directory / "best"
    best.mkdir(parents=True)
    spec = {"kind": "classification", "name": "benchmark",
            "seq_length": 128, "lower_case": True, "dropout": 0.1,
            "labels": ["negative", "positive"], "metrics": ["accuracy"],
            "encoder": vars(encoder.config)}
    (best / "task.yaml").write_text(yaml.safe_dump(spec))
    read_vocab(vocab_path).save(best / "vocab.txt")
    tf.train.Checkpoint(**model_roots(model)).write(
        str(best / "model.ckpt"))
    return directory


def timings(serve, texts, calls, batches):
    """(batch-1 p50 ms, p99 ms, batch-32 sentences/s)."""
    def run(chunk):
        serve(text=tf.constant(chunk))

    p50, p99 = batch1_latencies(lambda text: run([text]), texts, calls)
    chunks = [texts[i * 32:(i + 1) * 32] for i in range(batches)]
    run(chunks[0])
    start = time.perf_counter()
    for chunk in chunks:
        run(chunk)
    rate = batches * 32 / (time.perf_counter() - start)
    return p50, p99, rate


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--preset", default="bert_base")
    args = parser.parse_args()

    from bert_tf import samples
    from bert_tf.samples.readers import read_rt_snippets
    from bert_tf.serving.export import export_model, load_exported
    from bert_tf.text import features

    texts = list(read_rt_snippets()[0][:args.batches * 32])
    vocab_path = samples.fetch("minilm") / "vocab.txt"
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        run = random_run(tmp / "run", vocab_path, args.preset)
        variants = (("buckets", features.LENGTH_BUCKETS),
                    ("every 8", tuple(range(8, 513, 8))),
                    ("exact lengths", tuple(range(1, 513))))
        for name, buckets in variants:
            out = tmp / name.replace(" ", "_") / "1"
            with mock.patch.object(features, "LENGTH_BUCKETS", buckets):
                export_model(run, out, log=lambda *a: None)
            serve = load_exported(out).signatures["serving_default"]
            results[name] = timings(serve, texts, args.calls, args.batches)
        loaded = load_exported(tmp / "buckets" / "1")
        mask = loaded.signatures["preprocess"](
            text=tf.constant(texts))["input_mask"].numpy()
    lengths = mask.sum(1)
    buckets = np.array(features.bucket_lengths(128))
    rounded = buckets[np.searchsorted(buckets, lengths)]
    print(f"{args.preset}, {len(texts)} real RT sentences: "
          f"{lengths.mean():.1f} tokens with [CLS]/[SEP] on average, "
          f"{rounded.mean():.1f} after rounding up to the bucket "
          f"(+{100 * (rounded.mean() / lengths.mean() - 1):.0f}% at "
          f"batch 1); TF {tf.__version__}; {time.strftime('%Y-%m-%d')}")
    print(f"{'':<16} {'b1 p50 ms':>10} {'b1 p99 ms':>10} {'b32 sent/s':>11}")
    for name, (p50, p99, rate) in results.items():
        print(f"{name:<16} {p50:10.2f} {p99:10.2f} {rate:11.1f}")


if __name__ == "__main__":
    main()
