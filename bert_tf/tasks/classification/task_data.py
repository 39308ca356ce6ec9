"""`ClassificationData`, the common shape of every classification or
regression task, and the input pipeline from its examples to batches of
encoder inputs."""

import dataclasses
import typing

import tensorflow as tf

from bert_tf.tasks.batching import bucket_by_length, split_of
from bert_tf.tasks.metrics import METRICS


@dataclasses.dataclass
class ClassificationData:
    """A sentence(-pair) classification or regression task.

    Attributes:
        name: e.g. `glue/mrpc`, `sample:rt_sentiment`.
        labels: class names in id order; empty for regression.
        pair: examples have `text_b`.
        metrics: metric names (`bert_tf.tasks.metrics`); the first is
            the one that picks the best checkpoint.
        splits: {split: tf.data.Dataset of {"text", ["text_b"], "label"}};
            labels are int64 class ids (-1: unlabeled test data) or float32
            scores.
        sizes: {split: number of examples} where known.
    """

    name: str
    labels: typing.Tuple[str, ...]
    pair: bool
    metrics: typing.Tuple[str, ...]
    splits: dict
    sizes: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        self.labels = tuple(self.labels)
        unknown = [m for m in self.metrics if m not in METRICS]
        if unknown:
            raise ValueError(f"Task {self.name}: unknown metric(s) {unknown};"
                             f" known: {', '.join(METRICS)}.")

    @property
    def is_regression(self):
        return not self.labels

    @property
    def num_classes(self):
        """Model outputs: the number of classes, 1 for regression."""
        return len(self.labels) or 1

    def split(self, name):
        return split_of(self, name)

    def relabeled(self, labels, order):
        """This data with `labels` as its class names (a run's), each
        example's class id `i` becoming `order[i]` (`bert_tf.tasks.labels.
        data_to_run`); unlabeled (-1) stays so."""
        table = tf.constant(list(order) + [-1], tf.int64)

        def relabel(example):
            label = tf.cast(example["label"], tf.int64)
            return {**example, "label": tf.gather(table, tf.where(
                label < 0, tf.constant(len(order), tf.int64), label))}

        return dataclasses.replace(
            self, labels=tuple(labels),
            splits={k: v.map(relabel) for k, v in self.splits.items()})

    def size(self, name):
        """Examples in split `name` (counted once when not known)."""
        if self.sizes.get(name) is None:
            dataset = self.split(name)
            count = int(dataset.cardinality())
            if count < 0:
                count = int(dataset.reduce(0, lambda n, _: n + 1))
            self.sizes[name] = count
        return self.sizes[name]


def classification_dataset(task, split, preprocessor, batch_size,
                           shuffle=False, repeat=False, seed=0,
                           drop_remainder=False, input_context=None,
                           dynamic_length=False):
    """Batches of `(encoder inputs, label)` for a task split.

    The strings are tokenized and packed in the `tf.data` graph by
    `preprocessor` (a `BertPreprocessor`), the same layer the exported
    serving graph runs.

    Args:
        task: a `ClassificationData`.
        split: split name.
        preprocessor: a `BertPreprocessor`.
        batch_size: examples per batch.
        shuffle: shuffle the whole split each epoch (seeded).
        repeat: repeat forever (training).
        seed: shuffle seed.
        drop_remainder: fixed-size batches (TPU).
        input_context: a `tf.distribute.InputContext`: each input pipeline
            reads its own shard, `batch_size` is then per replica.
        dynamic_length: group examples of similar length into batches and
            cut each batch to its longest row (~2x faster on short texts;
            the outputs of a model do not depend on padding). Not for XLA
            or TPUs, which want one shape.

    Examples:
        >>> from bert_tf.tasks.classification.local_files import load_local
        >>> from bert_tf.text.preprocessor import BertPreprocessor
        >>> files = example_files.toy_task()
        >>> task = load_local(files / "train.tsv", text="sentence")
        >>> preprocessor = BertPreprocessor(str(files / "vocab.txt"), 16)
        >>> x, y = next(iter(classification_dataset(task, "train",
        ...                                         preprocessor, 8)))
        >>> tuple(x["input_word_ids"].shape), tuple(y.shape)
        ((8, 16), (8,))
    """
    dataset = task.split(split)
    pipelines = input_context.num_input_pipelines if input_context else 1
    if pipelines > 1:
        dataset = dataset.shard(pipelines, input_context.input_pipeline_id)
    if shuffle:
        size = task.size(split) // pipelines
        dataset = dataset.shuffle(min(max(size, 1), 100_000), seed=seed,
                                  reshuffle_each_iteration=True)
    if repeat:
        dataset = dataset.repeat()
    pair = task.pair

    def encode(batch):
        text = (batch["text"], batch["text_b"]) if pair else batch["text"]
        return preprocessor(text), batch["label"]

    if not dynamic_length:
        dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
        return dataset.map(encode, num_parallel_calls=tf.data.AUTOTUNE,
                           deterministic=True).prefetch(tf.data.AUTOTUNE)
    dataset = dataset.map(encode, num_parallel_calls=tf.data.AUTOTUNE,
                          deterministic=True)
    return bucket_by_length(dataset, batch_size, preprocessor.seq_length,
                            drop_remainder).prefetch(tf.data.AUTOTUNE)
