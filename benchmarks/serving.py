"""Serving speed side by side, in one run on one machine: our SavedModels
(raw strings in, tokenization in the graph; fp32, bf16 and int8) against
ONNX Runtime (plain, with its transformer fusions, and int8 by
`quantize_dynamic` of the fused graph), OpenVINO (fp32, its default
precision, and int8 by NNCF's post-training quantization on RT sentences)
and HF transformers in PyTorch, on real inputs and the same weights: a
random BERT-Base, and the real MiniLM-L6 (all-MiniLM-L6-v2 with a random
classifier head), where fixed per-request costs show most.

- Classification: real RT sentences; batch-1 p50/p99 (ms, tokenization
  included) and batch-32 sentences per second. Then the int8 export's
  batch-1 request against its own matmuls alone, at 25 token rows,
  alternated (`int8_kernels.against_request`).
- Extractive QA (seq 384 windows, stride 128) and NER: real WNUT
  questions over their tweets, and real WNUT tweets, beside HF's
  `question-answering` and `token-classification` pipelines; batch-1
  p50/p99 and batch-32 items per second (`serving_tasks.py`).

The weights are random (latency does not depend on them): a BERT-Base
built in HF transformers, saved as safetensors and imported by our HF
importer, so every runtime runs the same numbers (checked first). Every
runtime gets 2 threads and the bert-base-uncased vocab; the peers tokenize
with `BertTokenizerFast` at the natural length. Run it in the bench
environment (`make bench`), which has torch, transformers, onnxruntime and
openvino:

    .venv-bench/bin/python benchmarks/serving.py [--calls 300]
        [--batches 20] [--skip-tasks | --tasks-only]
        [--intra-op-threads 2]

`--intra-op-threads 1` serves our rows as TF Serving does with
`--tensorflow_intra_op_parallelism=1`: each op on one thread (a small
model's ops at batch 1 lose more to handing work to a second thread than
they gain); the peers keep their 2 threads.

The exports are written first, in a process of their own; a second
process, started with
`TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1` as `bert-tf predict` and a serving
container serve them (`bert_tf.serving.runtime`), times every row, peers
included, in interleaved rounds (each row takes its turn in every round),
so that every ratio is between rows of one process as deployed. Our rows
add the nodes one request executes, counted as TF Serving runs the graph
(`timing.executed_nodes`).
"""

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
THREADS = 2

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from bert_tf.checkpoints.layout import model_roots  # noqa: E402
from serving_tasks import print_rows, qa_and_ner  # noqa: E402
from timing import (executed_nodes, interleaved_latencies,  # noqa: E402
                    interleaved_rates, run_serving_process)

# Threads within an op: set in `main` (`--intra-op-threads`).
tf.config.threading.set_inter_op_parallelism_threads(THREADS)


def _hf_models(directory):
    """Random BERT-Base classification, QA and token-classification models
    sharing one encoder, each saved as HF safetensors."""
    import torch
    from transformers import (BertConfig, BertForQuestionAnswering,
                              BertForSequenceClassification,
                              BertForTokenClassification)

    from bert_tf import samples
    from bert_tf.samples.readers import TYPES

    torch.manual_seed(0)
    labels = ["O"] + [f"{p}-{t}" for t in TYPES for p in "BI"]
    models = {"classification": BertForSequenceClassification(
        BertConfig(num_labels=2))}
    encoder = models["classification"].bert.state_dict()
    models["span_qa"] = BertForQuestionAnswering(BertConfig())
    models["tagging"] = BertForTokenClassification(BertConfig(
        num_labels=len(labels), id2label=dict(enumerate(labels)),
        label2id={t: i for i, t in enumerate(labels)}))
    for kind, model in models.items():
        model.bert.load_state_dict(encoder, strict=False)
        model.eval().save_pretrained(directory / kind)
    minilm = samples.fetch("minilm")
    BertForSequenceClassification.from_pretrained(
        minilm, num_labels=2).eval().save_pretrained(directory / "minilm")
    BertForQuestionAnswering.from_pretrained(minilm).eval().save_pretrained(
        directory / "minilm_span_qa")
    BertForTokenClassification.from_pretrained(
        minilm, num_labels=len(labels), id2label=dict(enumerate(labels)),
        label2id={t: i for i, t in enumerate(labels)}).eval(
    ).save_pretrained(directory / "minilm_tagging")
    return models, labels


