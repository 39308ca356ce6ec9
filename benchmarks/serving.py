"""Batch-1 serving latency of an exported classifier with tokenization in
the graph, against the bare model on already-packed ids.

Builds a BERT-Base classifier (random weights: latency does not depend on
them) with the real bert-base-uncased vocab at seq 128, exports it with
`export_model`, loads the SavedModel as TF Serving would (after
`import tensorflow_text`) and times single real RT movie-review sentences:

- `serving_default`: string in, label and probabilities out;
- `preprocess`: string in, the three packed inputs out (tokenize + pack);
- the bare classifier forward on packed ids (a `tf.function` over the same
  Keras model, no strings involved), and the bare encoder forward.

Prints p50/p99 in ms and the tokenization + packing share of the served
latency.

    .venv/bin/python benchmarks/serving.py [--calls 300] [--preset bert_base]
"""

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import yaml  # noqa: E402


def _timings(function, inputs, calls):
    for item in inputs[:10]:  # warm-up (tracing, first allocations)
        function(item)
    seconds = []
    for i in range(calls):
        item = inputs[i % len(inputs)]
        start = time.perf_counter()
        function(item)
        seconds.append(time.perf_counter() - start)
    return np.array(seconds) * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="bert_base")
    parser.add_argument("--seq-length", type=int, default=128)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()

    from bert_tf import checkpoints, config
    from bert_tf.data import samples
    from bert_tf.data.readers.sentiment import read_rt_snippets
    from bert_tf.models.encoder import BertEncoder
    from bert_tf.models.task_models import BertClassifier
    from bert_tf.serving.export import export_model, load_exported
    from bert_tf.text.preprocessor import BertPreprocessor
    from bert_tf.text.vocab import read_vocab

    vocab = read_vocab(samples.fetch("minilm") / "vocab.txt")
    config = config.load_preset(args.preset)
    model = BertClassifier(BertEncoder.from_config_object(config), 2)
    texts, _ = read_rt_snippets()
    texts = texts[:200]
    with tempfile.TemporaryDirectory() as tmp:
        best = Path(tmp) / "best"
        best.mkdir()
        spec = {"task": "benchmark", "labels": ["negative", "positive"],
                "regression": False, "pair": False, "metrics": ["accuracy"],
                "seq_length": args.seq_length, "lower_case": True,
                "dropout": 0.1, "encoder": vars(config)}
        (best / "classifier.yaml").write_text(yaml.safe_dump(spec))
        vocab.save(best / "vocab.txt")
        checkpoints.model_checkpoint(model.encoder, classifier=model.head) \
            .write(str(best / "model.ckpt"))
        out = Path(tmp) / "export" / "bench" / "1"
        export_model(best, out, log=lambda *a: None)
        loaded = load_exported(out)
        serve = loaded.signatures["serving_default"]
        preprocess = loaded.signatures["preprocess"]
        strings = [tf.constant([t]) for t in texts]
        pre = BertPreprocessor(vocab, args.seq_length)
        packed = [pre(s) for s in strings]
        forward = tf.function(lambda x: model(x, training=False))
        encoder = tf.function(lambda x: model.encoder(x, training=False))
        rows = {
            "serving_default (string in)": _timings(
                lambda s: serve(text=s), strings, args.calls),
            "preprocess (tokenize + pack)": _timings(
                lambda s: preprocess(text=s), strings, args.calls),
            "classifier on packed ids": _timings(forward, packed, args.calls),
            "encoder on packed ids": _timings(encoder, packed, args.calls),
        }
    print(f"{args.preset} (L={config.num_layers} H={config.hidden_size}), "
          f"seq {args.seq_length}, batch 1, {args.calls} calls over "
          f"{len(texts)} real RT sentences, {os.cpu_count()} CPU cores, "
          f"TF {tf.__version__}")
    print(f"{'':<32} {'p50 ms':>8} {'p99 ms':>8} {'mean ms':>8}")
    for name, ms in rows.items():
        print(f"{name:<32} {np.percentile(ms, 50):8.2f} "
              f"{np.percentile(ms, 99):8.2f} {ms.mean():8.2f}")
    served = np.percentile(rows["serving_default (string in)"], 50)
    bare = np.percentile(rows["classifier on packed ids"], 50)
    alone = np.percentile(rows["preprocess (tokenize + pack)"], 50)
    print(f"tokenization + packing: {alone:.2f} ms alone = "
          f"{alone / served:.1%} of the served p50; served minus bare "
          f"forward: {served - bare:.2f} ms ({(served - bare) / served:.1%})")


if __name__ == "__main__":
    main()
