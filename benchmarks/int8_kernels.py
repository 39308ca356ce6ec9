"""The matmul kernels alone, the floor of a request: BERT-Base's 48 matmuls
(or MiniLM's 24) of one request, in int8 on oneDNN's kernel through
`_QuantizedMatMul` (what our int8 exports run,
`bert_tf.layers.int8.Int8Dense`) and on ONNX Runtime's (MLAS, a
dynamically quantized graph); in fp32 on TF (oneDNN) and ONNX Runtime
(MLAS); in bf16 on TF (oneDNN, bf16 weights and activations, as our bf16
exports run) and OpenVINO (the same ONNX graph, `INFERENCE_PRECISION_HINT`
bf16, its default on AMX).

Each layer is qkv (H -> 3H), attention output (H -> H, its input the
first H columns), feed-forward in (H -> 4H) and out (4H -> H), chained
through the layers: the matmul work of one request of M token rows,
without attention, norms or anything else. Random weights (std
1 / sqrt(in), so values keep their scale); our int8 inputs use a fixed
range, as calibrated exports do, which is cheaper than ONNX Runtime's
per-call range. All on 2 threads (`--threads`); TF's fp32 and bf16 with
`TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1`, as served.

    .venv-bench/bin/python benchmarks/int8_kernels.py [--rows 12 24 48]
        [--calls 200] [--shape bert_base|minilm] [--precisions int8 fp32 bf16]
        [--threads 2] [--column-parts 1]
    .venv-bench/bin/python benchmarks/int8_kernels.py --meetings --rows 25

`--threads 1` runs every kernel on one thread (TF's as with TF Serving's
`--tensorflow_intra_op_parallelism=1`; the peers' too). `--column-parts 2`
runs each of TF's matmuls as two on its kernel's column halves (the
feed-forward output's on its row halves, the products added), side by
side on the inter-op threads, as exports run them.

Prints the p50 per request of each. Needs `onnx`, `onnxruntime` and
`openvino` (the bench environment, `make bench`); bf16 only on a CPU with
AVX512_BF16 or AMX (elsewhere it is emulated, and skipped).

`--meetings` asks what a block's two threads pay where they meet
(`meeting_costs`): TensorFlow's executor runs small ops on the thread
that readied them, so the other one sits idle through the layer norm
after each output layer until it takes its half of the next matmul
(docs/benchmarks.md: the norms there cost a request about 0.9 ms).

`against_request` times an int8 export's batch-1 request against these
matmuls at its rows, alternated in one process (`serving.py` and
`serving_profile.py` print it).
"""

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
THREADS = 2

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from bert_tf import precision  # noqa: E402
from bert_tf.layers import int8  # noqa: E402
from bert_tf.layers.norm import LayerNorm, served_layer_norm  # noqa: E402

# (hidden width, layers) of each shape.
MODEL_SHAPES = {"bert_base": (768, 12), "minilm": (384, 6)}
INPUT_RANGE = (-4.0, 4.0)
# The token rows at which a request is timed against its matmuls
# (`against_request`; RT sentences: median 26, 339 of them at 25).
REQUEST_ROWS = 25


def random_weights(hidden, layers, seed=0):
    """[(kernel [in, out], bias [out])] for `layers` layers of four
    matmuls (qkv, attention output, feed-forward in and out)."""
    shapes = ((hidden, 3 * hidden), (hidden, hidden),
              (hidden, 4 * hidden), (4 * hidden, hidden))
    rng = np.random.default_rng(seed)
    return [(rng.normal(0, n_in ** -0.5, (n_in, n_out)).astype(np.float32),
             rng.normal(0, 0.02, n_out).astype(np.float32))
            for _ in range(layers) for n_in, n_out in shapes]


def chain(matmuls, x, first_columns, after_outputs=None):
    """The matmuls in order; after each qkv, its first H columns (of each
    of its parts, as a list, where it hands them on in parts); after each
    output layer (the attention's, the feed-forward's), `after_outputs`
    of its rows, if given."""
    for index, matmul in enumerate(matmuls):
        x = matmul(x)
        if index % 4 == 0:
            x = [first_columns(part, len(x)) for part in x] if isinstance(
                x, list) else first_columns(x, 1)
        elif index % 2 and after_outputs is not None:
            x = after_outputs(x)
    return x


def served_norm(hidden):
    """A block's layer norm as served (`bert_tf.layers.norm.
    served_layer_norm`, gamma and beta constants of the graph): a function
    of rows [n, hidden]."""
    norm = LayerNorm(epsilon=1e-12)
    norm.build((None, hidden))
    rng = np.random.default_rng(2)
    values = [(norm.gamma, rng.uniform(0.5, 1.5, hidden)),
              (norm.beta, rng.normal(0, 0.1, hidden))]

    # Not `bert_tf.models.served.vectors_as_constants`: it reads the
    # values when traced, which the TF1 graphs of `meeting_costs` cannot.
    def normalized(rows):
        with keras.StatelessScope(state_mapping=[
                (v, tf.constant(value, tf.float32)) for v, value in values]):
            return served_layer_norm(norm, rows)
    return normalized