def _load_hf_models(directory):
    """The models `_hf_models` saved in `directory`."""
    from transformers import (BertForQuestionAnswering,
                              BertForSequenceClassification,
                              BertForTokenClassification)

    models = {kind: cls.from_pretrained(directory / kind).eval()
              for kind, cls in (("classification",
                                 BertForSequenceClassification),
                                ("span_qa", BertForQuestionAnswering),
                                ("tagging", BertForTokenClassification),
                                ("minilm", BertForSequenceClassification),
                                ("minilm_span_qa", BertForQuestionAnswering),
                                ("minilm_tagging",
                                 BertForTokenClassification))}
    return models


# Our exports: directory name -> (HF model, kind, precision, fixed length).
EXPORTS = {
    "ours fp32, padding cut": ("classification", "classification", "fp32",
                               False),
    "ours bf16, padding cut": ("classification", "classification", "bf16",
                               False),
    "ours int8, padding cut": ("classification", "classification", "int8",
                               False),
    "ours fp32, fixed seq 128": ("classification", "classification", "fp32",
                                 True),
    "span_qa: ours fp32": ("span_qa", "span_qa", "fp32", False),
    "span_qa: ours bf16": ("span_qa", "span_qa", "bf16", False),
    "span_qa: ours int8": ("span_qa", "span_qa", "int8", False),
    "tagging: ours fp32": ("tagging", "tagging", "fp32", False),
    "tagging: ours bf16": ("tagging", "tagging", "bf16", False),
    "tagging: ours int8": ("tagging", "tagging", "int8", False),
    "minilm: ours fp32": ("minilm", "classification", "fp32", False),
    "minilm: ours bf16": ("minilm", "classification", "bf16", False),
    "minilm: ours int8": ("minilm", "classification", "int8", False),
    "minilm span_qa: ours fp32": ("minilm_span_qa", "span_qa", "fp32", False),
    "minilm span_qa: ours bf16": ("minilm_span_qa", "span_qa", "bf16", False),
    "minilm span_qa: ours int8": ("minilm_span_qa", "span_qa", "int8", False),
    "minilm tagging: ours fp32": ("minilm_tagging", "tagging", "fp32", False),
    "minilm tagging: ours bf16": ("minilm_tagging", "tagging", "bf16", False),
    "minilm tagging: ours int8": ("minilm_tagging", "tagging", "int8", False),
}
# The classification blocks: title -> (HF model, our exports' prefix).
BLOCKS = {"BERT-Base": ("classification", "ours"),
          "MiniLM-L6": ("minilm", "minilm: ours")}


def _export_dir(root, name):
    return root / "export" / name.replace(" ", "_").replace(",", "").replace(
        ":", "") / "1"


def write_exports(root, vocab_path, labels, bf16, tables):
    """Writes each of EXPORTS this run times under `root` (in this
    process, whose weights change while the exports are built): those of
    classification and of the other kinds as `tables` ({"classification",
    "tasks"}) asks."""
    from bert_tf.samples.readers import read_rt_snippets

    # int8 calibrates on 256 RT sentences the timing never sends.
    calibration = root / "calibration.txt"
    calibration.write_text("\n".join(read_rt_snippets()[0][-256:]) + "\n")
    for name, (hf_name, kind, precision, fixed) in EXPORTS.items():
        if (precision == "bf16" and not bf16) or (
                ("classification" if kind == "classification" else "tasks")
                not in tables):
            continue
        _our_export(root / "hf", hf_name, vocab_path, _export_dir(root, name),
                    kind, precision, fixed, labels=labels,
                    calibration=calibration)


