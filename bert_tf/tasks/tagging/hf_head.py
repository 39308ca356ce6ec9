"""An HF `…ForTokenClassification` checkpoint's head as this kind's
(`bert_tf.tasks.hf_runs`): `classifier` on every final hidden state, tags
from `id2label` (BIO: `O`, `B-PER`, `I-PER`, ...)."""

from bert_tf.formats.hf import hf_labels, linear

ARCHITECTURES = ("ForTokenClassification",)


def spec_fields(hf_config, family):
    """The tagging spec's fields the checkpoint decides: its tags. A tag
    set that is not BIO (no `O`, or tags without a `B-`/`I-` prefix) is
    refused: entities are read from BIO tags."""
    labels = hf_labels(hf_config)
    odd = [t for t in labels if t != "O" and t[:2] not in ("B-", "I-")]
    if "O" not in labels or odd:
        raise ValueError(
            f"id2label {labels}: tags must be BIO (O, B-TYPE, I-TYPE)"
            + (f"; {', '.join(odd[:4])} are not" if odd else "; no O tag"))
    return {"labels": labels, "tag_scheme": "bio"}


def assign(model, tensors, family, where):
    """Sets `model`'s head (a `BertTokenClassifier`) from the HF tensors."""
    model.head.set_dense_weights(linear(tensors, "classifier", where))
