"""The nine GLUE tasks through TensorFlow Datasets (`glue/NAME`).

Each config's text features are renamed to `text`/`text_b`; labels keep
TFDS's ids (their names below are TFDS's `ClassLabel` names), -1 marks the
unlabeled test split. Metrics are GLUE's: MCC for CoLA, accuracy and F1 for
MRPC/QQP, Pearson/Spearman for STS-B, accuracy elsewhere.
"""

import dataclasses

import tensorflow as tf

from bert_tf.tasks.classification.task_data import ClassificationData


@dataclasses.dataclass(frozen=True)
class GlueTask:
    text: str
    text_b: str
    labels: tuple
    metrics: tuple
    validation: str = "validation"
    test: str = "test"
    extra_splits: tuple = ()


GLUE_TASKS = {
    "cola": GlueTask("sentence", "", ("unacceptable", "acceptable"),
                     ("mcc", "accuracy")),
    "sst2": GlueTask("sentence", "", ("negative", "positive"),
                     ("accuracy",)),
    "mrpc": GlueTask("sentence1", "sentence2",
                     ("not_equivalent", "equivalent"), ("f1", "accuracy")),
    "qqp": GlueTask("question1", "question2",
                    ("not_duplicate", "duplicate"), ("f1", "accuracy")),
    "stsb": GlueTask("sentence1", "sentence2", (), ("pearson", "spearman")),
    "mnli": GlueTask("premise", "hypothesis",
                     ("entailment", "neutral", "contradiction"),
                     ("accuracy",), validation="validation_matched",
                     test="test_matched",
                     extra_splits=("validation_mismatched",
                                   "test_mismatched")),
    "qnli": GlueTask("question", "sentence",
                     ("entailment", "not_entailment"), ("accuracy",)),
    "rte": GlueTask("sentence1", "sentence2",
                    ("entailment", "not_entailment"), ("accuracy",)),
    "wnli": GlueTask("sentence1", "sentence2",
                     ("not_entailment", "entailment"), ("accuracy",)),
}


def load_glue(name, data_dir=None):
    """GLUE config `name` as a `ClassificationData` (train/validation/test).

    MNLI's matched sets are `validation`/`test`; the mismatched ones keep
    their TFDS names.

    Args:
        name: one of `GLUE_TASKS`.
        data_dir: TFDS data directory (default: TFDS's).

    Examples:
        >>> task = load_glue("mrpc")  # TFDS download  # doctest: +SKIP
        >>> GLUE_TASKS["mrpc"].labels, GLUE_TASKS["mrpc"].metrics
        (('not_equivalent', 'equivalent'), ('f1', 'accuracy'))
    """
    import tensorflow_datasets as tfds

    if name not in GLUE_TASKS:
        raise ValueError(f"Unknown GLUE task {name!r}; choose one of "
                         f"{', '.join(GLUE_TASKS)}.")
    spec = GLUE_TASKS[name]
    builder = tfds.builder(f"glue/{name}", data_dir=data_dir)
    label_dtype = tf.float32 if not spec.labels else tf.int64

    def convert(example):
        out = {"text": example[spec.text],
               "label": tf.cast(example["label"], label_dtype)}
        if spec.text_b:
            out["text_b"] = example[spec.text_b]
        return out

    ours = {"train": "train", "validation": spec.validation,
            "test": spec.test}
    ours.update({s: s for s in spec.extra_splits})
    splits, sizes = {}, {}
    known = builder.info.splits
    for split, tfds_split in ours.items():
        dataset = tfds.load(f"glue/{name}", split=tfds_split,
                            data_dir=data_dir, shuffle_files=False)
        splits[split] = dataset.map(convert)
        if tfds_split in known:
            sizes[split] = known[tfds_split].num_examples
    return ClassificationData(f"glue/{name}", spec.labels, bool(spec.text_b),
                    spec.metrics, splits, sizes)