def tensorflow_request(weights, precision, parts=1, norms=False):
    """TF's matmuls as exports run them (`bert_tf.models.served.
    SplitMatmuls`): each as `parts` matmuls, the query/key/value's and the
    feed-forward input's on their kernels' column slices (head groups:
    random weights, so any columns time alike), each handing its parts to
    the next layer, which multiplies each by its rows of the kernel and
    adds the products. `norms`: with a served layer norm after each output
    layer, as in a block (where its two threads meet)."""
    hidden = weights[0][0].shape[0]
    layers = []
    for index, (kernel, bias) in enumerate(weights):
        hands_parts = parts > 1 and index % 4 in (0, 2)
        if precision == "int8":
            quantized, scale = int8.quantize_kernel(kernel)
            layer = int8.Int8Dense(quantized, scale, bias,
                                   input_range=INPUT_RANGE)
            layers.append(lambda x, layer=layer, hands=hands_parts: (
                layer._sliced_input_matmul(x) if isinstance(x, list) else
                layer._rows_matmul(x, column_parts=parts,
                                   output_parts=hands)))
        else:
            dtype = tf.bfloat16 if precision == "bf16" else tf.float32
            layers.append(lambda x, k=kernel, b=bias, hands=hands_parts: _float(
                x, tf.constant(k, dtype), tf.constant(b, dtype), parts,
                hands))

    after_outputs = served_norm(hidden) if norms else None

    def request(x):
        x = chain(layers, tf.cast(x, tf.bfloat16) if precision == "bf16"
                  else x, lambda y, parts: y[:, :hidden // parts],
                  after_outputs)
        return tf.cast(x, tf.float32)
    return tf.function(request)


def _float(x, kernel, bias, parts, hands_parts):
    """A float matmul on `x` (or its column parts, each on its rows of the
    kernel, added), as `parts` column slices (a list if `hands_parts`)."""
    if isinstance(x, list):  # each adds a share of the bias, as served
        share = bias * tf.cast(1.0 / len(x), bias.dtype)
        outs = [tf.nn.bias_add(tf.matmul(part, kernel_rows), share)
                for part, kernel_rows in zip(x, tf.split(kernel, len(x)))]
        return sum(outs[1:], outs[0])
    outs = [tf.nn.bias_add(tf.matmul(x, k), b) for k, b in zip(
        tf.split(kernel, parts, axis=1), tf.split(bias, parts))]
    return outs if hands_parts else tf.concat(outs, axis=-1)


def onnx_graph(weights, directory):
    """The matmuls as an ONNX file; returns its path."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    hidden = weights[0][0].shape[0]

    nodes, initializers, x = [], [], "x"
    initializers.append(numpy_helper.from_array(
        np.array([0], np.int64), "zero"))
    initializers.append(numpy_helper.from_array(
        np.array([hidden], np.int64), "hidden"))
    initializers.append(numpy_helper.from_array(
        np.array([1], np.int64), "axis"))
    for index, (kernel, bias) in enumerate(weights):
        initializers += [numpy_helper.from_array(kernel, f"w{index}"),
                         numpy_helper.from_array(bias, f"b{index}")]
        nodes += [helper.make_node("MatMul", [x, f"w{index}"], [f"m{index}"]),
                  helper.make_node("Add", [f"m{index}", f"b{index}"],
                                   [f"y{index}"])]
        x = f"y{index}"
        if index % 4 == 0:
            nodes.append(helper.make_node(
                "Slice", [x, "zero", "hidden", "axis"], [f"s{index}"]))
            x = f"s{index}"
    graph = helper.make_graph(
        nodes, "matmuls",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, hidden])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [None, hidden])],
        initializers)
    model = helper.make_model(graph,
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = os.path.join(directory, "matmuls.onnx")
    onnx.save(model, path)
    return path


def onnx_request(path, quantized):
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    if quantized:
        quantize_dynamic(path, path + ".int8.onnx",
                         weight_type=QuantType.QInt8)
        path += ".int8.onnx"
    options = ort.SessionOptions()
    options.intra_op_num_threads = THREADS
    session = ort.InferenceSession(path, options,
                                   providers=["CPUExecutionProvider"])
    return lambda x: session.run(None, {"x": x})[0]


def openvino_request(path, precision):
    import openvino

    compiled = openvino.Core().compile_model(path, "CPU", {
        "INFERENCE_NUM_THREADS": THREADS, "PERFORMANCE_HINT": "LATENCY",
        "INFERENCE_PRECISION_HINT": precision})
    return lambda x: compiled({"x": x})[0]


def matmul_requests(weights, precisions, directory, parts=1):
    """{column name: a request's matmuls} for each precision asked."""
    path = onnx_graph(weights, directory)
    runs = {}
    if "int8" in precisions:
        runs["TF int8 (_QuantizedMatMul)"] = tensorflow_request(
            weights, "int8", parts)
        runs["ONNX Runtime int8"] = onnx_request(path, True)
    if "fp32" in precisions:
        runs["TF fp32"] = tensorflow_request(weights, "fp32", parts)
        runs["ONNX Runtime fp32"] = onnx_request(path, False)
    if "bf16" in precisions:
        runs["TF bf16"] = tensorflow_request(weights, "bf16", parts)
        runs["OpenVINO bf16"] = openvino_request(path, "bf16")
    return runs


def sentences_of_rows(export_dir, texts, rows):
    """The texts whose batch-1 request has `rows` token rows ([CLS],
    pieces, [SEP]) by the export's own vocab."""
    from bert_tf.text.tokenizer import BertTokenizer

    tokenizer = BertTokenizer(str(Path(export_dir) / "assets" / "vocab.txt"))
    lengths = tokenizer(tf.constant(texts)).row_lengths().numpy() + 2
    return [text for text, length in zip(texts, lengths) if length == rows]


def against_request(request, export_dir, texts, calls, session_config=None):
    """(request p50 ms, matmuls' p50 ms, matmul count) at batch 1: an int8
    export's request (`request(text)`, as served) over the `texts` of
    `REQUEST_ROWS` token rows, and the export's block matmuls at those rows
    alone, as exports run them (`tensorflow_request(..., parts=2)`:
    random weights of the export's shape, a fixed input range),
    alternated in rounds in one process, so that a slow spell of the host
    falls on both alike. The matmuls run as a `tf.function`, or in a TF1
    session of `session_config` (to match a request served so). The
    request's last block may run on [CLS] alone: its own matmuls are then
    a little less than these."""
    from timing import interleaved_latencies

    encoder = json.loads((Path(export_dir) / "assets.extra" /
                          "bert_tf.json").read_text())["encoder"]
    hidden, layers = encoder["hidden_size"], encoder["num_layers"]
    chain = tensorflow_request(random_weights(hidden, layers), "int8", 2)
    x = np.random.default_rng(1).uniform(
        -2, 2, (REQUEST_ROWS, hidden)).astype(np.float32)
    matmuls = lambda _: chain(x)  # noqa: E731
    if session_config is not None:
        graph = tf.Graph()
        with graph.as_default():
            fed = tf.compat.v1.placeholder(tf.float32, (None, hidden))
            out = chain.python_function(fed)
        session = tf.compat.v1.Session(graph=graph, config=session_config)
        matmuls = lambda _: session.run(out, {fed: x})  # noqa: E731
    ms = interleaved_latencies(
        {"request": request, "matmuls": matmuls},
        sentences_of_rows(export_dir, texts, REQUEST_ROWS)[:calls], 2 * calls,
        rounds=10)
    return (float(np.median(ms["request"])), float(np.median(ms["matmuls"])),
            4 * layers)


def meeting_costs(hidden, layers, rows, calls):
    """What a block's two threads pay where they meet (after each output
    layer), at batch 1: {(inter-op threads, norms): p50 ms} of the int8
    matmuls run as exports run them (two parts, one thread within an op),
    without and with a served layer norm at each meeting, in TF1 sessions
    of 1 and of 2 inter-op threads, alternated in rounds. On one thread
    the norms add only their own time; on two, also the wait for the
    idle thread to take its half of the next matmul."""
    from timing import interleaved_latencies

    weights = random_weights(hidden, layers)
    x = np.random.default_rng(1).uniform(
        -2, 2, (rows, hidden)).astype(np.float32)
    runs = {}
    for norms in (False, True):
        request = tensorflow_request(weights, "int8", 2, norms)
        graph = tf.Graph()
        with graph.as_default():
            fed = tf.compat.v1.placeholder(tf.float32, (None, hidden))
            out = request.python_function(fed)
        for threads in (1, 2):
            session = tf.compat.v1.Session(
                graph=graph, config=tf.compat.v1.ConfigProto(
                    intra_op_parallelism_threads=1,
                    inter_op_parallelism_threads=threads,
                    use_per_session_threads=True))  # not the first's pool
            runs[threads, norms] = (
                lambda _, session=session, out=out, fed=fed:
                session.run(out, {fed: x}))
    ms = interleaved_latencies(runs, [None], calls, rounds=10)
    return {key: float(np.median(ms[key])) for key in runs}


def meeting_lines(costs, layers):
    """The lines that state `meeting_costs`'s figures."""
    meetings = 2 * layers
    lines = []
    for threads in (1, 2):
        plain, normed = costs[threads, False], costs[threads, True]
        lines.append(f"  {threads} inter-op thread{'s'[:threads - 1]}: "
                     f"matmuls {plain:.2f} ms, with a norm at each of the "
                     f"{meetings} meetings {normed:.2f} ms ("
                     f"{1e3 * (normed - plain) / meetings:+.0f} us each)")
    wait = (costs[2, True] - costs[2, False] - costs[1, True] +
            costs[1, False]) / meetings
    lines.append(f"  the wait beyond the norm's own ops: {1e3 * wait:+.0f} "
                 f"us a meeting, {wait * meetings:.2f} ms a request")
    return lines


def ratio_line(request_ms, matmuls_ms, count):
    """The line that states `against_request`'s figures."""
    return (f"int8 against its matmuls, untraced, alternated: batch 1 of "
            f"{REQUEST_ROWS} token rows p50 {request_ms:.2f} ms, its "
            f"{count} matmuls alone at {REQUEST_ROWS} rows "
            f"{matmuls_ms:.2f} ms: {request_ms / matmuls_ms:.2f}x")


def p50_ms(run, x, calls):
    for _ in range(20):
        run(x)
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        run(x)
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e3


def main():
    global THREADS
    # fp32 as served: oneDNN keeps each matmul's packed weights (read at
    # the first matmul; not on import, for scripts that serve int8).
    os.environ.setdefault("TF_ONEDNN_ASSUME_FROZEN_WEIGHTS", "1")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[12, 24, 48],
                        help="token rows per request (a batch-1 RT "
                        "sentence is 9 to 53)")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--shape", choices=sorted(MODEL_SHAPES),
                        default="bert_base")
    parser.add_argument("--precisions", nargs="+", default=["int8", "fp32"],
                        choices=["int8", "fp32", "bf16"])
    parser.add_argument("--threads", type=int, default=THREADS,
                        help="threads within each kernel (default 2)")
    parser.add_argument("--column-parts", type=int, default=1,
                        help="TF's matmuls each as this many on column "
                        "slices (the feed-forward output's on row slices), "
                        "run side by side on 2 inter-op threads (2: as "
                        "exports run them)")
    parser.add_argument("--meetings", action="store_true",
                        help="instead: the int8 matmuls at batch 1 as "
                        "exports run them, without and with a layer norm "
                        "where a block's two threads meet, on 1 and 2 "
                        "inter-op threads (`meeting_costs`)")
    args = parser.parse_args()
    if args.meetings:
        if not int8.available():
            raise SystemExit("this TensorFlow has no _QuantizedMatMul "
                             "(oneDNN builds only)")
        hidden, layers = MODEL_SHAPES[args.shape]
        for rows in args.rows:
            print(f"{args.shape}, {rows} token rows, one thread within an "
                  f"op, p50 of {args.calls} calls:")
            print("\n".join(meeting_lines(meeting_costs(
                hidden, layers, rows, args.calls), layers)))
        return
    THREADS = args.threads
    tf.config.threading.set_intra_op_parallelism_threads(THREADS)
    tf.config.threading.set_inter_op_parallelism_threads(2)
    if "int8" in args.precisions and not int8.available():
        raise SystemExit("this TensorFlow has no _QuantizedMatMul (oneDNN "
                         "builds only)")
    if "bf16" in args.precisions and not precision.BF16.native():
        print("bf16 skipped: this CPU has neither AVX512_BF16 nor AMX "
              "(bf16 would be emulated)")
        args.precisions.remove("bf16")
    hidden, layers = MODEL_SHAPES[args.shape]
    weights = random_weights(hidden, layers)
    with tempfile.TemporaryDirectory() as directory:
        runs = matmul_requests(weights, args.precisions, directory,
                               args.column_parts)
        rng = np.random.default_rng(1)
        print(f"{args.shape}'s {4 * layers} matmuls of one request, p50 ms "
              f"({args.calls} calls, {THREADS} threads, TF's in "
              f"{args.column_parts} column parts)")
        print(f"{'rows':>5}  " + "  ".join(f"{name:>26}" for name in runs))
        for rows in args.rows:
            x = rng.uniform(-2, 2, (rows, hidden)).astype(np.float32)
            # Interleaved: each row of figures measured in the same minute.
            times = {name: p50_ms(run, x, args.calls)
                     for name, run in runs.items()}
            print(f"{rows:>5}  " + "  ".join(f"{t:>26.2f}"
                                             for t in times.values()))


if __name__ == "__main__":
    main()
