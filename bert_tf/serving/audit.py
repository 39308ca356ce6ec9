"""What an export holds: its ops (the audit that proves a SavedModel needs
only TensorFlow core and tf-text ops, with dense outputs: TF Serving and the
TF C API run it), its signatures' tensors and its bytes on disk."""

import tensorflow as tf

from bert_tf.storage import GPath

SIGNATURE_TENSORS = "signature_tensors.txt"
FORBIDDEN_OPS = ("PyFunc", "PyFuncStateless", "EagerPyFunc")


def tf_text_op_libraries():
    """Paths of the tf-text op libraries (for `TF_LoadLibrary`)."""
    import tensorflow_text

    ops_dir = GPath(tensorflow_text.__file__).parent / "python" / "ops"
    return sorted(ops_dir.glob("_*.so"))


def tf_text_op_names():
    """Names of the ops the tf-text libraries register."""
    from tensorflow.core.framework import op_def_pb2
    from tensorflow.python.client import pywrap_tf_session

    names = set()
    for library in tf_text_op_libraries():
        handle = pywrap_tf_session.TF_LoadLibrary(str(library))
        try:
            ops = op_def_pb2.OpList.FromString(
                pywrap_tf_session.TF_GetOpList(handle))
        finally:
            pywrap_tf_session.TF_DeleteLibraryHandle(handle)
        names.update(op.name for op in ops.op)
    return names


def read_saved_model(export_dir):
    """The `SavedModel` protobuf of an export."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString((GPath(export_dir) / "saved_model.pb").read_bytes())
    return saved


def graph_op_types(export_dir):
    """{op type: count} over a SavedModel's graph and function library."""
    saved = read_saved_model(export_dir)
    counts = {}
    for meta_graph in saved.meta_graphs:
        graph = meta_graph.graph_def
        nodes = list(graph.node)
        for function in graph.library.function:
            nodes.extend(function.node_def)
        for node in nodes:
            counts[node.op] = counts.get(node.op, 0) + 1
    return counts


def audit_ops(export_dir):
    """Classifies every op of the export as TensorFlow core or tf-text.

    Returns:
        {"core": {op: n}, "tf_text": {op: n}, "functions": {name: n}}; ops
        that are calls to the graph's own functions are `functions`.

    Raises:
        ValueError: an op is a Python callback (`PyFunc`/`EagerPyFunc`) or
            belongs to neither TensorFlow nor tf-text.
    """
    from tensorflow.python.framework import op_def_registry

    saved = read_saved_model(export_dir)
    functions = {f.signature.name for mg in saved.meta_graphs
                 for f in mg.graph_def.library.function}
    text_ops = tf_text_op_names()
    report = {"core": {}, "tf_text": {}, "functions": {}}
    for op, count in sorted(graph_op_types(export_dir).items()):
        if op in FORBIDDEN_OPS:
            raise ValueError(f"{export_dir}: the graph calls back into Python"
                             f" ({op}); TF Serving cannot run it.")
        if op in functions:
            kind = "functions"
        elif op in text_ops:
            kind = "tf_text"
        elif op_def_registry.get(op) is not None:
            kind = "core"
        else:
            raise ValueError(f"{export_dir}: op {op!r} is neither a "
                             "TensorFlow core op nor a tf-text op.")
        report[kind][op] = count
    return report


def signature_tensors(export_dir):
    """Lines `input|output NAME TENSOR` of `serving_default`, for the C
    serving check (which has no protobuf parser)."""
    saved = read_saved_model(export_dir)
    signature = saved.meta_graphs[0].signature_def["serving_default"]
    lines = [f"input {k} {v.name}" for k, v in sorted(
        signature.inputs.items())]
    lines += [f"output {k} {v.name}" for k, v in sorted(
        signature.outputs.items())]
    return "\n".join(lines) + "\n"


def signature_summary(export_dir):
    """One line per signature: inputs -> outputs with dtypes and shapes."""
    saved = read_saved_model(export_dir)

    def describe(infos):
        return ", ".join(
            f"{k}: {tf.dtypes.as_dtype(v.dtype).name}"
            f"{[d.size if d.size >= 0 else None for d in v.tensor_shape.dim]}"
            for k, v in sorted(infos.items()))

    return [f"  {name}({describe(sig.inputs)}) -> {describe(sig.outputs)}"
            for name, sig in sorted(
                saved.meta_graphs[0].signature_def.items())
            if not name.startswith("__")]


def directory_bytes(path):
    return sum(p.stat().st_size for p in GPath(path).rglob("*") if p.is_file())
