"""Exports: SavedModels of every kind (`export.py`), the TF Hub pair
(`hub.py`) and TFLite (`tflite.py`), found in one table by (format, kind),
what `bert-tf export` looks up.
"""

import importlib

# (format, --kind) -> (writer, the kind it writes or None, the options it
# takes). `task` is a fine-tuning run of any kind; the others are built
# from a pre-trained checkpoint.
ROUTES = {
    ("savedmodel", "task"): ("export:export_model", None, (
        "fixed_length", "precision", "calibration", "calibration_texts",
        "max_input_chars", "max_batch_chars")),
    ("savedmodel", "embeddings"): ("export:export", "embeddings", (
        "fixed_length", "precision", "calibration_texts", "seq_length",
        "normalize", "max_input_chars", "max_batch_chars")),
    ("savedmodel", "fill_mask"): ("export:export", "fill_mask", (
        "fixed_length", "precision", "calibration_texts", "seq_length",
        "marker", "top_k", "max_masks", "max_input_chars",
        "max_batch_chars")),
    ("savedmodel", "hub"): ("hub:export_hub", None, (
        "seq_length", "precision", "calibration_texts")),
    ("tflite", "task"): ("tflite:export_tflite", None, ("quantize",)),
    ("tflite", "embeddings"): ("tflite:export_tflite_embeddings", None,
                               ("quantize", "seq_length", "normalize")),
}


def write_export(format, kind, checkpoint, out, log=print, overwrite=False,
                 **options):
    """Writes the export of `checkpoint` that (`format`, `kind`) names, with
    the options its writer takes (others are not for it and are ignored;
    None means the writer's default). Returns the writer's report.

    Examples:
        >>> write_export("tflite", "hub", "ckpt", "out.tflite")
        Traceback (most recent call last):
        ...
        ValueError: --format tflite exports --kind task or --kind embeddings, not --kind hub.
    """
    if (format, kind) not in ROUTES:
        kinds = " or ".join(f"--kind {k}" for f, k in ROUTES if f == format)
        raise ValueError(f"--format {format} exports {kinds}, not --kind "
                         f"{kind}.")
    path, export_kind, takes = ROUTES[format, kind]
    module, _, name = path.partition(":")
    writer = getattr(importlib.import_module(f"bert_tf.serving.{module}"),
                     name)
    chosen = {k: v for k, v in options.items()
              if k in takes and v is not None}
    leading = (export_kind,) if export_kind else ()
    return writer(*leading, checkpoint, out, log=log, overwrite=overwrite,
                  **chosen)
