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
}


def get_task_class(kind):
    """The `Task` subclass of a task kind."""
    if kind not in KINDS:
        raise ValueError(f"task.kind = {kind!r}: use one of "
                         f"{', '.join(KINDS)}.")
    module, _, name = KINDS[kind].partition(":")
    return getattr(importlib.import_module(module), name)


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


__all__ = ["KINDS", "get_task_class", "load_finetuned"]
