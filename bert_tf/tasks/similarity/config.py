"""The similarity kind's config."""

import dataclasses
import typing

from bert_tf.config_io import check_values
from bert_tf.tasks.base import register_config
from bert_tf.tasks.task_config import TaskConfig


@register_config
@dataclasses.dataclass
class SimilarityConfig(TaskConfig):
    """Sentence-pair similarity with a bi-encoder.

    Args:
        name: `glue/stsb` or `local` (TSV, CSV or JSONL files).
        text, text_b, label: column names of local files (`label`: the
            score).
        max_score: local scores are in [0, max_score] and train toward
            score / max_score (GLUE STS-B: 5).
        format: `tsv`, `csv` or `jsonl` ("" : from the file names).
    """

    names: typing.ClassVar[str] = ("glue/stsb or local (TSV/CSV/JSONL: "
                                   "text, text_b, score)")
    data_names: typing.ClassVar[tuple] = ("glue/stsb", "local")

    kind: str = "similarity"
    name: str = "local"
    text: str = "text"
    text_b: str = "text_b"
    label: str = "label"
    max_score: float = 1.0
    format: str = ""

    def validate(self, where="task", data=True):
        check_values(self, where, ("max_score",), "> 0")
        return super().validate(where, data)
