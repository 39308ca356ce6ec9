"""Exports a fine-tuned task model as a SavedModel that takes raw text.

What the signatures take and return is the task kind's
(`bert_tf.tasks.<kind>`, its `serving_module`); this module writes any of
them the same way: the SavedModel (staged, then moved into place), the
vocab as an asset, TF Serving warm-up records, `models.config`, and an op
audit that proves the graph needs only TensorFlow core and tf-text ops
(all outputs are dense: TF Serving and the TF C API can run them). Load an
export in Python after `import tensorflow_text`.
"""

import dataclasses
import json

import tensorflow as tf

from bert_tf import _moved
from bert_tf import config as config_lib
from bert_tf import tasks
from bert_tf.layers.int8 import served_parameter_count
from bert_tf.models.chunked import TOKENS_PER_STEP
import bert_tf.serving.limits as limits_lib
from bert_tf import precision as precision_lib
import bert_tf.serving.quantize as quantize_lib
from bert_tf.safe_io import (check_writable, guarded_write,
                             recover_directory, replace_directory)
import bert_tf.serving.warmup as warmup
from bert_tf.serving.server_config import (models_root,
                                           update_models_config,
                                           write_batching_parameters)
from bert_tf.serving.runtime import FROZEN_WEIGHTS, keeps_reordered_weights
from bert_tf.storage import GPath
# What an export holds and how one is loaded: their own modules, their
# names still importable from here.
from bert_tf.serving.audit import (  # noqa: F401
    FORBIDDEN_OPS, SIGNATURE_TENSORS, audit_ops, directory_bytes,
    graph_op_types, read_saved_model, signature_summary, signature_tensors,
    tf_text_op_libraries, tf_text_op_names)
from bert_tf.serving.loading import (  # noqa: F401
    check_saved_model, exported_kind, load_exported, predict_texts,
    print_export_predictions)

# What an export adds beside its task spec in `bert_tf.json`.
EXPORT_FIELDS = ("precision", "int8", "row_classes", "matmul_parts",
                 "max_input_chars", "max_batch_chars", "max_batch_rows",
                 "pads_to_longest")


def export(kind, checkpoint, out, log=print, overwrite=False,
           fixed_length=False, precision="fp32",
           calibration=precision_lib.CALIBRATION_EXAMPLES,
           calibration_texts=None, max_input_chars=None,
           max_batch_chars=None, max_batch_rows=None, server_config=None,
           **options):
    """Writes the SavedModel of any export kind: the one path every kind
    takes. The kind (`bert_tf.tasks.get_kind`) builds what to save from
    `checkpoint` and its `options`; this writes, audits and reports it.

    Args:
        kind: a task kind (`checkpoint` is a fine-tuning run of it) or an
            export-only kind (`embeddings`, `fill_mask`: a pre-trained
            checkpoint).
        checkpoint: as in `export_model`; likewise `out`, `log`,
            `overwrite`, `fixed_length`, `precision`, `calibration`,
            `calibration_texts`, `max_input_chars`, `max_batch_chars`,
            `max_batch_rows` and `server_config`.
        options: the kind's own export options (see its `build_export`).

    Returns:
        As `export_model`.
    """
    out = _check_out(out, overwrite, log)
    models_root(out, server_config)  # a wrong --server-config: before work
    limits_lib.check_given(max_input_chars, max_batch_chars,
                           max_batch_rows)
    precision = precision_lib.Precision.parse(precision, log)
    spec, vocab, model, make_module = tasks.get_kind(kind).build_export(
        checkpoint, fixed_length=fixed_length, dtype=precision.policy,
        **options)
    limits = limits_lib.resolve(
        tasks.get_kind(kind), spec, getattr(model, "encoder", model).config,
        max_input_chars, max_batch_chars, max_batch_rows, log)
    int8 = quantize_lib.quantize(model, precision, spec, vocab, calibration,
                                  calibration_texts, log)
    served = quantize_lib.served(model, precision)
    if dataclasses.is_dataclass(spec):  # a task's typed spec
        spec = config_lib.to_dict(spec)
    spec = {**spec, "precision": precision.name,
            **({"int8": int8} if int8 else {}),
            **({"row_classes": list(served.row_classes)}
               if served.row_classes else {}),
            "matmul_parts": served.matmuls.parts, **limits}
    return _write_export(out, spec, vocab, model, log,
                         lambda saved: make_module(served, saved),
                         server_config)


