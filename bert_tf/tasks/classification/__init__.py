"""The classification kind: a text or text pair in, a label (or a
regression score) out. GLUE, local files and the RT sentiment sample."""

from bert_tf.tasks.classification.task import Classification

__all__ = ["Classification"]
