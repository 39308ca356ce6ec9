"""Task data for fine-tuning: GLUE via TFDS, local files, real samples.

Every reader returns a `TaskData` whose splits are `tf.data` datasets of
`{"text", "text_b" (pair tasks), "label"}` examples; `task_dataset` turns a
split into batches of encoder inputs with the shared `BertPreprocessor`.
"""

from bert_tf.data.readers.base import TaskData, load_task, task_dataset
from bert_tf.data.readers.glue import GLUE_TASKS, load_glue
from bert_tf.data.readers.local import load_local
from bert_tf.data.readers.sentiment import load_rt_sentiment

__all__ = ["TaskData", "load_task", "task_dataset", "GLUE_TASKS",
           "load_glue", "load_local", "load_rt_sentiment"]