def export_model(checkpoint, out, log=print, overwrite=False,
                 fixed_length=False, precision="fp32",
                 calibration=precision_lib.CALIBRATION_EXAMPLES,
                 calibration_texts=None, max_input_chars=None,
                 max_batch_chars=None, max_batch_rows=None,
                 server_config=None):
    """Writes the SavedModel of a fine-tuned model of any task kind.

    Args:
        checkpoint: a `bert-tf finetune` model_dir (or its best/).
        out: `export/NAME/VERSION` (VERSION a number, as TF Serving wants).
        log: where the export report goes.
        overwrite: replace an existing export.
        fixed_length: run every request at the model's full sequence length
            (XLA or TPU serving) instead of its longest text's length.
        precision: `fp32`, `bf16` (weights stored as bf16; softmax, layer
            norm and every output in fp32), `int8` (the encoder's matmuls
            on int8 weights run by oneDNN's int8 kernels; everything else
            as in fp32) or `auto` (bf16 where the CPU has AVX512_BF16 or
            AMX; never int8); recorded in the export.
        calibration: int8: how many of the run's training examples show
            each matmul its inputs, whose outlier channels are then
            smoothed into the weights (0: none).
        calibration_texts: int8: a file of texts (one per line) to
            calibrate on instead.
        max_input_chars: the most characters a text of a request may
            hold; max_batch_chars: all the texts of a request together.
            Over either, the request fails with INVALID_ARGUMENT before
            any model work (`bert_tf.serving.limits`); recorded in the
            export. None: the default, chosen by time for kinds whose
            work grows with the text (`limits.default_max_input_chars`),
            and four texts at the limit.
        max_batch_rows: the most texts a request may hold in each input
            (None: `limits.MAX_BATCH_ROWS`).
        server_config: also keep TF Serving's `models.config` and
            `batching_parameters.txt` up to date in the models root (two
            folders above `out`): True or that folder's path. None: only
            where the root already holds a `models.config` an export
            wrote; otherwise nothing is written outside `out`
            (`server_config.models_root`).

    Returns:
        {"path", "signatures", "ops", "bytes", "kind"}: the report's figures.

    Examples:
        >>> report = export_model(example_files.finetuned(),
        ...                       example_files.tmp / "export" / "1",
        ...                       log=lambda line: None)
        >>> report["kind"], exported_kind(report["path"])
        ('classification', 'classification')
    """
    _, spec = tasks.read_spec(checkpoint)
    return export(spec.kind, checkpoint, out, log, overwrite,
                  fixed_length, precision, calibration, calibration_texts,
                  max_input_chars, max_batch_chars, max_batch_rows,
                  server_config)


def export_keras_model(model, out, kind=None, vocab=None, log=print,
                       overwrite=False,
                       fixed_length=False, max_input_chars=None,
                       max_batch_chars=None, max_batch_rows=None,
                       server_config=None, **fields):
    """Writes the SavedModel of a task model trained in Python (for example
    with `model.fit` in a notebook): the same signatures, warm-up records
    and `models.config` as `bert-tf export` of a fine-tuning run.

    Args:
        model: a task model (e.g. a `BertClassifier`).
        out: `export/NAME/VERSION`.
        kind: its task kind (`classification`, `span_qa`, ...); None: the
            kind whose model class it is.
        vocab: the `Vocab` it was trained with (required).
        log: as in `export_model`; likewise `overwrite`, `fixed_length`,
            `max_input_chars`, `max_batch_chars`, `max_batch_rows` and
            `server_config`.
        **fields: the kind's config fields the serving graph reads, e.g.
            `labels` and `seq_length` for a classifier.

    Returns:
        As `export_model`.

    Examples:
        >>> from bert_tf.models.encoder import BertEncoder
        >>> from bert_tf.tasks.classification.model import BertClassifier
        >>> from bert_tf.text.vocab import read_vocab
        >>> vocab = read_vocab(example_files.toy_task() / "vocab.txt")
        >>> model = BertClassifier(BertEncoder(
        ...     vocab_size=len(vocab.tokens), hidden_size=16, num_layers=1,
        ...     num_heads=2, intermediate_size=32), 2)
        >>> report = export_keras_model(
        ...     model, example_files.tmp / "keras_export" / "1",
        ...     vocab=vocab, log=lambda line: None,
        ...     labels=["negative", "positive"], seq_length=16)
        >>> import tensorflow_text
        >>> serve = tf.saved_model.load(str(report["path"])).signatures[
        ...     "serving_default"]
        >>> serve(text=tf.constant(["a fine film"]))["label"].shape
        TensorShape([1])
    """
    if vocab is None:
        raise ValueError("vocab: give the Vocab the model was trained with "
                         "(bert_tf.text.vocab.read_vocab(PATH)).")
    kind = kind or tasks.kind_of_model(model)
    out = _check_out(out, overwrite, log)
    models_root(out, server_config)  # a wrong --server-config: before work
    limits_lib.check_given(max_input_chars, max_batch_chars,
                           max_batch_rows)
    fields.setdefault("name", "python")
    fields.setdefault("lower_case", not vocab.is_cased)
    spec = tasks.get_config_class(kind)(
        kind=kind, encoder=dataclasses.asdict(model.encoder.config),
        **fields).validate(data=False)
    limits = limits_lib.resolve(
        tasks.get_kind(kind), spec, getattr(model, "encoder", model).config,
        max_input_chars, max_batch_chars, max_batch_rows, log)
    task = tasks.get_kind(kind)(spec)
    served = quantize_lib.served(model, precision_lib.FP32)
    return _write_export(
        out, {**config_lib.to_dict(spec), "precision": "fp32",
              "row_classes": list(served.row_classes),
              "matmul_parts": served.matmuls.parts, **limits},
        vocab, model, log,
        lambda saved: task.serving_module(served, saved, fixed_length),
        server_config)


