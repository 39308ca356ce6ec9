"""Serving speed side by side: our SavedModel (raw strings in, tokenization
in the graph) against HF transformers eager and ONNX Runtime, on the same
real RT sentences and the same BERT-Base weights.

One random-init BERT-Base classifier (latency does not depend on the
weights) is built in HF transformers, saved as safetensors, imported by
our HF importer and exported twice with `export_model`: with length
buckets (the default) and `--fixed-length` (every request padded to seq
128, the export before buckets). The same HF model is exported to ONNX.
Every framework gets 2 threads and the bert-base-uncased vocab; the peers
tokenize with `BertTokenizerFast` at the natural length (no padding at
batch 1, padding to the longest row at batch 32).

Prints batch-1 p50/p99 (ms, tokenization included) and batch-32 sentences
per second, then the share of our served latency spent tokenizing and
packing. Run it in the bench environment (`make bench`), which has torch,
transformers and onnxruntime:

    .venv-bench/bin/python benchmarks/serving.py [--calls 300] [--batches 20]
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


def _batch1(function, texts, calls):
    """Batch-1 latencies in ms of `function([text])`."""
    for text in texts[:10]:  # warm-up
        function([text])
    seconds = []
    for i in range(calls):
        start = time.perf_counter()
        function([texts[i % len(texts)]])
        seconds.append(time.perf_counter() - start)
    return np.array(seconds) * 1e3


def _throughput(function, texts, batches, size=32):
    """Sentences per second of `function(list of size texts)`."""
    chunks = [texts[i * size:(i + 1) * size] for i in range(batches)]
    function(chunks[0])
    start = time.perf_counter()
    for chunk in chunks:
        function(chunk)
    return batches * size / (time.perf_counter() - start)


def _hf_model(directory):
    """A random BERT-Base classifier saved as HF safetensors."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(num_labels=2)).eval()
    model.save_pretrained(directory)
    return model


def _our_export(hf_dir, vocab_path, out, fixed_length):
    """Our classifier with the HF model's weights (encoder through the HF
    importer, the 2-way head copied), exported as `out`."""
    import yaml
    from safetensors.numpy import load_file

    from bert_tf import checkpoints
    from bert_tf.serving.export import export_model
    from bert_tf.tasks.classification.model import BertClassifier

    best = out.parent.parent / f"best_{out.parent.name}"
    pretrained = checkpoints.convert("hf", hf_dir, best / "encoder",
                                     vocab_path=vocab_path,
                                     log=lambda *a: None)
    model = BertClassifier(pretrained.encoder, 2)
    state = load_file(str(Path(hf_dir) / "model.safetensors"))
    model.head.dense.set_weights([state["classifier.weight"].T,
                                  state["classifier.bias"]])
    spec = {"kind": "classification", "name": "benchmark",
            "labels": ["negative", "positive"], "regression": False,
            "pair": False, "metrics": ["accuracy"], "seq_length": 128,
            "lower_case": True, "dropout": 0.1,
            "encoder": vars(pretrained.encoder.config)}
    (best / "task.yaml").write_text(yaml.safe_dump(spec))
    pretrained.vocab.save(best / "vocab.txt")
    tf.train.Checkpoint(**model.checkpoint_roots()).write(
        str(best / "model.ckpt"))
    export_model(best, out, log=lambda *a: None, fixed_length=fixed_length)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--batches", type=int, default=20)
    args = parser.parse_args()

    import onnxruntime
    import torch
    from transformers import BertTokenizerFast

    from bert_tf.data import samples
    from bert_tf.data.sample_texts import read_rt_snippets
    from bert_tf.serving.export import load_exported

    torch.set_num_threads(THREADS)
    vocab_path = samples.fetch("minilm") / "vocab.txt"
    tokenizer = BertTokenizerFast(str(vocab_path), do_lower_case=True)
    texts, _ = read_rt_snippets()
    texts = list(texts[:args.batches * 32])
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        hf = _hf_model(tmp / "hf")
        served = {}
        for name, fixed in (("ours, length buckets", False),
                            ("ours, fixed seq 128", True)):
            out = _our_export(tmp / "hf", vocab_path,
                              tmp / "export" / name.split()[-1] / "1", fixed)
            signature = load_exported(out).signatures["serving_default"]
            served[name] = signature

        def ours(signature):
            return lambda batch: signature(text=tf.constant(batch))[
                "probabilities"].numpy()

        def hf_eager(batch):
            with torch.inference_mode():
                inputs = tokenizer(batch, padding=True, truncation=True,
                                   max_length=128, return_tensors="pt")
                return torch.softmax(hf(**inputs).logits, -1).numpy()

        onnx_path = tmp / "bert.onnx"
        example = tokenizer(["a b"], return_tensors="pt")
        names = ["input_ids", "attention_mask", "token_type_ids"]
        torch.onnx.export(
            hf, tuple(example[n] for n in names), str(onnx_path),
            input_names=names, output_names=["logits"], dynamo=False,
            dynamic_axes={n: {0: "batch", 1: "length"} for n in names},
            opset_version=17)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = THREADS
        options.inter_op_num_threads = 1
        session = onnxruntime.InferenceSession(
            str(onnx_path), options, providers=["CPUExecutionProvider"])

        def onnx_runtime(batch):
            inputs = tokenizer(batch, padding=True, truncation=True,
                               max_length=128, return_tensors="np")
            logits = session.run(None, {n: inputs[n].astype(np.int64)
                                        for n in names})[0]
            return logits

        # Same answers first: the four run the same weights.
        check = texts[:8]
        want = hf_eager(check)
        for name, signature in served.items():
            delta = np.abs(ours(signature)(check) - want).max()
            print(f"{name}: max |probability delta| vs HF {delta:.1e}")
        functions = {**{name: ours(s) for name, s in served.items()},
                     "HF transformers eager (PyTorch)": hf_eager,
                     "ONNX Runtime + HF tokenizer": onnx_runtime}
        for name, function in functions.items():
            ms = _batch1(function, texts, args.calls)
            rows[name] = (np.percentile(ms, 50), np.percentile(ms, 99),
                          _throughput(function, texts, args.batches))
        pre = load_exported(out).signatures["preprocess"]
        tokenize_ms = np.percentile(_batch1(
            lambda b: pre(text=tf.constant(b)), texts, args.calls), 50)
    lengths = [len(tokenizer(t)["input_ids"]) for t in texts]
    print(f"\nBERT-Base (random init, same weights everywhere), "
          f"{len(texts)} real RT sentences (mean {np.mean(lengths):.1f} "
          f"pieces with [CLS]/[SEP]), {THREADS} threads each, "
          f"{os.cpu_count()} CPU cores; TF {tf.__version__}, torch "
          f"{torch.__version__}, onnxruntime {onnxruntime.__version__}")
    print(f"{'':<34} {'b1 p50 ms':>10} {'b1 p99 ms':>10} {'b32 sent/s':>11}")
    for name, (p50, p99, rate) in rows.items():
        print(f"{name:<34} {p50:10.2f} {p99:10.2f} {rate:11.1f}")
    ours_p50 = rows["ours, length buckets"][0]
    print(f"tokenize + pack (`preprocess`, fixed 128): {tokenize_ms:.2f} ms "
          f"= {tokenize_ms / ours_p50:.0%} of our bucketed p50; buckets vs "
          f"fixed length: {rows['ours, fixed seq 128'][0] / ours_p50:.1f}x "
          f"lower p50")


if __name__ == "__main__":
    main()
