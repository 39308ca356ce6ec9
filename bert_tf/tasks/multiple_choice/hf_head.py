"""An HF `…ForMultipleChoice` checkpoint's head as this kind's
(`bert_tf.tasks.hf_runs`): one score per choice from each family's head.

- BERT: the pooler (part of the encoder's weights) and `classifier`: our
  `cls` pooling.
- DistilBERT: `pre_classifier` + ReLU on `[CLS]`'s final state, then
  `classifier`: `cls_relu`.
- ELECTRA: its sequence summary (`sequence_summary.summary`, a dense
  layer + GELU on the first token), then `classifier`: `cls_gelu`.
"""

from bert_tf.formats.hf import HEAD_POOLING, linear

ARCHITECTURES = ("ForMultipleChoice",)
# (hidden layer, scoring layer) of each family's head.
_LAYERS = {"bert": (None, "classifier"),
           "distilbert": ("pre_classifier", "classifier"),
           "electra": ("sequence_summary.summary", "classifier")}


def spec_fields(hf_config, family):
    """The multiple-choice spec's fields the checkpoint decides."""
    return {"pooling": HEAD_POOLING[family]}


def assign(model, tensors, family, where):
    """Sets `model`'s head (a `BertMultipleChoice`) from the HF tensors."""
    hidden, output = _LAYERS[family]
    model.head.set_dense_weights(
        linear(tensors, output, where),
        linear(tensors, hidden, where) if hidden else None)
