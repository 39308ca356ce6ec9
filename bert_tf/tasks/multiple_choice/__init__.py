"""The multiple-choice kind: a context and C choices in, the choice
probabilities out (SWAG, HellaSwag, COPA, next-sentence choice)."""

from bert_tf.tasks.multiple_choice.task import MultipleChoice

__all__ = ["MultipleChoice"]