def _our_export(hf_root, hf_name, vocab_path, out, kind, precision="fp32",
                fixed_length=False, labels=(), calibration=None):
    """Our export of kind `kind` with the HF models' weights (the shared
    encoder through the HF importer, the kind's head copied), written as a
    fine-tuning run and exported."""
    import yaml
    from safetensors.numpy import load_file

    from bert_tf import checkpoints
    from bert_tf.serving.export import export_model
    from bert_tf.tasks.classification.model import BertClassifier
    from bert_tf.tasks.span_qa.model import BertSpanLabeler
    from bert_tf.tasks.tagging.model import BertTokenClassifier

    run = out.parent.parent / f"run_{out.parent.name}"
    best = run / "best"
    # BERT-Base's kinds share the classifier's encoder (QA and NER models
    # have no pooler); MiniLM is its own.
    encoder_source = "minilm" if hf_name.startswith("minilm") else \
        "classification"
    pretrained = checkpoints.convert("hf", hf_root / encoder_source,
                                     run / "encoder", vocab_path=vocab_path,
                                     log=lambda *a: None)
    state = load_file(str(hf_root / hf_name / "model.safetensors"))
    spec = {"kind": kind, "name": "benchmark", "seq_length": 128,
            "lower_case": True, "dropout": 0.1,
            "encoder": vars(pretrained.encoder.config)}
    if kind == "classification":
        model = BertClassifier(pretrained.encoder, 2)
        head = model.head.dense
        spec.update(labels=["negative", "positive"], metrics=["accuracy"])
        weights = state["classifier.weight"], state["classifier.bias"]
    elif kind == "span_qa":
        model = BertSpanLabeler(pretrained.encoder)
        head = model.head.dense
        spec.update(seq_length=384, doc_stride=128, version_2=True)
        weights = state["qa_outputs.weight"], state["qa_outputs.bias"]
    else:
        model = BertTokenClassifier(pretrained.encoder, len(labels))
        head = model.head.dense
        spec.update(labels=list(labels))
        weights = state["classifier.weight"], state["classifier.bias"]
    head.set_weights([weights[0].T, weights[1]])
    best.mkdir(parents=True, exist_ok=True)
    (best / "task.yaml").write_text(yaml.safe_dump(spec))
    pretrained.vocab.save(best / "vocab.txt")
    tf.train.Checkpoint(**model_roots(model)).write(
        str(best / "model.ckpt"))
    # BERT-Base QA's default limit is 14 windows of 384 a request (its
    # worst case by time): the batch-32 rows raise it, as a user would.
    export_model(run, out, log=lambda *a: None, fixed_length=fixed_length,
                 precision=precision, calibration_texts=calibration,
                 max_batch_rows=32)
    return out


def _onnx_sessions(hf, tokenizer, directory, texts):
    """{name: function(batch of texts) -> logits} of ONNX Runtime (plain,
    transformer-fused, and int8 by `quantize_dynamic` of the fused graph)
    and OpenVINO (fp32, its default precision, and int8 by NNCF's
    post-training quantization on 300 of `texts`) on the HF classifier
    exported to ONNX."""
    import nncf
    import onnxruntime
    import openvino
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers import optimizer

    names = ["input_ids", "attention_mask", "token_type_ids"]
    directory.mkdir(parents=True, exist_ok=True)
    plain = directory / "bert.onnx"
    example = tokenizer(["a b"], return_tensors="pt")
    torch.onnx.export(
        hf, tuple(example[n] for n in names), str(plain),
        input_names=names, output_names=["logits"], dynamo=False,
        dynamic_axes={n: {0: "batch", 1: "length"} for n in names},
        opset_version=17)
    fused = directory / "bert_fused.onnx"
    optimizer.optimize_model(
        str(plain), model_type="bert", num_heads=hf.config.num_attention_heads,
        hidden_size=hf.config.hidden_size).save_model_to_file(str(fused))
    int8 = directory / "bert_fused_int8.onnx"
    # The fused graph's contrib ops have no inferred types: say float.
    quantize_dynamic(str(fused), str(int8), weight_type=QuantType.QInt8,
                     extra_options={"DefaultTensorType": 1})

    def tokenized(batch):
        inputs = tokenizer(batch, padding=True, truncation=True,
                           max_length=128, return_tensors="np")
        return {n: inputs[n].astype(np.int64) for n in names}

    def ort(path):
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = THREADS
        options.inter_op_num_threads = 1
        session = onnxruntime.InferenceSession(
            str(path), options, providers=["CPUExecutionProvider"])
        return lambda batch: session.run(None, tokenized(batch))[0]

    core = openvino.Core()
    model = core.read_model(str(plain))

    def ov(hint):
        config = {"INFERENCE_NUM_THREADS": THREADS,
                  "PERFORMANCE_HINT": "LATENCY"}
        if hint:
            config["INFERENCE_PRECISION_HINT"] = hint
        compiled = core.compile_model(model, "CPU", config)
        precision = compiled.get_property("INFERENCE_PRECISION_HINT")
        return (lambda batch: compiled(tokenized(batch))[0]), str(precision)

    ov_f32, _ = ov("f32")
    ov_default, default_precision = ov(None)
    model = nncf.quantize(
        model, nncf.Dataset(texts[-300:], lambda text: tokenized([text])),
        model_type=nncf.ModelType.TRANSFORMER, subset_size=300)
    ov_int8, _ = ov(None)
    return {"ONNX Runtime": ort(plain),
            "ONNX Runtime, fused graph": ort(fused),
            "ONNX Runtime int8 (fused, dynamic)": ort(int8),
            "OpenVINO fp32": ov_f32,
            f"OpenVINO default ({default_precision})": ov_default,
            "OpenVINO int8 (NNCF)": ov_int8}, (
        onnxruntime.__version__, openvino.__version__, nncf.__version__)


