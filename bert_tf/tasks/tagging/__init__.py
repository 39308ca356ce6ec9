"""The token tagging kind (NER): raw text in, entities with offsets out."""

from bert_tf.tasks.tagging.task import Tagging

__all__ = ["Tagging"]
