"""The multiple-choice kind's config."""

import dataclasses
import typing

from bert_tf.config_io import check_choice, join_key
from bert_tf.tasks.base import register_config
from bert_tf.tasks.task_config import TaskConfig


@register_config
@dataclasses.dataclass
class MultipleChoiceConfig(TaskConfig):
    """Multiple choice (SWAG style).

    Args:
        name: `hellaswag`, `super_glue/copa`, `sample:next_sentence` or
            `local` (SWAG CSV or JSONL files).
        format: `swag` (CSV) or `jsonl` ("" : from the file names).
        num_choices: choices per example (written by the run from the
            data).
        pooling: what is scored: `cls` (the pooled `[CLS]`, as in the
            paper), `cls_relu` or `cls_gelu` (the heads of DistilBERT's and
            ELECTRA's multiple-choice models, which `bert-tf convert`
            brings in: `BertMultipleChoice`).
    """

    names: typing.ClassVar[str] = ("hellaswag, super_glue/copa, "
                                   "sample:next_sentence or local (SWAG CSV "
                                   "or JSONL)")
    data_names: typing.ClassVar[tuple] = ("hellaswag", "super_glue/copa",
                                          "sample:next_sentence", "local")

    kind: str = "multiple_choice"
    name: str = "sample:next_sentence"
    format: str = ""
    num_choices: int = 0
    pooling: str = "cls"

    def validate(self, where="task", data=True):
        check_choice(join_key(where, "pooling"), self.pooling,
                     ("cls", "cls_relu", "cls_gelu"))
        return super().validate(where, data)
