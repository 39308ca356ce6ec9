"""Task kinds: one folder each (`bert_tf/tasks/<kind>/`), found by name in
one registry (`bert_tf.tasks.base.register`).

Fine-tuning, export, `bert-tf finetune / export / predict` and the demo ask
the registry and never name a task. Adding a task kind is one folder (its
config, data, features, model, decoding, metrics, task and serving
modules, its `Task` subclass decorated with `@register`), its configs and
its tests.

Examples:
    >>> get_task_class("span_qa").__name__
    'SpanQA'
    >>> "tagging" in fine_tuned_kinds()
    True
"""

from bert_tf.tasks.base import (DEFAULT_KIND, Task, available_kinds,
                                fine_tuned_kinds, get_config_class, get_kind,
                                kind_of_model, read_spec, restore_finetuned,
                                task_config_of)


def get_export_class(kind):
    """The class that prints `bert-tf predict` results for an export of
    `kind` (a task kind or an export-only kind)."""
    return get_kind(kind)


def get_task_class(kind):
    """The `Task` subclass of a fine-tuned task kind."""
    if kind not in available_kinds():
        raise ValueError(f"task.kind = {kind!r}: use one of "
                         f"{', '.join(fine_tuned_kinds())}.")
    cls = get_kind(kind)
    if not issubclass(cls, Task):
        raise ValueError(f"task.kind = {kind!r} is exported from a "
                         f"pre-trained encoder, not fine-tuned: use one of "
                         f"{', '.join(fine_tuned_kinds())}.")
    return cls


def load_data(task):
    """The data of any task kind, from a `task:` section (a mapping, with
    its `kind`; default classification) or a kind's typed config.

    Examples:
        >>> data = load_data({"kind": "tagging", "name": "sample:wnut_ner"})
        >>> data.name, sorted(data.splits)
        ('sample:wnut_ner', ['test', 'train', 'validation'])
    """
    import dataclasses

    spec = task if dataclasses.is_dataclass(task) else task_config_of(task)
    return get_task_class(spec.kind).load_data(spec)


def load_finetuned(directory, dtype=None):
    """(task, model, vocab, best directory) of a `bert-tf finetune` run,
    or of a fine-tuned HF checkpoint (a directory, `hf:PATH` or
    `hf://ORG/NAME[@REV]` whose config.json names a task head:
    `bert_tf.tasks.hf_runs`), with its labels.

    Examples:
        >>> task, model, vocab, best = load_finetuned(example_files.finetuned())
        >>> task.kind, best.name
        ('classification', 'best')
    """
    from bert_tf.tasks import hf_runs

    if hf_runs.is_task_checkpoint(directory):
        task, model, vocab = hf_runs.from_hf(directory, dtype=dtype)
        return task, model, vocab, hf_runs.hf_directory(directory)
    best, spec = read_spec(directory)
    task = get_task_class(spec.kind)(spec)
    model, vocab = restore_finetuned(task, best, dtype=dtype)
    return task, model, vocab, best


def evaluate_run(directory, overrides=(), split="test", batch_size=32,
                 log=print, data_file=None, label_map=None):
    """{metric: value} of a run (or a fine-tuned HF checkpoint:
    `load_finetuned`) on `split` of its data, through the same
    post-processing as its serving signature.

    Args:
        directory: the run.
        overrides: `key=value` strings over the run's `task.yaml` that name
            other data (`name=sample:rt_sentiment`, `name=local`,
            `test_file=PATH`, ...); the labels stay the run's.
        split: `train`, `validation` or `test`.
        batch_size: examples per batch.
        log: where the line naming the data goes.
        data_file: a local file of the run's kind to score instead (its
            format as the kind's `local` data; `split` is then `test`).
        label_map: {data label: run label}, to score data whose labels
            are not the run's (`bert_tf.tasks.labels.data_to_run`).
    """
    from bert_tf import config as config_lib
    from bert_tf.config_io import apply_overrides
    from bert_tf.tasks import labels as labels_lib

    task, model, vocab, _ = load_finetuned(directory)
    if data_file is not None:
        overrides = ["name=local", f"train_file={data_file}",
                     f"test_file={data_file}", *overrides]
        split = "test"
    fields = apply_overrides(config_lib.to_dict(task.spec), overrides)
    spec = config_lib.from_dict(type(task.spec), fields, "task")
    try:
        spec.validate("task")
        task = type(task)(spec)
        data = task.load_data(spec)
    except (ValueError, FileNotFoundError) as error:
        if overrides:
            raise
        raise ValueError(
            f"{directory} names no data it can read ({spec.name}: "
            f"{error}); a converted run has none of its own: evaluate it "
            "with --data FILE (a file of its kind) or --set name=...") \
            from None
    run_labels = getattr(spec, "labels", None)
    if run_labels and getattr(data, "labels", None):
        order = labels_lib.data_to_run(data.labels, run_labels, spec.name,
                                       label_map)
        data = data.relabeled(run_labels, order)
    if split not in data.splits:
        raise ValueError(f"{spec.name} has no {split} split; it has "
                         f"{', '.join(sorted(data.splits))} (--split).")
    log(f"{task.kind} run {directory} on {spec.name} ({split})")
    return task.evaluate(model, data, split, vocab, batch_size)


__all__ = ["DEFAULT_KIND", "available_kinds", "evaluate_run",
           "fine_tuned_kinds", "get_config_class", "get_export_class",
           "get_kind", "get_task_class", "kind_of_model", "load_data",
           "load_finetuned", "read_spec", "task_config_of"]
