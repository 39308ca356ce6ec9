"""Where the served graph's time goes: time per op type, op counts and the
oneDNN / Grappler fusions that fire, at batch 1 and batch 32.

A random-init BERT-Base classifier (latency does not depend on the
weights) is exported with `export_model`, loaded the way TF Serving loads
it (a TF1 session over the SavedModel's MetaGraph, Grappler on) and run on
real RT sentences with full tracing. Per op type it prints the summed
time per request and the count; the fused kernels (`_Fused*`, `_Mkl*`)
are listed with what they fused. Also prints the wall-clock p50 of the
same session, untraced; for an int8 export, that p50 over its int8
matmuls' traced time, and the request against its own matmuls untraced
(batch 1 of 25 token rows against the same matmuls alone,
`int8_kernels.py`'s, alternated in this process).

    .venv/bin/python benchmarks/serving_profile.py [--precision fp32]
        [--calls 30] [--top 15] [--export DIR] [--weights-may-change]
        [--intra-op-threads 2]

`--intra-op-threads 1` serves as TF Serving does with
`--tensorflow_intra_op_parallelism=1` (each op on one thread).

The export is written first and profiled in a second process, which serves
fp32 and bf16 exports with `TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1`, as `bert-tf
predict` and a serving container do (`bert_tf.serving.runtime`; int8
exports need no flag). `--weights-may-change` profiles them without it.
"""

import argparse
import collections
import os
import re
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
THREADS = 2

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from bert_tf.checkpoints.layout import model_roots  # noqa: E402
from bert_tf.serving.runtime import FROZEN_WEIGHTS  # noqa: E402
from timing import run_serving_process  # noqa: E402

tf.config.threading.set_intra_op_parallelism_threads(THREADS)
tf.config.threading.set_inter_op_parallelism_threads(THREADS)


def build_export(out, preset="bert_base", precision="fp32"):
    """A random-init classifier of `preset` on the bert-base-uncased vocab
    (the MiniLM sample's), written as a fine-tuning run and exported."""
    import yaml

    from bert_tf import checkpoints
    from bert_tf import samples
    from bert_tf.models.encoder import BertEncoder
    from bert_tf.serving.export import export_model
    from bert_tf.tasks.classification.model import BertClassifier
    from bert_tf.text.vocab import read_vocab

    import keras
    keras.utils.set_random_seed(0)
    vocab = read_vocab(samples.fetch("minilm") / "vocab.txt")
    encoder = BertEncoder.from_preset(preset)
    model = BertClassifier(encoder, 2)
    best = Path(out).parent.parent / "run" / "best"
    best.mkdir(parents=True, exist_ok=True)
    spec = {"kind": "classification", "name": "benchmark",
            "labels": ["negative", "positive"], "pair": False,
            "metrics": ["accuracy"], "seq_length": 128, "lower_case": True,
            "dropout": 0.1, "encoder": vars(encoder.config)}
    (best / "task.yaml").write_text(yaml.safe_dump(spec))
    vocab.save(best / checkpoints.VOCAB_FILE)
    tf.train.Checkpoint(**model_roots(model)).write(
        str(best / checkpoints.WEIGHTS_PREFIX))
    # int8 calibrates on 256 RT sentences (the run has no data of its own).
    from bert_tf.samples.readers import read_rt_snippets
    calibration = best.parent / "calibration.txt"
    calibration.write_text("\n".join(read_rt_snippets()[0][-256:]) + "\n")
    export_model(best.parent, out, log=lambda *a: None, precision=precision,
                 calibration_texts=calibration)
    return Path(out)


def session_config(intra_op_threads):
    """A TF1 session's threads as TF Serving's flags set them."""
    return tf.compat.v1.ConfigProto(
        intra_op_parallelism_threads=intra_op_threads,
        inter_op_parallelism_threads=THREADS)


def load_session(export_dir, intra_op_threads=THREADS):
    """(session, input tensor, output tensors) of `serving_default`, loaded
    as TF Serving loads a SavedModel."""
    import tensorflow_text  # noqa: F401 (registers the tf-text ops)

    graph = tf.Graph()
    session = tf.compat.v1.Session(graph=graph,
                                   config=session_config(intra_op_threads))
    with graph.as_default():
        meta = tf.compat.v1.saved_model.loader.load(
            session, ["serve"], str(export_dir))
    signature = meta.signature_def["serving_default"]
    inputs = {k: graph.get_tensor_by_name(v.name)
              for k, v in signature.inputs.items()}
    outputs = {k: graph.get_tensor_by_name(v.name)
               for k, v in signature.outputs.items()}
    return session, inputs["text"], outputs


_LABEL = re.compile(r"^[^=]+ = ([A-Za-z0-9_]+)\(")


