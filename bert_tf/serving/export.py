"""Exports a fine-tuned classifier as a SavedModel that takes raw text.

Signatures (all outputs dense; TF Serving and the TF C API can run them):

- `serving_default`: `text` (tf.string [batch]) and, for pair tasks,
  `text_b` -> `probabilities` [batch, K] (softmax), `logits` [batch, K] and
  `label` [batch] (class names as strings); regression models return
  `score` [batch] and `logits` [batch, 1].
- `preprocess`: the same strings -> `input_word_ids`, `input_mask`,
  `input_type_ids` (int32 [batch, seq_length]), as TF Hub BERT preprocessors.
- `encode`: strings -> `pooled_output` [batch, H], `sequence_output`
  [batch, seq_length, H].

Tokenization and packing run inside the graph through the same
`BertPreprocessor` layer that fed training; the vocab is a graph constant
and also ships as `assets/vocab.txt`. Over-long input keeps its first word
pieces: `seq_length - 2` of them for one text, and for pairs the longer
text loses pieces from its end first (`seq_length - 3` in all), as the
original BERT's `_truncate_seq_pair`. The exported graph uses only
TensorFlow core ops and tf-text ops (`audit_ops`), so a TF Serving build
with tf-text ops serves it; load it in Python after `import
tensorflow_text`.
"""

import json
import shutil
from pathlib import Path

import tensorflow as tf

from bert_tf.serving import warmup
from bert_tf.text.preprocessor import BertPreprocessor

WARMUP_TEXTS = ("a gripping, beautifully acted film",
                "dull and far too long", "")
SIGNATURE_TENSORS = "signature_tensors.txt"
FORBIDDEN_OPS = ("PyFunc", "PyFuncStateless", "EagerPyFunc")


class ClassifierModule(tf.Module):
    """The `tf.Module` that becomes the SavedModel (see module docstring).

    Args:
        model: a `BertClassifier`.
        preprocessor: the `BertPreprocessor` it was trained with.
        labels: class names in id order (empty: regression).
        pair: the task takes `text` and `text_b`.
        vocab_path: vocab.txt, copied into the SavedModel's assets.
    """

    def __init__(self, model, preprocessor, labels, pair, vocab_path):
        super().__init__(name="bert_classifier")
        # Only the plain tf.Variables under the Keras variables are
        # tracked: a tracked Keras model would add a second copy of each
        # variable that TF1-style loaders (TF Serving, the C API) restore
        # while the functions read the first, uninitialized one.
        self.model_variables = [v.value for v in model.variables]
        self.label_names = tf.constant(list(labels) or [""])
        self.vocab_file = tf.saved_model.Asset(str(vocab_path))
        regression = not labels
        label_names = self.label_names

        def inputs_of(text, text_b):
            # The signature declares [batch], but loaded signatures (Python,
            # TF Serving, the C API) do not check shapes, and TF folds any
            # check written against the declared shape; a scalar would crash
            # the tokenizer kernels. EnsureShape checks at run time and
            # fails with "Shape of tensor text [] is not compatible with
            # expected shape [?]".
            text = tf.raw_ops.EnsureShape(input=text,
                                          shape=tf.TensorShape([None]))
            if not pair:
                return preprocessor(text)
            text_b = tf.raw_ops.EnsureShape(input=text_b,
                                            shape=tf.TensorShape([None]))
            check = tf.debugging.assert_equal(
                tf.size(text), tf.size(text_b), message=(
                    "`text` and `text_b` must hold the same number of "
                    "strings"))
            with tf.control_dependencies([check]):
                return preprocessor((tf.identity(text), tf.identity(text_b)))

        def serve(text, text_b=None):
            logits = tf.cast(model(inputs_of(text, text_b), training=False),
                             tf.float32)
            if regression:
                return {"score": logits[:, 0], "logits": logits}
            return {"probabilities": tf.nn.softmax(logits),
                    "logits": logits,
                    "label": tf.gather(label_names,
                                       tf.argmax(logits, axis=-1))}

        def preprocess(text, text_b=None):
            return inputs_of(text, text_b)

        def encode(text, text_b=None):
            outputs = model.encoder(inputs_of(text, text_b), training=False)
            return {name: tf.cast(outputs[name], tf.float32)
                    for name in ("pooled_output", "sequence_output")}

        specs = [tf.TensorSpec([None], tf.string, name="text")]
        if pair:
            specs.append(tf.TensorSpec([None], tf.string, name="text_b"))
        self.serve = tf.function(serve, input_signature=specs)
        self.preprocess = tf.function(preprocess, input_signature=specs)
        self.encode = tf.function(encode, input_signature=specs)

    def signatures(self):
        return {"serving_default": self.serve, "preprocess": self.preprocess,
                "encode": self.encode}


