"""TFLite / LiteRT export of fine-tuned task models: raw strings in,
tokenization inside the model, the SavedModel's outputs out. This module
holds the classifier's graph, the conversion and the runner; the other
kinds' graphs live in their folders (`bert_tf/tasks/<kind>/tflite.py`:
span QA, tagging, multiple choice, embeddings).

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

import importlib
import shutil
import tempfile

import numpy as np
import tensorflow as tf

from bert_tf import tasks
from bert_tf.safe_io import check_writable, guarded_write
from bert_tf.storage import GPath
from bert_tf.tasks.base import same_batch
from bert_tf.text.packer import pack_dense
from bert_tf.text.tokenizer import BertTokenizer

QUANTIZATIONS = ("none", "dynamic_int8")
# The TFLite graph of each fine-tuned kind (classification's is below).
TASK_MODULES = {
    "classification": "bert_tf.serving.tflite:TFLiteModule",
    "multiple_choice": "bert_tf.tasks.multiple_choice.tflite:"
                       "ChoiceTFLiteModule",
    "span_qa": "bert_tf.tasks.span_qa.tflite:QATFLiteModule",
    "tagging": "bert_tf.tasks.tagging.tflite:TaggingTFLiteModule",
}


class TFLiteModule(tf.Module):
    """The classifier graph TFLite converts (module docstring).

    `serving_default(text[, text_b])` -> `probabilities` [B, K] and
    `label` [B] (class names), or `score` [B] for regression.
    """

    def __init__(self, model, spec, vocab):
        super().__init__(name="bert_classifier_tflite")
        if spec.long_document:
            raise ValueError(
                "This classifier reads long documents in windows "
                "(task.long_document); its TFLite export is not built yet, "
                "and a TFLite file that cut documents short would answer "
                "wrongly. Export a SavedModel: bert-tf export --checkpoint "
                "RUN --out DIR.")
        self.model_variables = [v.value for v in model.variables]
        tokenizer = BertTokenizer(vocab, spec.lower_case).fused()
        length, labels = spec.seq_length, list(spec.labels)
        label_names = tf.constant(labels or [""])

        def serve(text, text_b=None):
            texts = [text] if text_b is None else list(
                same_batch(text, text_b, "text", "text_b"))
            inputs = pack_dense([tokenizer.tokenize(t) for t in texts],
                                length, vocab.cls_id, vocab.sep_id,
                                vocab.pad_id)
            logits = tf.cast(model(inputs, training=False), tf.float32)
            if not labels:
                return {"score": logits[:, 0]}
            return {"probabilities": tf.nn.softmax(logits),
                    "label": tf.gather(label_names,
                                       tf.argmax(logits, axis=-1))}

        specs = [tf.TensorSpec([None], tf.string, name="text")]
        if spec.pair:
            specs.append(tf.TensorSpec([None], tf.string, name="text_b"))
        self.serve = tf.function(serve, input_signature=specs)


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
        return converter.convert()
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def export_tflite(checkpoint, out, quantize="none", log=print,
                  overwrite=False):
    """Writes the TFLite file of a fine-tuned classifier.

    Args:
        checkpoint: a `bert-tf finetune` model_dir (or its best/) of a
            classification task.
        out: the `.tflite` file to write.
        quantize: `none` (fp32) or `dynamic_int8` (int8 weights, float
            activations).
        log, overwrite: as in `bert_tf.serving.export.export_model`.

    Returns:
        {"path", "bytes", "custom_ops", "quantize"}.
    """
    out = _check_out(out, overwrite)
    task, model, vocab, _ = tasks.load_finetuned(checkpoint)
    if task.kind not in TASK_MODULES:
        raise ValueError(f"{checkpoint} holds a {task.kind} model: the "
                         "TFLite export covers the kinds "
                         f"{', '.join(TASK_MODULES)}; export it as a "
                         "SavedModel (--format savedmodel).")
    module_path, _, name = TASK_MODULES[task.kind].partition(":")
    module = getattr(importlib.import_module(module_path), name)
    flatbuffer = convert(module(model, task.spec, vocab), quantize)
    custom = _write(out, flatbuffer)
    what = (f"labels {', '.join(task.spec.labels) or '(regression)'}"
            if task.kind == "classification" else task.kind)
    log(f"wrote {out} ({len(flatbuffer) / 1e6:.1f} MB, "
        f"{'fp32' if quantize == 'none' else 'dynamic-range int8'}; "
        f"{model.count_params():,} parameters; {what}; seq_length "
        f"{task.spec.seq_length}; custom ops "
        f"{', '.join(custom) or 'none'}, from tf-text's TFLite registrar; "
        "no Flex)")
    return {"path": out, "bytes": len(flatbuffer), "custom_ops": custom,
            "quantize": quantize}


def export_tflite_embeddings(checkpoint, out, quantize="none", log=print,
                             overwrite=False, seq_length=128,
                             normalize=True):
    """Writes the TFLite file of the `embeddings` kind of a pre-trained
    encoder: raw strings in, `embedding` [B, H] out, as the SavedModel of
    `bert-tf export --kind embeddings` gives (texts truncated to
    `seq_length` pieces; every request runs at that length).

    Args:
        checkpoint: `hf:PATH`, `tf1:PATH`, `garden:PATH` or a bert_tf
            checkpoint directory.
        out, quantize, log, overwrite: as in `export_tflite`.
        seq_length, normalize: as in the SavedModel export.

    Returns:
        {"path", "bytes", "custom_ops", "quantize"}.
    """
    from bert_tf import checkpoints
    from bert_tf.tasks.base import check_lengths
    from bert_tf.tasks.embeddings.tflite import EmbeddingTFLiteModule

    out = _check_out(out, overwrite)
    pretrained = checkpoints.load_encoder(checkpoint)
    check_lengths(pretrained.config, seq_length=seq_length)
    encoder = pretrained.encoder
    flatbuffer = convert(EmbeddingTFLiteModule(
        encoder, pretrained.vocab, seq_length, normalize), quantize)
    custom = _write(out, flatbuffer)
    log(f"wrote {out} ({len(flatbuffer) / 1e6:.1f} MB, "
        f"{'fp32' if quantize == 'none' else 'dynamic-range int8'}; "
        f"sentence embeddings of {checkpoint} ({encoder.count_params():,} "
        f"parameters, {pretrained.config.hidden_size} wide, mean-pooled"
        f"{', L2-normalised' if normalize else ''}); seq_length "
        f"{seq_length}; custom ops {', '.join(custom) or 'none'}; no Flex)")
    return {"path": out, "bytes": len(flatbuffer), "custom_ops": custom,
            "quantize": quantize}


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
    except ImportError:  # ai-edge-litert is optional; TF ships one too
        from tensorflow.lite.python.interpreter import \
            InterpreterWithCustomOps
    if not GPath(path).is_file():
        raise FileNotFoundError(f"{path} does not exist: pass a .tflite file "
                                "of `bert-tf export --format tflite`.")
    try:
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
    `kind` (from its outputs) and `__call__(**inputs)` -> NumPy outputs.

    Examples:
        >>> model = TFLiteModel(example_files.tflite())
        >>> model.kind, model.inputs
        ('classification', ['text'])
        >>> model(text=["a gripping film", ""])["probabilities"].shape
        (2, 2)
    """

    # The kind of a file, by the outputs of its `serving_default`.
    KINDS = {"embedding": "embeddings", "choice": "multiple_choice",
             "answer": "span_qa", "type": "tagging",
             "probabilities": "classification", "score": "classification"}

    def __init__(self, path, num_threads=2):
        self.path = GPath(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"{path}: no such TFLite file.")
        self._interpreter = interpreter(self.path, num_threads)
        self._runner = self._interpreter.get_signature_runner(
            "serving_default")
        self.inputs = sorted(self._runner.get_input_details())
        outputs = self._runner.get_output_details()
        self.kind = next((kind for name, kind in self.KINDS.items()
                          if name in outputs), None)
        if self.kind is None:
            raise ValueError(f"{path} was not written by `bert-tf export "
                             f"--format tflite` (outputs {sorted(outputs)}).")

    def __call__(self, **inputs):
        sizes = {name: len(values) for name, values in inputs.items()}
        if set(sizes) != set(self.inputs):
            raise ValueError(f"{self.path.name} takes {', '.join(self.inputs)}"
                             f"; got {', '.join(sorted(sizes)) or 'nothing'}.")
        if len(set(sizes.values())) > 1:
            raise ValueError(f"{', '.join(sorted(sizes))} must be as many: "
                             f"got {sizes}.")
        if not max(sizes.values()):
            raise ValueError("texts is empty: give at least one string.")
        return self._runner(**{name: _encoded(values)
                               for name, values in inputs.items()})


    def as_loaded(self):
        """This file behind the interface of a loaded SavedModel's
        `signatures["serving_default"]` (tensors in and out), for the
        kinds' `print_predictions`."""
        def serving_default(**tensors):
            out = self(**{k: v.numpy().tolist() for k, v in tensors.items()})
            return {k: tf.constant(v) for k, v in out.items()}

        return type("LoadedTFLite", (), {
            "signatures": {"serving_default": serving_default}})()


