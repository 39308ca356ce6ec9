"""Exports: SavedModels of every kind (`export.py`), the TF Hub pair
(`hub.py`) and TFLite (`tflite.py`). `bert-tf export` chooses one by
format and, for a fine-tuning run, the run's own kind; `kind` names an
export-only kind of a pre-trained checkpoint (`embeddings`, `fill_mask`).
Each format's writer and the options it takes are a table here
(`RUN_WRITERS`), which imports no TensorFlow, so that a usage error is
refused in a fraction of a second; an export-only kind adds its own
options (its `build_export` or `build_tflite`).
"""

import inspect
import warnings

from bert_tf.serving.limits import LIMIT_OPTIONS

FORMATS = ("savedmodel", "hub", "tflite")
# Arguments every writer takes that are not export options.
_NOT_OPTIONS = {"checkpoint", "out", "log", "overwrite", "kind", "dtype",
                "options"}


def export_only_kinds(format):
    """The kinds `--kind` names for `format`: export-only kinds (built
    from a pre-trained checkpoint) whose writer exists for it.

    Examples:
        >>> export_only_kinds("savedmodel"), export_only_kinds("tflite")
        (['embeddings', 'fill_mask'], ['embeddings'])
    """
    from bert_tf import tasks

    if format == "hub":
        return []
    kinds = [k for k in tasks.available_kinds()
             if not issubclass(tasks.get_kind(k), tasks.Task)]
    if format == "tflite":
        kinds = [k for k in kinds if tasks.get_kind(k).has_tflite()]
    return kinds


def _export_model(*args, **kwargs):
    from bert_tf.serving.export import export_model
    return export_model(*args, **kwargs)


def _export_hub(*args, **kwargs):
    from bert_tf.serving.hub import export_hub
    return export_hub(*args, **kwargs)


def _export_tflite(*args, **kwargs):
    from bert_tf.serving.tflite import export_tflite
    return export_tflite(*args, **kwargs)


def _export_kind(*args, **kwargs):
    from bert_tf.serving.export import export
    return export(*args, **kwargs)


# What each writer takes beyond checkpoint, out, log and overwrite: kept
# here, beside the writers it calls, so that a usage error is refused
# before TensorFlow is imported (tests/test_cli.py holds each equal to the
# writer's own arguments).
SAVEDMODEL_OPTIONS = frozenset({
    "fixed_length", "precision", "calibration", "calibration_texts",
    "server_config", *LIMIT_OPTIONS})
HUB_OPTIONS = frozenset({
    "seq_length", "lower_case", "precision", "calibration_texts",
    *LIMIT_OPTIONS})
TFLITE_OPTIONS = frozenset({"quantize"})
# A fine-tuning run's writer in each format, and the options it takes.
RUN_WRITERS = {"savedmodel": (_export_model, SAVEDMODEL_OPTIONS),
               "hub": (_export_hub, HUB_OPTIONS),
               "tflite": (_export_tflite, TFLITE_OPTIONS)}


def _options(function):
    return {name for name in inspect.signature(function).parameters
            if name not in _NOT_OPTIONS}


def route(format, kind=None):
    """(writer, its leading arguments, the options it takes) of an export
    of `format`; `kind` None is a fine-tuning run (its own kind), else an
    export-only kind."""
    if format not in FORMATS:
        raise ValueError(f"--format {format}: use one of "
                         f"{', '.join(FORMATS)}.")
    if kind is None:
        writer, takes = RUN_WRITERS[format]
        return writer, (), set(takes)
    from bert_tf import tasks
    if kind not in export_only_kinds(format):
        kinds = export_only_kinds(format)
        raise ValueError(
            f"--format {format} exports a fine-tuning run (no --kind)"
            f"{''.join(f' or --kind {k}' for k in kinds)}, not --kind "
            f"{kind}.")
    if format == "tflite":
        return (lambda *a, **k: _export_tflite(*a, kind=kind, **k), (),
                set(TFLITE_OPTIONS) | _options(
                    tasks.get_kind(kind).build_tflite))
    # An export-only kind has no training examples to calibrate on; its
    # writer takes the run's options and its kind's own.
    takes = (set(SAVEDMODEL_OPTIONS) - {"calibration"}) | _options(
        tasks.get_kind(kind).build_export)
    return _export_kind, (kind,), takes


def old_kind_spelling(format, kind):
    """(format, kind) for the spellings before `--format hub` and the
    run's own kind: `--kind task` is no `--kind`; `--kind hub` is
    `--format hub`. Each warns."""
    if kind == "task":
        warnings.warn("--kind task is no longer needed: a run exports as "
                      "its own kind.", FutureWarning, stacklevel=3)
        return format, None
    if kind == "hub" and format != "savedmodel":
        raise ValueError(f"--kind hub (now --format hub) cannot be combined "
                         f"with --format {format}.")
    if kind == "hub":
        warnings.warn("--kind hub is now --format hub.", FutureWarning,
                      stacklevel=3)
        return "hub", None
    return format, kind


def write_export(format, kind, checkpoint, out, log=print, overwrite=False,
                 **options):
    """Writes the export of `checkpoint` in `format` (`savedmodel`, `hub`,
    `tflite`): a fine-tuning run as its own kind (`kind` None), or an
    export-only `kind` of a pre-trained checkpoint. An option given (not
    None) that the export does not take is refused, naming it. Returns the
    writer's report.

    Examples:
        >>> write_export("tflite", "fill_mask", "ckpt", "out.tflite")
        Traceback (most recent call last):
        ...
        ValueError: --format tflite exports a fine-tuning run (no --kind) or --kind embeddings, not --kind fill_mask.
        >>> write_export("tflite", None, "ckpt", "out.tflite", precision="bf16")
        Traceback (most recent call last):
        ...
        ValueError: --precision does not apply to --format tflite; it applies to --format savedmodel or --format hub. This export takes --quantize.
    """
    format, kind = old_kind_spelling(format, kind)
    writer, leading, takes = route(format, kind)
    given = {k: v for k, v in options.items() if v is not None}
    for name in given:
        if name not in takes:
            raise ValueError(_refusal(name, format, kind, takes))
    return writer(*leading, checkpoint, out, log=log, overwrite=overwrite,
                  **given)


def _flag(option):
    return "--" + option.replace("_", "-")


def _refusal(name, format, kind, takes, typed=None):
    """One line: `name` (typed as `typed`, by default its flag) does not
    apply here, where it does, and what does. The kinds (whose registry
    imports TensorFlow) are asked only for an option no format's run
    export takes."""
    where = [f"--format {f}" for f in FORMATS if name in route(f)[2]]
    if not where:
        where = [f"--kind {k}" for f in FORMATS for k in export_only_kinds(f)
                 if name in route(f, k)[2]]
    what = f"--format {format}" + (f" --kind {kind}" if kind else "")
    return (f"{typed or _flag(name)} does not apply to {what}; it applies to "
            f"{' or '.join(dict.fromkeys(where)) or 'no export'}. This "
            f"export takes {', '.join(_flag(o) for o in sorted(takes))}.")
