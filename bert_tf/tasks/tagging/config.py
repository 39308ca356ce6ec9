"""The tagging kind's config."""

import dataclasses
import typing

from bert_tf.config_io import check_choice, check_values, join_key
from bert_tf.tasks.base import register_config
from bert_tf.tasks.task_config import TaskConfig


@register_config
@dataclasses.dataclass
class TaggingConfig(TaskConfig):
    """Token tagging (NER).

    Args:
        name: `conll2003`, `sample:wnut_ner` or `local` (CoNLL files).
        tag_column: the tag's column in local CoNLL files.
        tag_scheme: `bio` (IOB2), `iob1` or `iobes` (read and converted to
            BIO).
        doc_stride: word pieces between window starts for long texts.
        max_entities: entities a served model returns per text.
        labels: the tags in id order (written by the run from the data).
    """

    names: typing.ClassVar[str] = "conll2003, sample:wnut_ner or local " \
        "(CoNLL files)"
    data_names: typing.ClassVar[tuple] = ("conll2003", "sample:wnut_ner",
                                          "local")

    kind: str = "tagging"
    name: str = "sample:wnut_ner"
    tag_column: int = -1
    tag_scheme: str = "bio"
    doc_stride: int = 128
    max_entities: int = 32
    labels: list = dataclasses.field(default_factory=list)

    def validate(self, where="task", data=True):
        check_choice(join_key(where, "tag_scheme"), self.tag_scheme,
                     ("bio", "iob1", "iobes"))
        check_values(self, where, ("doc_stride", "max_entities"), ">= 1")
        return super().validate(where, data)
