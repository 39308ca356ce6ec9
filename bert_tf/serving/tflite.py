"""TFLite / LiteRT export of fine-tuned task models: raw strings in,
tokenization inside the model, the SavedModel's outputs out. This module
holds the conversion, the writer and the runner; each kind's graph lives in
its folder (`bert_tf/tasks/<kind>/tflite.py`), found through the kind's
`build_tflite`. A file records its kind in its `bert_tf` metadata.

Each graph is its kind's serving graph with the pieces TFLite builtins
cannot run replaced by pieces they can:
- tokenization is `tf_text.FastBertTokenizer` with its fused normalization
  (`BertTokenizer.fused`), whose normalizer and WordPiece ops have TFLite
  kernels in tf-text's registrar (no Flex delegate). It equals the
  SavedModel's tokenizer on plain text; on other text it also folds
  compatibility characters (ß -> ss, fullwidth -> ASCII) and keeps
  control characters (see `bert_tf/text/tokenizer.py`);
- packing and windows use gathers and selects instead of ragged ops
  (`pack_dense`; `qa_windows` and `tagging_windows`, with
  `bert_tf/text/dense.py`), tested equal to the SavedModel's; QA and
  tagging share the SavedModel's post-processing, written in dense ops.
Classifiers and multiple choice run at the model's full `seq_length`; QA
and tagging windows at their longest row's length, as many windows as the
text needs.

Run a file with `TFLiteModel` (LiteRT's interpreter from `ai-edge-litert`
if installed, else `tf.lite`), or on a device with the tf-text custom ops
registered (`tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS`).
"""

import json
import shutil
import tempfile
import warnings

import numpy as np
import tensorflow as tf

from bert_tf import _moved, tasks
from bert_tf.safe_io import check_writable, guarded_write
import bert_tf.serving.limits as limits_lib
from bert_tf.serving.runtime import native_logs_quiet
from bert_tf.storage import GPath

QUANTIZATIONS = ("none", "dynamic_int8")
# The metadata entry of a .tflite file that records what wrote it.
METADATA_NAME = "bert_tf"

# A text of a kind that reads at most `max_pieces` pieces may hold this
# many bytes per piece read (English averages about 5): a longer one is
# mostly bytes the graph would tokenize and then drop.
_BYTES_PER_PIECE = 64


def convert(module, quantize="none"):
    """TFLite flatbuffer bytes of a module's `serve` (builtins plus the
    tf-text custom ops; dynamic-range int8 weights if asked)."""
    if quantize not in QUANTIZATIONS:
        raise ValueError(f"quantize = {quantize!r}: use one of "
                         f"{', '.join(QUANTIZATIONS)}.")
    staging = GPath(tempfile.mkdtemp(prefix="bert_tf_tflite_"))
    try:
        tf.saved_model.save(module, str(staging),
                            signatures={"serving_default": module.serve})
        converter = tf.lite.TFLiteConverter.from_saved_model(
            str(staging), signature_keys=["serving_default"])
        converter.target_spec.supported_ops = [
            tf.lite.OpsSet.TFLITE_BUILTINS]
        converter.allow_custom_ops = True  # the tf-text kernels
        if quantize == "dynamic_int8":
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        with native_logs_quiet():
            return converter.convert()
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def tflite_kinds():
    """The kinds that have a TFLite graph, from the registry."""
    return [kind for kind in tasks.available_kinds()
            if tasks.get_kind(kind).has_tflite()]