def classification(args, tmp, hf, tokenizer, texts, bf16, prefix="ours"):
    """Rows of a classification table: our exports named `prefix ...`
    beside the peers on the HF model `hf`, timed in interleaved rounds;
    {name: (p50, p99, sentences/s, nodes or None)}, the peers' versions,
    and the int8 export's request against its own matmuls (a line, or
    None without one)."""
    import torch

    import int8_kernels
    from bert_tf.samples.readers import read_rt_snippets
    from bert_tf.serving.export import load_exported

    served, nodes = {}, {}
    for name, (_, kind, precision, fixed) in EXPORTS.items():
        if kind != "classification" or (precision == "bf16" and not bf16) \
                or not name.startswith(prefix + " "):
            continue
        path = _export_dir(tmp, name)
        nodes[name] = executed_nodes(path, {"text": [texts[0]]})
        signature = load_exported(path).signatures["serving_default"]
        served[name] = (lambda s: lambda batch: s(text=tf.constant(batch))[
            "logits"].numpy())(signature)

    def hf_eager(batch):
        with torch.inference_mode():
            inputs = tokenizer(batch, padding=True, truncation=True,
                               max_length=128, return_tensors="pt")
            return hf(**inputs).logits.numpy()

    peers, versions = _onnx_sessions(
        hf, tokenizer, tmp / f"onnx_{prefix.split(':')[0]}", texts)
    functions = {**served, "HF transformers eager (PyTorch)": hf_eager,
                 **peers}
    check = texts[:8]
    want = hf_eager(check)
    for name, function in functions.items():
        delta = np.abs(function(check) - want).max()
        print(f"{name}: max |logit delta| vs HF {delta:.1e}")
    latencies = interleaved_latencies(
        {name: (lambda f: lambda text: f([text]))(function)
         for name, function in functions.items()}, texts, args.calls,
        args.rounds)
    rates = interleaved_rates(
        functions, [texts[i * 32:(i + 1) * 32] for i in range(args.batches)],
        args.rounds)
    int8 = next((name for name in served
                 if name.startswith(f"{prefix} int8")), None)
    int8_line = int8 and int8_kernels.ratio_line(
        *int8_kernels.against_request(
            lambda text: served[int8]([text]), _export_dir(tmp, int8),
            read_rt_snippets()[0], args.calls // 2))
    return {name: (np.percentile(ms, 50), np.percentile(ms, 99),
                   rates[name], nodes.get(name))
            for name, ms in latencies.items()}, versions, int8_line


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5,
                        help="interleaved timing rounds (default 5)")
    tables = parser.add_mutually_exclusive_group()
    tables.add_argument("--skip-tasks", action="store_true",
                        help="classification only (no QA / NER rows)")
    tables.add_argument("--tasks-only", action="store_true",
                        help="QA and NER only (no classification rows)")
    parser.add_argument("--intra-op-threads", type=int, default=THREADS,
                        help="TensorFlow's threads within one op, for our "
                        "rows (TF Serving's --tensorflow_intra_op_"
                        f"parallelism); the peers keep {THREADS} (default "
                        f"{THREADS})")
    parser.add_argument("--exports", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--write-to", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    tables = {"classification", "tasks"} - (
        {"tasks"} if args.skip_tasks else
        {"classification"} if args.tasks_only else set())
    # Before TensorFlow's first op: the pool is made once per process.
    tf.config.threading.set_intra_op_parallelism_threads(
        args.intra_op_threads)

    import torch
    from transformers import BertTokenizerFast

    from bert_tf import samples
    from bert_tf.samples.readers import read_rt_snippets
    from bert_tf.precision import cpu_bf16_flags

    vocab_path = samples.fetch("minilm") / "vocab.txt"
    bf16 = bool(cpu_bf16_flags())
    if args.write_to is not None:
        _, labels = _hf_models(args.write_to / "hf")
        write_exports(args.write_to, vocab_path, labels, bf16,
                      tables)
        return
    if args.exports is None:
        # Written in one process, timed in another: the writer ends at
        # about 10 GB resident (every export's model), which the timing
        # process must not share the machine with.
        with tempfile.TemporaryDirectory() as tmp:
            run_serving_process([*sys.argv[1:], "--write-to", tmp],
                                frozen_weights=False)
            run_serving_process([*sys.argv[1:], "--exports", tmp],
                                frozen_weights=True)
        return

    torch.set_num_threads(THREADS)
    tokenizer = BertTokenizerFast(str(vocab_path), do_lower_case=True)
    texts, _ = read_rt_snippets()
    texts = list(texts[:args.batches * 32])
    tmp = args.exports
    models = _load_hf_models(tmp / "hf")
    for title, (hf_name, prefix) in BLOCKS.items():
        if "classification" not in tables:
            break
        rows, versions, int8_line = classification(
            args, tmp, models[hf_name], tokenizer, texts, bf16, prefix)
        _print_header(title, texts, tokenizer, versions,
                      args.intra_op_threads)
        print(f"{'':<38} {'b1 p50 ms':>10} {'b1 p99 ms':>10} "
              f"{'b32 sent/s':>11} {'nodes':>6}")
        for name, (p50, p99, rate, nodes) in rows.items():
            print(f"{name:<38} {p50:10.2f} {p99:10.2f} {rate:11.1f} "
                  f"{nodes or '':>6}", flush=True)
        if int8_line:
            print(int8_line, flush=True)
    if "tasks" in tables:
        print_rows(qa_and_ner(
            args, lambda name: _export_dir(tmp, name), models, tokenizer,
            ("fp32", "bf16", "int8") if bf16 else ("fp32", "int8")))


def _print_header(title, texts, tokenizer, versions, intra_op_threads):
    import torch
    import transformers

    from bert_tf.precision import cpu_bf16_flags, cpu_int8_flags

    lengths = [len(tokenizer(t)["input_ids"]) for t in texts]
    print(f"\n{title} (same weights everywhere), "
          f"{len(texts)} real RT sentences (mean {np.mean(lengths):.1f} "
          f"pieces with [CLS]/[SEP]), {THREADS} threads each; "
          f"{platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, bf16 flags: "
          f"{', '.join(cpu_bf16_flags()) or 'none'}, int8 flags: "
          f"{', '.join(cpu_int8_flags()) or 'none'}; TF {tf.__version__}, "
          f"torch {torch.__version__}, transformers "
          f"{transformers.__version__}, onnxruntime {versions[0]}, "
          f"openvino {versions[1]}, nncf {versions[2]}; {THREADS} threads, "
          f"ours {intra_op_threads} within an op; "
          f"one process, TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1; "
          f"{time.strftime('%Y-%m-%d')}")


if __name__ == "__main__":
    main()
