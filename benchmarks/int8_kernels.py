"""The int8 matmul kernels alone: BERT-Base's 48 matmuls of one request, on
oneDNN's kernel through `_QuantizedMatMul` (what our int8 exports run,
`bert_tf.layers.int8.Int8Dense`) and on ONNX Runtime's (MLAS, a
dynamically quantized graph), fp32 beside each.

Each layer is qkv (768 -> 2304), attention output (768 -> 768, its input
the first 768 columns), feed-forward in (768 -> 3072) and out (3072 ->
768), chained through 12 layers: the matmul work of one BERT-Base request
of M token rows, without attention, norms or anything else. Random
weights (std 1 / sqrt(in), so values keep their scale); our int8 inputs
use a fixed range, as calibrated exports do, which is cheaper than ONNX
Runtime's per-call range. Both on 2 threads; TF's fp32 with
`TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1`, as served.

    .venv-bench/bin/python benchmarks/int8_kernels.py [--rows 12 24 48]
        [--calls 200]

Prints the p50 per request of each. Needs `onnx` and `onnxruntime` (the
bench environment, `make bench`).
"""

import argparse
import os
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# fp32 as served: oneDNN keeps each matmul's packed weights.
os.environ.setdefault("TF_ONEDNN_ASSUME_FROZEN_WEIGHTS", "1")
THREADS = 2

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from bert_tf.layers import int8  # noqa: E402

tf.config.threading.set_intra_op_parallelism_threads(THREADS)
tf.config.threading.set_inter_op_parallelism_threads(THREADS)

HIDDEN, INTERMEDIATE, LAYERS = 768, 3072, 12
# (input width, output width) of a layer's four matmuls, in order.
SHAPES = ((HIDDEN, 3 * HIDDEN), (HIDDEN, HIDDEN), (HIDDEN, INTERMEDIATE),
          (INTERMEDIATE, HIDDEN))
INPUT_RANGE = (-4.0, 4.0)


def random_weights(seed=0):
    """[(kernel [in, out], bias [out])] for 12 layers of four matmuls."""
    rng = np.random.default_rng(seed)
    return [(rng.normal(0, n_in ** -0.5, (n_in, n_out)).astype(np.float32),
             rng.normal(0, 0.02, n_out).astype(np.float32))
            for _ in range(LAYERS) for n_in, n_out in SHAPES]


def chain(matmuls, x, first_columns):
    """The 48 matmuls in order; after each qkv, its first H columns."""
    for index, matmul in enumerate(matmuls):
        x = matmul(x)
        if index % 4 == 0:
            x = first_columns(x)
    return x


def tensorflow_request(weights, precision):
    if precision == "int8":
        layers = []
        for kernel, bias in weights:
            quantized, scale = int8.quantize_kernel(kernel)
            layers.append(int8.Int8Dense(quantized, scale, bias,
                                         input_range=INPUT_RANGE)._rows_matmul)
    else:
        layers = [lambda x, k=tf.constant(k), b=tf.constant(b):
                  tf.nn.bias_add(tf.matmul(x, k), b) for k, b in weights]
    return tf.function(lambda x: chain(layers, x, lambda y: y[:, :HIDDEN]))


def onnx_request(weights, quantized, directory):
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
    from onnxruntime.quantization import QuantType, quantize_dynamic

    nodes, initializers, x = [], [], "x"
    initializers.append(numpy_helper.from_array(
        np.array([0], np.int64), "zero"))
    initializers.append(numpy_helper.from_array(
        np.array([HIDDEN], np.int64), "hidden"))
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
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, HIDDEN])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [None, HIDDEN])],
        initializers)
    model = helper.make_model(graph,
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = os.path.join(directory, "matmuls.onnx")
    onnx.save(model, path)
    if quantized:
        quantize_dynamic(path, path + ".int8.onnx",
                         weight_type=QuantType.QInt8)
        path += ".int8.onnx"
    options = ort.SessionOptions()
    options.intra_op_num_threads = THREADS
    session = ort.InferenceSession(path, options,
                                   providers=["CPUExecutionProvider"])
    return lambda x: session.run(None, {"x": x})[0]


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
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[12, 24, 48],
                        help="token rows per request (a batch-1 RT "
                        "sentence is 9 to 53)")
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    if not int8.available():
        raise SystemExit("this TensorFlow has no _QuantizedMatMul (oneDNN "
                         "builds only)")
    weights = random_weights()
    with tempfile.TemporaryDirectory() as directory:
        runs = {
            "TF int8 (_QuantizedMatMul)": tensorflow_request(weights, "int8"),
            "ONNX Runtime int8": onnx_request(weights, True, directory),
            "TF fp32": tensorflow_request(weights, "fp32"),
            "ONNX Runtime fp32": onnx_request(weights, False, directory),
        }
        rng = np.random.default_rng(1)
        print(f"BERT-Base's 48 matmuls of one request, p50 ms "
              f"({args.calls} calls, {THREADS} threads)")
        print(f"{'rows':>5}  " + "  ".join(f"{name:>26}" for name in runs))
        for rows in args.rows:
            x = rng.uniform(-2, 2, (rows, HIDDEN)).astype(np.float32)
            # Interleaved: each row of figures measured in the same minute.
            times = {name: p50_ms(run, x, args.calls)
                     for name, run in runs.items()}
            print(f"{rows:>5}  " + "  ".join(f"{t:>26.2f}"
                                             for t in times.values()))


if __name__ == "__main__":
    main()
