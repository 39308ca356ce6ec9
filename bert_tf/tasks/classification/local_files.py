"""Local task files: TSV, CSV or JSON Lines with named text and label
columns."""

import csv
import json

import numpy as np
import tensorflow as tf

from bert_tf.storage import GPath
from bert_tf.tasks.classification.task_data import TaskData

FORMATS = ("tsv", "csv", "jsonl")


def _format(path, fmt):
    fmt = fmt or GPath(path).suffix.lstrip(".").lower()
    fmt = {"json": "jsonl", "txt": "tsv"}.get(fmt, fmt)
    if fmt not in FORMATS:
        raise ValueError(f"{path}: cannot tell the format from its name; "
                         f"pass format= one of {', '.join(FORMATS)}.")
    return fmt


def read_rows(path, fmt=None):
    """Rows of a TSV/CSV (first line: column names) or JSONL file as dicts.

    Invalid UTF-8 bytes become U+FFFD rather than failing the file.
    """
    path = GPath(path)
    if not path.is_file():
        raise FileNotFoundError(f"Task file {path} does not exist.")
    fmt = _format(path, fmt)
    with path.open(errors="replace", newline="") as f:
        if fmt == "jsonl":
            rows = []
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{number}: not valid JSON "
                                     f"({e.msg}).") from None
                if not isinstance(row, dict):
                    raise ValueError(f"{path}:{number}: each line must be a "
                                     "JSON object.")
                rows.append(row)
            return rows
        reader = csv.DictReader(
            f, delimiter="\t" if fmt == "tsv" else ",",
            quoting=csv.QUOTE_NONE if fmt == "tsv" else csv.QUOTE_MINIMAL)
        return list(reader)


def _column(rows, key, path, line_offset):
    values = []
    for number, row in enumerate(rows):
        if key not in row or row[key] is None:
            raise ValueError(
                f"{path}:{number + line_offset}: no column {key!r}; the "
                f"columns are {', '.join(map(str, row))}.")
        values.append(row[key])
    return values


def load_local(train, validation=None, test=None, text="text", text_b="",
               label="label", labels=None, regression=False, metrics=None,
               fmt=None, name="local"):
    """A `TaskData` from local files.

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

    Example:
    >>> files = example_files.toy_task()
    >>> task = load_local(files / "train.tsv", files / "dev.tsv",
    ...                   text="sentence", label="label")
    >>> task.labels, task.size("validation")
    (('negative', 'positive'), 64)
    """
    paths = {"train": train, "validation": validation, "test": test}
    paths = {k: v for k, v in paths.items() if v}
    rows = {split: read_rows(path, fmt) for split, path in paths.items()}
    offset = {split: 1 if _format(path, fmt) == "jsonl" else 2
              for split, path in paths.items()}
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
    return TaskData(name, labels, bool(text_b), tuple(metrics), splits, sizes)
