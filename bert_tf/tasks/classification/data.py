"""The classification readers: GLUE via TFDS, local TSV/CSV/JSONL files and
the real RT sentiment sample, each a `ClassificationData` whose splits are
`tf.data` datasets of `{"text", "text_b" (pair tasks), "label"}` examples.
"""

from bert_tf.tasks.classification.digests import load_rt_digests
from bert_tf.tasks.classification.glue import GLUE_TASKS, load_glue
from bert_tf.tasks.classification.local_files import load_local
from bert_tf.tasks.classification.sentiment import load_rt_sentiment
from bert_tf import _moved
from bert_tf.tasks.classification.task_data import (ClassificationData,
                                                    classification_dataset)

__all__ = ["GLUE_TASKS", "ClassificationData", "classification_dataset",
           "load_classification", "load_glue", "load_local",
           "load_rt_digests", "load_rt_sentiment"]


def __getattr__(name):  # names of 0.1 that warn (bert_tf/_moved.py)
    return _moved.renamed(__name__, name)


def load_classification(spec, cache=None, data_dir=None, seed=0,
                        **local_args):
    """A `ClassificationData` from a spec string.

    Args:
        spec: `glue/NAME` (TFDS), `sample:rt_sentiment` (the real RT movie
            snippets), `sample:rt_digests` (long documents made of them,
            see `digests.py`) or `local` (files given in `local_args`, see
            `load_local`).
        cache: sample cache directory.
        data_dir: TFDS data directory.
        seed: split seed for the sample.
    """
    if spec.startswith("glue/"):
        return load_glue(spec.split("/", 1)[1], data_dir=data_dir)
    if spec == "sample:rt_sentiment":
        return load_rt_sentiment(cache=cache, seed=seed)
    if spec == "sample:rt_digests":
        return load_rt_digests(cache=cache, seed=seed)
    if spec == "local":
        return load_local(**local_args)
    raise ValueError(f"Unknown task {spec!r}: use glue/NAME (one of "
                     f"{', '.join(GLUE_TASKS)}), sample:rt_sentiment, "
                     "sample:rt_digests or local (with train/validation files).")
