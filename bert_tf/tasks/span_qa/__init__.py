"""The extractive QA kind: a question and a context of any length in, the
answer span with its offsets out (SQuAD v1.1 / v2.0)."""

from bert_tf.tasks.span_qa.task import SpanQA

__all__ = ["SpanQA"]