def _encoded(strings):
    """UTF-8 bytes of `strings` (any nesting: choices are [B, C])."""
    encode = np.vectorize(lambda s: s.encode("utf-8", "surrogatepass")
                          if isinstance(s, str) else bytes(s),
                          otypes=[object])
    return encode(np.array(strings, dtype=object))


class TFLiteClassifier(TFLiteModel):
    """Runs an exported TFLite classifier on Python strings.

    Examples:
        >>> classifier = TFLiteClassifier(example_files.tflite())
        >>> out = classifier(["a gripping film", ""])
        >>> out["probabilities"].shape, out["label"].dtype.kind
        ((2, 2), 'O')
    """

    def __call__(self, texts, texts_b=None):
        if "text_b" in self.inputs:
            if texts_b is None or len(texts_b) != len(texts):
                raise ValueError("This model classifies pairs: give "
                                 "texts_b, as many as texts.")
            return super().__call__(text=texts, text_b=texts_b)
        return super().__call__(text=texts)


def print_predictions(path, args, log=print):
    """`bert-tf predict --model FILE.tflite`: per text, the label and its
    probability (classifiers) or the embedding (embeddings); the other
    kinds print as their SavedModels do."""
    from bert_tf.tasks.base import command_line_texts
    from bert_tf.tasks.embeddings.serving import print_embeddings

    model = TFLiteModel(path)
    if model.kind not in ("classification", "embeddings"):
        return tasks.get_export_class(model.kind).print_predictions(
            model.as_loaded(), args, log)
    texts = command_line_texts(args)
    vectors = []
    for start in range(0, len(texts), args.batch_size):
        chunk = texts[start:start + args.batch_size]
        out = model(text=chunk)
        if model.kind == "embeddings":
            vectors.append(out["embedding"])
            continue
        for i, text in enumerate(chunk):
            shown = text if len(text) <= 60 else text[:57] + "..."
            if "score" in out:
                log(f"{out['score'][i]:.4f}\t{shown}")
            else:
                log(f"{out['label'][i].decode()}\t"
                    f"{out['probabilities'][i].max():.4f}\t{shown}")
    if vectors:
        print_embeddings(texts, np.concatenate(vectors), log)


__all__ = ["QUANTIZATIONS", "TFLiteClassifier", "TFLiteModel",
           "TFLiteModule", "convert", "custom_ops", "export_tflite",
           "export_tflite_embeddings", "interpreter", "print_predictions"]