def export_tflite(checkpoint, out, quantize="none", log=print,
                  overwrite=False, kind=None, **options):
    """Writes the TFLite file of a fine-tuned model, or of an export-only
    kind of a pre-trained checkpoint (`kind="embeddings"`).

    Args:
        checkpoint: a `bert-tf finetune` model_dir (or its best/) of a kind
            with a TFLite graph; with `kind`, a pre-trained checkpoint
            (`hf:PATH`, `tf1:PATH`, `garden:PATH` or a bert_tf checkpoint
            directory).
        out: the `.tflite` file to write.
        quantize: `none` (fp32) or `dynamic_int8` (int8 weights, float
            activations).
        log, overwrite: as in `bert_tf.serving.export.export_model`.
        kind: None (the run's own kind) or an export-only kind.
        options: the kind's own TFLite options (its `build_tflite`), e.g.
            `seq_length` and `normalize` for `embeddings`.

    Returns:
        {"path", "bytes", "custom_ops", "quantize", "kind"}.
    """
    out = _check_out(out, overwrite)
    if kind is None:
        with warnings.catch_warnings():  # the kind's own reading warns
            warnings.simplefilter("ignore", FutureWarning)
            kind = tasks.read_spec(checkpoint)[1].kind
    kind_class = tasks.get_kind(kind)
    if not kind_class.has_tflite():
        raise ValueError(f"{checkpoint} holds a {kind} model: the TFLite "
                         f"export covers the kinds "
                         f"{', '.join(tflite_kinds())}; export it as a "
                         "SavedModel (--format savedmodel).")
    module, what = kind_class.build_tflite(checkpoint, **options)
    limit = getattr(module, "max_pieces", None)
    flatbuffer = with_metadata(convert(module, quantize), {
        "kind": kind, **({"max_pieces": limit} if limit else {})})
    custom = _write(out, flatbuffer)
    log(f"wrote {out} ({len(flatbuffer) / 1e6:.1f} MB, "
        f"{'fp32' if quantize == 'none' else 'dynamic-range int8'}; "
        f"{kind}: {what}; custom ops {', '.join(custom) or 'none'}, from "
        "tf-text's TFLite registrar; no Flex)")
    if limit:
        log(f"requests: at most {limit:,} word pieces per text (about "
            f"{round(limit * 4.5, -3):,.0f} characters of English): TFLite "
            "reads all of a text's windows at once, so this bounds its "
            "memory; a longer text comes back flagged in `over_limit`, "
            "which `bert-tf predict` refuses")
    return {"path": out, "bytes": len(flatbuffer), "custom_ops": custom,
            "quantize": quantize, "kind": kind}


def with_metadata(flatbuffer, fields):
    """`flatbuffer` with a `bert_tf` metadata entry holding `fields` as
    JSON (TFLite keeps named metadata buffers beside the graph)."""
    from tensorflow.lite.python import schema_py_generated as schema
    from tensorflow.lite.tools import flatbuffer_utils

    model = flatbuffer_utils.convert_bytearray_to_object(
        bytearray(flatbuffer))
    buffer = schema.BufferT()
    buffer.data = np.frombuffer(json.dumps(fields).encode(), np.uint8)
    model.buffers.append(buffer)
    entry = schema.MetadataT()
    entry.name, entry.buffer = METADATA_NAME, len(model.buffers) - 1
    model.metadata = (model.metadata or []) + [entry]
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model))


def read_metadata(path):
    """The `bert_tf` metadata of a TFLite file ({} if it has none: a file
    written before files recorded their kind)."""
    from tensorflow.lite.python import schema_py_generated as schema

    model = schema.Model.GetRootAsModel(GPath(path).read_bytes(), 0)
    for i in range(model.MetadataLength()):
        entry = model.Metadata(i)
        if entry.Name() and entry.Name().decode() == METADATA_NAME:
            data = model.Buffers(entry.Buffer()).DataAsNumpy()
            return json.loads(bytes(data).decode())
    return {}


def _check_out(out, overwrite):
    out = GPath(out)
    if out.suffix != ".tflite":
        raise ValueError(f"--out {out}: name a .tflite file.")
    if out.exists() and not overwrite:
        raise ValueError(f"{out} already exists; choose another file or "
                         "pass --overwrite.")
    check_writable(out.parent, "the TFLite file")
    return out


