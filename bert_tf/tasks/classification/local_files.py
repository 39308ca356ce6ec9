"""Local task files: TSV, CSV or JSON Lines with named text and label
columns."""

import numpy as np
import tensorflow as tf

from bert_tf.tasks.classification.task_data import ClassificationData
from bert_tf.tasks.local_rows import column as _column
from bert_tf.tasks.local_rows import first_line, read_rows


def load_local(train, validation=None, test=None, text="text", text_b="",
               label="label", labels=None, regression=False, metrics=None,
               fmt=None, name="local"):
    """A `ClassificationData` from local files.

    Args:
        train, validation, test: file paths (validation/test optional).
        text: the column holding the (first) text.
        text_b: the column of the second text, for pair tasks.
        label: the label column (class names, or numbers for regression).
        labels: class names in id order (default: sorted names in train).
        regression: labels are numbers (one output, Pearson/Spearman).
        metrics: metric names (default: accuracy and, for two classes, F1;
            Pearson/Spearman for regression).
        fmt: `tsv`, `csv` or `jsonl` (default: from the file name).
        name: the task's name.

    Examples:
        >>> files = example_files.toy_task()
        >>> task = load_local(files / "train.tsv", files / "dev.tsv",
        ...                   text="sentence", label="label")
        >>> task.labels, task.size("validation")
        (('negative', 'positive'), 64)
    """
    paths = {"train": train, "validation": validation, "test": test}
    paths = {k: v for k, v in paths.items() if v}
    rows = {split: read_rows(path, fmt) for split, path in paths.items()}
    offset = {split: first_line(path, fmt) for split, path in paths.items()}
    if not rows["train"]:
        raise ValueError(f"{train}: no examples.")
    if regression:
        labels = ()
    elif labels is None:
        labels = sorted({str(v) for v in _column(
            rows["train"], label, train, offset["train"])})
    labels = tuple(str(x) for x in labels)
    label_ids = {name: i for i, name in enumerate(labels)}
    splits, sizes = {}, {}
    for split, split_rows in rows.items():
        path = paths[split]
        features = {"text": _column(split_rows, text, path, offset[split])}
        if text_b:
            features["text_b"] = _column(split_rows, text_b, path,
                                         offset[split])
        raw = _column(split_rows, label, path, offset[split])
        if regression:
            try:
                values = np.array([float(v) for v in raw], np.float32)
            except ValueError as e:
                raise ValueError(f"{path}: regression labels must be "
                                 f"numbers ({e}).") from None
        else:
            unknown = sorted({str(v) for v in raw} - set(label_ids))
            if unknown:
                raise ValueError(
                    f"{path}: label(s) {unknown[:5]} are not among the task's"
                    f" labels {list(labels)}.")
            values = np.array([label_ids[str(v)] for v in raw], np.int64)
        features = {k: np.array([str(s) for s in v], dtype=object)
                    for k, v in features.items()}
        features["label"] = values
        splits[split] = tf.data.Dataset.from_tensor_slices(features)
        sizes[split] = len(values)
    if metrics is None:
        metrics = (("pearson", "spearman") if regression else
                   ("accuracy", "f1") if len(labels) == 2 else
                   ("accuracy",))
    return ClassificationData(name, labels, bool(text_b), tuple(metrics),
                              splits, sizes)
