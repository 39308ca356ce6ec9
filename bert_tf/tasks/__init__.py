"""Task kinds: one module each, found by the `task.kind` config value.

Fine-tuning, export, `bert-tf finetune / export / predict` and the demo ask
these modules and never name a task. Adding a task kind is one module (a
`bert_tf.tasks.base.Task` subclass), one entry in `KINDS`, a config and
its tests.

Example:
>>> get_task_class("span_qa").__name__
'SpanQA'
"""

import importlib

from bert_tf.tasks.base import read_spec, restore_finetuned

KINDS = {
    "classification": "bert_tf.tasks.classification:Classification",
    "span_qa": "bert_tf.tasks.span_qa:SpanQA",
    "tagging": "bert_tf.tasks.tagging:Tagging",
    "multiple_choice": "bert_tf.tasks.multiple_choice:MultipleChoice",
}


# Kinds that are exported from a pre-trained encoder, not fine-tuned.
EXPORT_KINDS = {
    "embeddings": "bert_tf.tasks.features:Embeddings",
    "fill_mask": "bert_tf.tasks.fill_mask:FillMask",
}


def _load(path):
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def get_export_class(kind):
    """The class that prints `bert-tf predict` results for an export of
    `kind` (a task kind or one of `EXPORT_KINDS`)."""
    if kind in EXPORT_KINDS:
        return _load(EXPORT_KINDS[kind])
    return get_task_class(kind)


def get_task_class(kind):
    """The `Task` subclass of a task kind."""
    if kind not in KINDS:
        raise ValueError(f"task.kind = {kind!r}: use one of "
                         f"{', '.join(KINDS)}.")
    return _load(KINDS[kind])


def load_finetuned(directory, dtype=None):
    """(task, model, vocab, best directory) of a `bert-tf finetune` run.

    Example:
    >>> task, model, vocab, best = load_finetuned(example_files.finetuned())
    >>> task.kind, best.name
    ('classification', 'best')
    """
    best, spec = read_spec(directory)
    task = get_task_class(spec["kind"])(spec)
    model, vocab = restore_finetuned(task, best, dtype=dtype)
    return task, model, vocab, best


__all__ = ["EXPORT_KINDS", "KINDS", "get_export_class", "get_task_class",
           "load_finetuned"]