def _write(out, flatbuffer):
    """Writes `flatbuffer` to `out` (staged, then moved into place);
    returns its custom ops."""
    partial = out.with_name(out.name + ".partial")
    with guarded_write(out, "the TFLite file", cleanup=(partial,),
                       needed=len(flatbuffer)):
        partial.write_bytes(flatbuffer)
        partial.replace(out)
    return custom_ops(out)


def custom_ops(path):
    """Names of the custom (non-builtin) ops a TFLite file uses."""
    from tensorflow.lite.python import schema_py_generated as schema

    model = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(
        GPath(path).read_bytes(), 0))
    return sorted({code.customCode.decode() for code in model.operatorCodes
                   if code.customCode})


def interpreter(path, num_threads=2):
    """A LiteRT interpreter (`ai_edge_litert`, else `tf.lite`) for a TFLite
    file, with tf-text's custom ops registered."""
    from tensorflow_text import tflite_registrar

    try:
        from ai_edge_litert.interpreter import InterpreterWithCustomOps
    except ImportError:  # ai-edge-litert is optional; TF ships one too,
        # deprecated in its favour (the TFLite guide says so once; TF's
        # warning on every file is silenced below).
        from tensorflow.lite.python.interpreter import \
            InterpreterWithCustomOps
    if not GPath(path).is_file():
        raise FileNotFoundError(f"{path} does not exist: pass a .tflite file "
                                "of `bert-tf export --format tflite`.")
    try:
        with native_logs_quiet(), warnings.catch_warnings():
            warnings.filterwarnings("ignore", "tf.lite.Interpreter is "
                                    "deprecated")
            return InterpreterWithCustomOps(
                model_path=str(path), num_threads=num_threads,
                custom_op_registerers=tflite_registrar.SELECT_TFTEXT_OPS)
    except ValueError as error:  # empty, truncated or not a flatbuffer
        reason = str(error).strip().splitlines()[0][:200]
        raise ValueError(
            f"cannot load {path}: it is not a readable TFLite file ({reason})"
            ". Export it again with `bert-tf export --format tflite`.") \
            from None


