"""Scored sentence pairs: `glue/stsb` (TFDS, scores 0..5) or local TSV/CSV/
JSONL files with two text columns and a numeric score column. Scores are
scaled to [0, 1] by `max_score` (the cosine target)."""

import dataclasses
import typing

import numpy as np
import tensorflow as tf

from bert_tf.tasks.batching import split_of
from bert_tf.tasks.local_rows import column, first_line, read_rows


@dataclasses.dataclass
class PairData:
    """Scored pairs per split: {split: (texts_a, texts_b, scores in [0, 1])}."""

    name: str
    splits: typing.Dict[str, tuple]

    def split(self, name):
        return split_of(self, name)

    def size(self, name):
        return len(self.split(name)[0])


def _scores(values, where, max_score):
    try:
        scores = np.array([float(v) for v in values], np.float32)
    except ValueError:
        raise ValueError(f"{where}: scores must be numbers.") from None
    if len(scores) and (scores.min() < 0 or scores.max() > max_score):
        raise ValueError(f"{where}: scores must be in [0, {max_score}] "
                         "(task.max_score).")
    return scores / max_score


def load_local_pairs(train, validation=None, test=None, text="text",
                     text_b="text_b", label="label", max_score=1.0, fmt=None):
    """`PairData` from local files with columns `text`, `text_b` and a
    numeric `label` in [0, `max_score`]."""
    splits = {}
    for split, path in (("train", train), ("validation", validation),
                        ("test", test)):
        if not path:
            continue
        rows = read_rows(path, fmt)
        if not rows:
            raise ValueError(f"{path}: no examples.")
        line = first_line(path, fmt)
        splits[split] = (column(rows, text, path, line),
                         column(rows, text_b, path, line),
                         _scores(column(rows, label, path, line), path,
                                 max_score))
    return PairData("local", splits)


def load_stsb(data_dir=None):
    """GLUE STS-B from TFDS (scores 0..5; the test split is unlabeled and
    left out)."""
    import tensorflow_datasets as tfds

    splits = {}
    for split in ("train", "validation"):
        rows = list(tfds.load("glue/stsb", split=split, data_dir=data_dir)
                    .as_numpy_iterator())
        splits[split] = ([r["sentence1"].decode("utf-8", "replace")
                          for r in rows],
                         [r["sentence2"].decode("utf-8", "replace")
                          for r in rows],
                         _scores([r["label"] for r in rows], "glue/stsb", 5.0))
    return PairData("glue/stsb", splits)


def load_pairs(spec, data_dir=None, seed=0, train=None, validation=None,
               test=None, **columns):
    """A `PairData` from a spec: `glue/stsb` or `local` (both have fixed
    splits, so `seed` changes nothing)."""
    if spec == "glue/stsb":
        return load_stsb(data_dir)
    if spec == "local":
        if not train:
            raise ValueError("A local similarity task needs task.train_file.")
        return load_local_pairs(train, validation, test, **columns)
    raise ValueError(f"Unknown similarity task {spec!r}: use glue/stsb or "
                     "local (TSV/CSV/JSONL with two texts and a score).")


def pair_dataset(data, split):
    """The split as a `tf.data` dataset of {"text", "text_b", "score"}."""
    texts, texts_b, scores = data.split(split)
    return tf.data.Dataset.from_tensor_slices({
        "text": np.array(texts, dtype=object),
        "text_b": np.array(texts_b, dtype=object),
        "score": np.asarray(scores, np.float32)})
