"""The span QA kind's config."""

import dataclasses
import typing

from bert_tf.config_io import check_values
from bert_tf.tasks.base import register_config
from bert_tf.tasks.task_config import TaskConfig


@register_config
@dataclasses.dataclass
class SpanQAConfig(TaskConfig):
    """Extractive question answering (SQuAD v1.1 / v2.0 style).

    Args:
        name: `squad/v1.1`, `squad/v2.0`, `sample:wnut_qa`,
            `sample:wnut_qa_threads` or `local` (SQuAD JSON).
        doc_stride: word pieces between window starts.
        max_query_length: word pieces kept of a question.
        max_answer_length: longest answer, in word pieces.
        n_best_size: start/end candidates per window, and the number of
            answers a served model returns.
        shared_norm: train with one softmax over all windows of a question
            (`SharedSpanLoss`), so that logits of different windows
            compare, as decoding compares them; a batch is then
            `batch_size` questions with all their windows.
        version_2: the data has unanswerable questions (written by the run
            from the data).
        null_threshold: SQuAD 2.0's no-answer threshold (written by the
            run: the one that gave the best dev F1).
    """

    names: typing.ClassVar[str] = (
        "squad/v1.1, squad/v2.0, sample:wnut_qa, sample:wnut_qa_threads or "
        "local (SQuAD JSON)")
    data_names: typing.ClassVar[tuple] = (
        "squad/v1.1", "squad/v2.0", "sample:wnut_qa",
        "sample:wnut_qa_threads", "local")

    kind: str = "span_qa"
    name: str = "sample:wnut_qa"
    doc_stride: int = 128
    max_query_length: int = 64
    max_answer_length: int = 30
    n_best_size: int = 20
    shared_norm: bool = False
    version_2: bool = False
    null_threshold: float = 0.0

    def validate(self, where="task", data=True):
        check_values(self, where, ("doc_stride", "max_query_length",
                                   "max_answer_length", "n_best_size"),
                     ">= 1")
        return super().validate(where, data)