class TFLiteModel:
    """Runs any exported TFLite file on Python strings with LiteRT: its
    `kind` (recorded in the file; for files written before that, told by
    its outputs) and `__call__(*texts, **inputs)` -> NumPy outputs, the
    inputs by name or in the order of the kind's signature (a classifier's
    `text`, `text_b`; QA's `question`, `context`).

    Examples:
        >>> model = TFLiteModel(example_files.tflite())
        >>> model.kind, model.inputs
        ('classification', ['text'])
        >>> model(text=["a gripping film", ""])["probabilities"].shape
        (2, 2)
        >>> model(["a gripping film"])["label"].shape
        (1,)
    """

    def __init__(self, path, num_threads=2):
        self.path = GPath(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"{path}: no such TFLite file.")
        self._interpreter = interpreter(self.path, num_threads)
        with native_logs_quiet():  # the XNNPACK delegate's INFO line
            self._runner = self._interpreter.get_signature_runner(
                "serving_default")
        self._first_call_done = False
        self.inputs = sorted(self._runner.get_input_details())
        outputs = self._runner.get_output_details()
        metadata = read_metadata(self.path)
        self.max_pieces = metadata.get("max_pieces")
        self.kind = metadata.get("kind") or next(
            (kind for kind in tflite_kinds()
             if tasks.get_kind(kind).wrote_tflite_outputs(outputs)), None)
        if self.kind is None:
            raise ValueError(f"{path} was not written by `bert-tf export "
                             f"--format tflite` (outputs {sorted(outputs)}).")

    def __call__(self, *texts, **inputs):
        if texts:  # in the order the kind's signature takes them
            order = [name for name in
                     tasks.get_export_class(self.kind).serving_inputs
                     if name in self.inputs]
            if len(texts) > len(order):
                raise ValueError(f"{self.path.name} takes "
                                 f"{', '.join(order)}; got {len(texts)} "
                                 "lists of texts.")
            inputs = {**dict(zip(order, texts)), **inputs}
        sizes = {name: len(values) for name, values in inputs.items()}
        if set(sizes) != set(self.inputs):
            raise ValueError(f"{self.path.name} takes {', '.join(self.inputs)}"
                             f"; got {', '.join(sorted(sizes)) or 'nothing'}.")
        if len(set(sizes.values())) > 1:
            raise ValueError(f"{', '.join(sorted(sizes))} must be as many: "
                             f"got {sizes}.")
        if not max(sizes.values()):
            raise ValueError("texts is empty: give at least one string.")
        encoded = {name: _encoded(values) for name, values in inputs.items()}
        self._check_limits(encoded)
        if self._first_call_done:
            out = self._runner(**encoded)
        else:
            with native_logs_quiet():  # the XNNPACK delegate's INFO, once
                out = self._runner(**encoded)
            self._first_call_done = True
        over = np.flatnonzero(out.pop("over_limit", np.zeros(1)))
        if over.size:
            raise ValueError(
                f"text {over[0]} of the request holds more than "
                f"{self.max_pieces or 'the'} word pieces, the most "
                f"{self.path.name} reads of one text (a TFLite graph runs "
                "all of a text's windows at once); split it, or serve the "
                "SavedModel, which reads long texts a step at a time.")
        return out


    def _check_limits(self, encoded):
        """The SavedModel's limits on rows and bytes (`serving.limits`),
        before the graph runs: it caps the pieces it reads of a text, but
        tokenizes all of it first, and pads every row to the longest."""
        most_bytes = (limits_lib.BYTES_PER_CHAR * limits_lib.MAX_INPUT_CHARS
                      if not self.max_pieces else
                      _BYTES_PER_PIECE * self.max_pieces)
        for name, values in encoded.items():
            texts = np.asarray(values, dtype=object).reshape(-1)
            if texts.size > limits_lib.MAX_BATCH_ROWS:
                raise ValueError(
                    f"`{name}` holds {texts.size} texts in one call, over "
                    f"the limit of {limits_lib.MAX_BATCH_ROWS}: send fewer "
                    "texts per call.")
            longest = max(len(text) for text in texts)
            if longest > most_bytes:
                raise ValueError(
                    f"`{name}` holds a text of {longest:,} bytes, over the "
                    f"{most_bytes:,} {self.path.name} reads; split it, or "
                    "serve the SavedModel.")

    def as_loaded(self):
        """This file behind the interface of a loaded SavedModel's
        `signatures["serving_default"]` (tensors in and out), for the
        kinds' `print_predictions`."""
        def serving_default(**tensors):
            out = self(**{k: v.numpy().tolist() for k, v in tensors.items()})
            return {k: tf.constant(v) for k, v in out.items()}

        serving_default.structured_input_signature = ((), {
            name: tf.TensorSpec(None, tf.string, name=name)
            for name in self.inputs})

        return type("LoadedTFLite", (), {
            "signatures": {"serving_default": serving_default}})()


def _encoded(strings):
    """UTF-8 bytes of `strings` (any nesting: choices are [B, C])."""
    encode = np.vectorize(lambda s: s.encode("utf-8", "surrogatepass")
                          if isinstance(s, str) else bytes(s),
                          otypes=[object])
    return encode(np.array(strings, dtype=object))


def print_predictions(path, args, log=print):
    """`bert-tf predict --model FILE.tflite`: the file's kind prints its
    answers as it does for the kind's SavedModel."""
    model = TFLiteModel(path)
    return tasks.get_export_class(model.kind).print_predictions(
        model.as_loaded(), args, log)


__all__ = ["QUANTIZATIONS", "TFLiteModel", "convert", "custom_ops",
           "export_tflite", "interpreter", "print_predictions",
           "read_metadata", "tflite_kinds", "with_metadata"]


def __getattr__(name):  # names of 0.1 that warn (bert_tf/_moved.py)
    return _moved.renamed(__name__, name)
