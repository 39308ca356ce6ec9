"""Task data for fine-tuning: GLUE via TFDS, local files, real samples.

Every reader returns a `TaskData` whose splits are `tf.data` datasets of
`{"text", "text_b" (pair tasks), "label"}` examples; `task_dataset` turns a
split into batches of encoder inputs with the shared `BertPreprocessor`.
"""

from bert_tf.data.readers.base import TaskData, task_dataset
from bert_tf.data.readers.glue import GLUE_TASKS, load_glue
from bert_tf.data.readers.local import load_local
from bert_tf.data.readers.sentiment import load_rt_sentiment


def load_task(spec, cache=None, data_dir=None, seed=0, **local_args):
    """A `TaskData` from a spec string.

    Args:
        spec: `glue/NAME` (TFDS), `sample:rt_sentiment` (the real RT movie
            snippets) or `local` (files given in `local_args`, see
            `load_local`).
        cache: sample cache directory.
        data_dir: TFDS data directory.
        seed: split seed for the sample.
    """
    if spec.startswith("glue/"):
        return load_glue(spec.split("/", 1)[1], data_dir=data_dir)
    if spec == "sample:rt_sentiment":
        return load_rt_sentiment(cache=cache, seed=seed)
    if spec == "local":
        return load_local(**local_args)
    raise ValueError(f"Unknown task {spec!r}: use glue/NAME (one of "
                     f"{', '.join(GLUE_TASKS)}), sample:rt_sentiment or "
                     "local (with train/validation files).")


__all__ = ["TaskData", "load_task", "task_dataset", "GLUE_TASKS",
           "load_glue", "load_local", "load_rt_sentiment"]
