"""The classification kind's config."""

import dataclasses
import typing

from bert_tf.config_io import check_choice, check_values, join_key
from bert_tf.tasks.base import register_config
from bert_tf.tasks.classification.long_document import WINDOW_POOLINGS
from bert_tf.tasks.task_config import TaskConfig

POOLINGS = ("cls", "mean", "cls_relu", "cls_gelu")


@register_config
@dataclasses.dataclass
class ClassificationConfig(TaskConfig):
    """A text or text-pair classification (or regression) task.

    Args:
        name: `glue/NAME`, `sample:rt_sentiment` or `local` (TSV, CSV or
            JSONL files).
        text, text_b, label: column names of local files (`text_b` for
            pairs).
        labels: class names in id order (default: sorted, from train).
        regression: numeric labels, one output.
        format: `tsv`, `csv` or `jsonl` ("" : from the file names).
        pooling: what the head reads: `cls` (the pooled `[CLS]`, as in the
            paper) or `mean` (the mean of the final hidden states of the
            real tokens, what sentence-embedding models such as
            all-MiniLM-L6-v2 were trained to make); `cls_relu` and
            `cls_gelu`: the final hidden state of `[CLS]` through a dense
            layer + ReLU or GELU (the heads of DistilBERT's and ELECTRA's
            sequence classifiers, which `bert-tf convert` brings in).
        long_document: texts longer than `seq_length` are cut into
            windows of `seq_length` pieces, each window is classified and
            the window logits are pooled (`window_pooling`); training uses
            the document's label for the pooled output. Single texts only.
        doc_stride: pieces between window starts (0: windows that do not
            overlap, `seq_length - 2`).
        window_pooling: `mean`, `max` or `attention` (a learned weight per
            window); docs/guides/long-documents.md compares them.
        pair, metrics: written by the run from the data.
    """

    names: typing.ClassVar[str] = ("glue/NAME, sample:rt_sentiment, "
                                   "sample:rt_digests or local")
    data_names: typing.ClassVar[tuple] = ("glue/", "sample:rt_sentiment",
                                          "sample:rt_digests", "local")

    kind: str = "classification"
    name: str = "sample:rt_sentiment"
    text: str = "text"
    text_b: str = ""
    label: str = "label"
    labels: list = dataclasses.field(default_factory=list)
    regression: bool = False
    format: str = ""
    pooling: str = "cls"
    long_document: bool = False
    doc_stride: int = 0
    window_pooling: str = "mean"
    pair: bool = False
    metrics: list = dataclasses.field(default_factory=list)

    def validate(self, where="task", data=True):
        check_choice(join_key(where, "pooling"), self.pooling, POOLINGS)
        check_choice(join_key(where, "window_pooling"), self.window_pooling,
                     WINDOW_POOLINGS)
        check_values(self, where, ("doc_stride",), ">= 0")
        if self.long_document and (self.pair or self.text_b):
            raise ValueError(f"{join_key(where, 'long_document')} takes "
                             "single texts; this task has text pairs.")
        return super().validate(where, data)