def profile(session, text_input, outputs, batches):
    """{op type: [microseconds per request, nodes per request]} and the
    fused kernels {op type: {fused ops}} over traced runs of `batches`."""
    options = tf.compat.v1.RunOptions(
        trace_level=tf.compat.v1.RunOptions.FULL_TRACE,
        output_partition_graphs=True)
    times = collections.defaultdict(lambda: [0.0, 0])
    fusions = collections.defaultdict(set)
    for batch in batches:
        metadata = tf.compat.v1.RunMetadata()
        session.run(outputs, {text_input: batch}, options=options,
                    run_metadata=metadata)
        for device in metadata.step_stats.dev_stats:
            for node in device.node_stats:
                match = _LABEL.match(node.timeline_label)
                if not match or node.node_name.startswith("_SOURCE"):
                    continue
                entry = times[match.group(1)]
                entry[0] += node.op_end_rel_micros - node.op_start_rel_micros
                entry[1] += 1
        for partition in metadata.partition_graphs:
            for node in partition.node:
                if node.op.startswith(("_Fused", "_Mkl")):
                    fused = [f.decode() for f in node.attr["fused_ops"].list.s]
                    fusions[node.op].add("+".join(fused) or "-")
    runs = len(batches)
    return ({op: [t / runs, n / runs] for op, (t, n) in times.items()},
            fusions)


def wall_p50(session, text_input, outputs, batches):
    """Median wall-clock ms of untraced runs, each batch run once before:
    a server has met its row counts, and a request of a new one builds
    oneDNN primitives (BERT-Base int8 at batch 1 on 2 EPYC cores: about
    1.3 ms more in the first block, 0.7 in the last)."""
    for batch in batches:
        session.run(outputs, {text_input: batch})
    seconds = []
    for batch in batches:
        start = time.perf_counter()
        session.run(outputs, {text_input: batch})
        seconds.append(time.perf_counter() - start)
    return 1e3 * float(np.median(seconds))


def against_matmuls(session, text_input, outputs, export_dir, texts,
                    calls, intra_op_threads):
    """The line of `int8_kernels.against_request` on the session's
    request, its matmuls in a session of the same threads."""
    import int8_kernels

    return int8_kernels.ratio_line(*int8_kernels.against_request(
        lambda text: session.run(
            outputs, {text_input: np.array([text], dtype=object)}),
        export_dir, texts, calls,
        session_config=session_config(intra_op_threads)))


def report(title, times, fusions, wall_ms, top):
    total = sum(t for t, _ in times.values())
    print(f"\n{title}: wall p50 {wall_ms:.1f} ms; traced op time "
          f"{total / 1e3:.1f} ms in {sum(n for _, n in times.values()):.0f} "
          f"nodes per request")
    print(f"  {'op type':<34} {'ms':>8} {'share':>6} {'nodes':>6}")
    for op, (t, n) in sorted(times.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"  {op:<34} {t / 1e3:8.2f} {t / total:6.1%} {n:6.0f}")
    matmuls = times.get("_QuantizedMatMul", (0, 0))
    if matmuls[1]:
        print(f"  int8: the request (wall p50) is "
              f"{wall_ms * 1e3 / matmuls[0]:.2f}x its {matmuls[1]:.0f} int8 "
              f"matmuls' traced time ({matmuls[0] / 1e3:.1f} ms; tracing "
              "slows them, most with 2 threads within an op: "
              "int8_kernels.py times them untraced)")
    print("  fused kernels: " + ("; ".join(
        f"{op} [{', '.join(sorted(f))}]" for op, f in sorted(
            fusions.items())) or "none"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--precision", default="fp32",
                        choices=("fp32", "bf16", "int8"))
    parser.add_argument("--preset", default="bert_base")
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--export", help="profile this export instead of "
                                         "building one")
    parser.add_argument("--weights-may-change", action="store_true",
                        help=f"profile without {FROZEN_WEIGHTS}=1")
    parser.add_argument("--intra-op-threads", type=int, default=THREADS,
                        help="threads within an op when serving")
    args = parser.parse_args()

    from bert_tf.samples.readers import read_rt_snippets

    want = None if args.weights_may_change or args.precision == "int8" \
        else "1"
    if not args.export or os.environ.get(FROZEN_WEIGHTS) != want:
        # Write the export here; profile it in a process that serves only.
        with tempfile.TemporaryDirectory() as tmp:
            export_dir = args.export or build_export(
                Path(tmp) / "export" / "bench" / "1", args.preset,
                args.precision)
            argv = [a for a in sys.argv[1:] if a != "--export"
                    and a != args.export]
            run_serving_process(argv + ["--export", str(export_dir)],
                                frozen_weights=bool(want))
        return
    texts, _ = read_rt_snippets()
    export_dir = Path(args.export)
    tf.config.threading.set_intra_op_parallelism_threads(
        args.intra_op_threads)
    session, text_input, outputs = load_session(export_dir,
                                                args.intra_op_threads)
    print(f"{export_dir}: {args.preset}, {args.precision}; TF "
          f"{tf.__version__}, {args.intra_op_threads} threads within an op"
          f", {THREADS} between, {os.cpu_count()} cores; "
          f"oneDNN {os.environ.get('TF_ENABLE_ONEDNN_OPTS', 'default')}, "
          f"{FROZEN_WEIGHTS}={os.environ.get(FROZEN_WEIGHTS, 'unset')}")
    for size, calls in ((1, args.calls), (32, max(3, args.calls // 6))):
        batches = [np.array(texts[i * size:(i + 1) * size], dtype=object)
                   for i in range(calls)]
        wall = wall_p50(session, text_input, outputs, batches)
        times, fusions = profile(session, text_input, outputs,
                                 batches[:max(2, calls // 3)])
        report(f"batch {size}", times, fusions, wall, args.top)
    if args.precision == "int8":
        print("\n" + against_matmuls(session, text_input, outputs,
                                      export_dir, texts, args.calls,
                                      args.intra_op_threads))


if __name__ == "__main__":
    main()
