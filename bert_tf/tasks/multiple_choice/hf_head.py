"""An HF `BertForMultipleChoice` checkpoint's head as this kind's
(`bert_tf.tasks.hf_runs`): the pooler (part of the encoder's weights) and
`classifier`, one score per choice. DistilBERT's (`pre_classifier` +
ReLU) and ELECTRA's (a sequence summary) multiple-choice heads are
refused by name."""

from bert_tf.formats.hf import linear

ARCHITECTURES = ("ForMultipleChoice",)


def spec_fields(hf_config, family):
    """The multiple-choice spec's fields the checkpoint decides (none)."""
    if family != "bert":
        raise ValueError(
            f"{family} multiple-choice heads are not converted (only "
            "BertForMultipleChoice, whose head is the pooler + one dense "
            "layer).")
    return {}


def assign(model, tensors, family, where):
    """Sets `model`'s head (a `BertMultipleChoice`) from the HF tensors."""
    model.head.dense.set_weights(list(linear(tensors, "classifier", where)))