def _check_out(out, overwrite, log=print):
    out = GPath(out)
    if not out.name.isdigit():
        raise ValueError(f"Export path {out} must end in a numeric version "
                         "directory (export/NAME/VERSION), as TF Serving "
                         "expects.")
    if recover_directory(out):  # an export killed while swapping in
        log(f"put back {out}: the last export was cut off while moving in")
    if out.exists() and not overwrite:
        raise ValueError(f"{out} already exists; export to a new version "
                         "or pass --overwrite.")
    # An existing export is replaced only once the new one is written.
    check_writable(out.parent, "the export")
    return out


def _write_export(out, spec, vocab, model, log, make_module,
                  server_config=None):
    """Writes the SavedModel of `make_module(vocab)` (staged, then
    moved into place) with its warm-up records, signature tensors, spec
    and op audit, and updates `models.config` and the batching
    parameters; logs and returns the report."""
    # Staged beside `out` (a rerun clears what a killed export left), then
    # swapped in: TF Serving never sees half a model, and a failed write
    # keeps the export that was there.
    staging = out.with_name(out.name + ".partial")
    staging.rmtree(ignore_errors=True)
    with guarded_write(out, "the export", cleanup=(staging,)):
        staging.mkdir(parents=True)
        module = make_module(vocab.saved(staging / "vocab.txt"))
        signatures = module.signatures()
        tf.saved_model.save(module, str(staging / "model"),
                            signatures=limits_lib.limit_module(
                                module, signatures,
                                **limits_lib.limits_of(spec)))
        saved = staging / "model"
        extra = saved / "assets.extra"
        extra.mkdir(exist_ok=True)
        requests = module.warmup_requests()
        warmup.write_warmup_requests(extra / "tf_serving_warmup_requests",
                                     requests, out.parent.name)
        (extra / SIGNATURE_TENSORS).write_text(signature_tensors(saved))
        # The whole spec, encoder shape included: an export can teach
        # (`bert-tf distill`) without its run.
        (extra / "bert_tf.json").write_text(json.dumps(spec, indent=2) +
                                            "\n")
        ops = audit_ops(saved)
    replace_directory(saved, out, "the export")
    staging.rmtree(ignore_errors=True)
    root = models_root(out, server_config)
    if root is not None:
        with guarded_write(root, "the TF Serving config"):
            config_path = update_models_config(root)
            batching_path = write_batching_parameters(root,
                                                      module.BATCH_SIZES)
    size = directory_bytes(out)
    what = ", ".join(f"{k} {spec[k]}" for k in ("labels", "version_2")
                     if k in spec)
    log(f"wrote SavedModel {out} ({size / 1e6:.1f} MB; "
        f"{spec.get('precision', 'fp32')}, "
        f"{served_parameter_count(model):,} parameters; {spec['kind']} "
        f"{'task' if 'encoder' in spec else 'of'} "
        f"{spec['name']}{', ' + what if what else ''}, seq_length "
        f"{spec['seq_length']})")
    log("signatures:")
    for line in signature_summary(out):
        log(line)
    log(f"ops: {sum(ops['core'].values())} nodes of {len(ops['core'])} "
        f"TensorFlow core op types, {sum(ops['tf_text'].values())} of "
        f"{len(ops['tf_text'])} tf-text op types "
        f"({', '.join(sorted(ops['tf_text']))}); no PyFunc")
    limits = limits_lib.limits_of(spec)
    log(f"requests: at most {limits['max_input_chars']:,} characters per "
        f"text, {limits['max_batch_chars']:,} per request"
        f"{' (texts x the longest)' if limits['pads_to_longest'] else ''} "
        f"and {limits['max_batch_rows']:,} texts (larger ones get "
        "INVALID_ARGUMENT); the encoder runs "
        f"{TOKENS_PER_STEP:,} tokens at a time")
    log(f"wrote {out / 'assets.extra' / 'tf_serving_warmup_requests'} "
        f"({len(requests)} requests; sequence lengths "
        f"{', '.join(map(str, module.lengths))})")
    served = (f"; serve it with {FROZEN_WEIGHTS}=1 in TF Serving's "
              "environment (oneDNN keeps its weights in their fastest "
              "layout)" if keeps_reordered_weights(spec) else "")
    if root is not None:
        log(f"updated {config_path} and {batching_path}{served}")
    else:
        log(f"wrote nothing outside {out}: --server-config writes TF "
            f"Serving's models.config and batching_parameters.txt in "
            f"{out.parent.parent}{served}")
    return {"path": out, "ops": ops, "bytes": size, "kind": spec["kind"],
            "signatures": list(signatures)}


__all__ = ["export", "export_model", "export_keras_model", "audit_ops",
           "exported_kind", "load_exported", "predict_texts",
           "update_models_config", "write_batching_parameters",
           "tf_text_op_libraries"]


def __getattr__(name):  # names of 0.1 that warn (bert_tf/_moved.py)
    return _moved.renamed(__name__, name)