def tf_text_op_libraries():
    """Paths of the tf-text op libraries (for `TF_LoadLibrary`)."""
    import tensorflow_text

    ops_dir = Path(tensorflow_text.__file__).parent / "python" / "ops"
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


def graph_op_types(export_dir):
    """{op type: count} over a SavedModel's graph and function library."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString((Path(export_dir) / "saved_model.pb").read_bytes())
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
    from tensorflow.core.protobuf import saved_model_pb2
    from tensorflow.python.framework import op_def_registry

    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString((Path(export_dir) / "saved_model.pb").read_bytes())
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


def _signature_tensors(export_dir):
    """Lines `input|output NAME TENSOR` of `serving_default`, for the C
    serving check (which has no protobuf parser)."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString((Path(export_dir) / "saved_model.pb").read_bytes())
    signature = saved.meta_graphs[0].signature_def["serving_default"]
    lines = [f"input {k} {v.name}" for k, v in sorted(
        signature.inputs.items())]
    lines += [f"output {k} {v.name}" for k, v in sorted(
        signature.outputs.items())]
    return "\n".join(lines) + "\n"


def _signature_summary(export_dir):
    """One line per signature: inputs -> outputs with dtypes and shapes."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString((Path(export_dir) / "saved_model.pb").read_bytes())

    def describe(infos):
        return ", ".join(
            f"{k}: {tf.dtypes.as_dtype(v.dtype).name}"
            f"{[d.size if d.size >= 0 else None for d in v.tensor_shape.dim]}"
            for k, v in sorted(infos.items()))

    return [f"  {name}({describe(sig.inputs)}) -> {describe(sig.outputs)}"
            for name, sig in sorted(
                saved.meta_graphs[0].signature_def.items())
            if not name.startswith("__")]


def update_models_config(export_root):
    """Rewrites `export_root/models.config` (TF Serving's --model_config_file)
    to list every `NAME/VERSION` SavedModel under `export_root`, with base
    paths under /models (mount `export_root` there)."""
    export_root = Path(export_root)
    names = sorted(
        d.name for d in export_root.iterdir() if d.is_dir() and any(
            v.is_dir() and v.name.isdigit() and
            (v / "saved_model.pb").is_file() for v in d.iterdir()))
    entries = "".join(
        "  config {\n"
        f"    name: \"{name}\"\n"
        f"    base_path: \"/models/{name}\"\n"
        "    model_platform: \"tensorflow\"\n"
        "  }\n" for name in names)
    path = export_root / "models.config"
    path.write_text("# Written by `bert-tf export`: one entry per exported "
                    "model.\n# docker run -p 8501:8501 -v $PWD/export:/models"
                    " tensorflow/serving \\\n#   --model_config_file="
                    "/models/models.config\n"
                    f"model_config_list {{\n{entries}}}\n")
    return path


def _directory_bytes(path):
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


def export_classifier(checkpoint, out, log=print, overwrite=False):
    """Writes the SavedModel of a fine-tuned classifier.

    Args:
        checkpoint: a `bert-tf finetune` model_dir (or its best/).
        out: `export/NAME/VERSION` (VERSION a number, as TF Serving wants).
        log: where the export report goes.
        overwrite: replace an existing export.

    Returns:
        {"path", "signatures", "ops", "bytes"}: the report's figures.

    Example:
    >>> export_classifier("runs/rt_sentiment_minilm",
    ...                   "export/rt_sentiment/1")  # doctest: +SKIP
    """
    from bert_tf.finetune import load_classifier

    out = Path(out)
    if not out.name.isdigit():
        raise ValueError(f"Export path {out} must end in a numeric version "
                         "directory (export/NAME/VERSION), as TF Serving "
                         "expects.")
    if out.exists():
        if not overwrite:
            raise ValueError(f"{out} already exists; export to a new version "
                             "or pass --overwrite.")
        shutil.rmtree(out)
    model, spec, vocab = load_classifier(checkpoint)
    preprocessor = BertPreprocessor(vocab, spec["seq_length"],
                                    lower_case=spec["lower_case"])
    staging = out.with_name(out.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    vocab_path = vocab.save(staging / "vocab.txt")
    module = ClassifierModule(model, preprocessor, spec["labels"],
                              spec["pair"], vocab_path)
    tf.saved_model.save(module, str(staging / "model"),
                        signatures=module.signatures())
    saved = staging / "model"
    extra = saved / "assets.extra"
    extra.mkdir(exist_ok=True)
    requests = []
    for text in WARMUP_TEXTS:
        inputs = {"text": [text]}
        if spec["pair"]:
            inputs["text_b"] = [text]
        requests.append(inputs)
    name = out.parent.name
    warmup.write_warmup_requests(extra / "tf_serving_warmup_requests",
                                 requests, name)
    (extra / SIGNATURE_TENSORS).write_text(_signature_tensors(saved))
    (extra / "bert_tf.json").write_text(json.dumps(
        {k: spec[k] for k in ("task", "labels", "regression", "pair",
                              "seq_length", "lower_case")}, indent=2) + "\n")
    ops = audit_ops(saved)
    saved.replace(out)
    shutil.rmtree(staging)
    config_path = update_models_config(out.parent.parent)
    size = _directory_bytes(out)
    log(f"wrote SavedModel {out} ({size / 1e6:.1f} MB; "
        f"{model.count_params():,} parameters; task {spec['task']}, labels "
        f"{spec['labels'] or 'regression'}, seq_length {spec['seq_length']})")
    log("signatures:")
    for line in _signature_summary(out):
        log(line)
    log(f"ops: {sum(ops['core'].values())} nodes of {len(ops['core'])} "
        f"TensorFlow core op types, {sum(ops['tf_text'].values())} of "
        f"{len(ops['tf_text'])} tf-text op types "
        f"({', '.join(sorted(ops['tf_text']))}); no PyFunc")
    log(f"wrote {out / 'assets.extra' / 'tf_serving_warmup_requests'} "
        f"({len(requests)} requests)")
    log(f"updated {config_path}")
    return {"path": out, "ops": ops, "bytes": size,
            "signatures": list(module.signatures())}


def load_exported(path):
    """Loads an export (imports tensorflow_text first, which it needs)."""
    import tensorflow_text  # noqa: F401 (registers the tf-text ops)

    path = Path(path)
    if not (path / "saved_model.pb").is_file():
        raise FileNotFoundError(f"{path} is not a SavedModel (no "
                                "saved_model.pb); pass export/NAME/VERSION.")
    return tf.saved_model.load(str(path))


def predict_texts(loaded, texts, texts_b=None):
    """Runs `serving_default` on Python strings; returns NumPy outputs."""
    function = loaded.signatures["serving_default"]
    inputs = {"text": tf.constant(list(texts), tf.string)}
    if texts_b is not None:
        inputs["text_b"] = tf.constant(list(texts_b), tf.string)
    return {k: v.numpy() for k, v in function(**inputs).items()}


__all__ = ["ClassifierModule", "export_classifier", "audit_ops",
           "load_exported", "predict_texts", "update_models_config",
           "tf_text_op_libraries"]
