"""Exports: SavedModels of every kind (`export.py`), the TF Hub pair
(`hub.py`) and TFLite (`tflite.py`). `bert-tf export` chooses one by
format and, for a fine-tuning run, the run's own kind; `kind` names an
export-only kind of a pre-trained checkpoint (`embeddings`, `fill_mask`).
Which kinds and options each format takes is read from the kind registry
and the writers' own arguments, not kept in a table.
"""

import importlib
import inspect
import warnings

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


def _options(function):
    return {name for name in inspect.signature(function).parameters
            if name not in _NOT_OPTIONS}


def route(format, kind=None):
    """(writer, its leading arguments, the options it takes) of an export
    of `format`; `kind` None is a fine-tuning run (its own kind), else an
    export-only kind."""
    from bert_tf import tasks

    if format not in FORMATS:
        raise ValueError(f"--format {format}: use one of "
                         f"{', '.join(FORMATS)}.")
    if kind is not None and kind not in export_only_kinds(format):
        kinds = export_only_kinds(format)
        raise ValueError(
            f"--format {format} exports a fine-tuning run (no --kind)"
            f"{''.join(f' or --kind {k}' for k in kinds)}, not --kind "
            f"{kind}.")
    module = importlib.import_module(
        f"bert_tf.serving.{'export' if format == 'savedmodel' else format}")
    if format == "hub":
        return module.export_hub, (), _options(module.export_hub)
    if format == "tflite":
        own = _options(tasks.get_kind(kind).build_tflite) if kind else set()
        return (module.export_tflite, (), {"quantize"} | own) if kind is \
            None else (lambda *a, **k: module.export_tflite(
                *a, kind=kind, **k), (), {"quantize"} | own)
    if kind is None:
        return module.export_model, (), _options(module.export_model)
    # An export-only kind has no training examples to calibrate on.
    takes = (_options(module.export) - {"calibration"}) | _options(
        tasks.get_kind(kind).build_export)
    return module.export, (kind,), takes


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


def _refusal(name, format, kind, takes):
    """One line: `name` does not apply here, where it does, and what does."""
    where = [f"--format {f}" for f in FORMATS if name in route(f)[2]] + [
        f"--kind {k}" for f in FORMATS for k in export_only_kinds(f)
        if name in route(f, k)[2] and name not in route(f)[2]]
    what = f"--format {format}" + (f" --kind {kind}" if kind else "")
    return (f"{_flag(name)} does not apply to {what}; it applies to "
            f"{' or '.join(dict.fromkeys(where)) or 'no export'}. This "
            f"export takes {', '.join(_flag(o) for o in sorted(takes))}.")
