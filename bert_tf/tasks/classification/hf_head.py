"""An HF `…ForSequenceClassification` checkpoint's head as this kind's
(`bert_tf.tasks.hf_runs`): labels from `id2label`, regression from
`problem_type`, and each family's head function.

- BERT: the pooler (dense + tanh on `[CLS]`, part of the encoder's
  weights) and `classifier`: our `cls` pooling.
- DistilBERT: `pre_classifier` + ReLU on `[CLS]`'s final state, then
  `classifier`: `cls_relu`.
- ELECTRA: `classifier.dense` + exact GELU, then `classifier.out_proj`:
  `cls_gelu`.
"""

from bert_tf.formats.hf import HEAD_POOLING, linear, hf_labels

ARCHITECTURES = ("ForSequenceClassification",)
# (hidden layer, output layer) of each family's head.
_LAYERS = {"bert": (None, "classifier"),
           "distilbert": ("pre_classifier", "classifier"),
           "electra": ("classifier.dense", "classifier.out_proj")}


def spec_fields(hf_config, family):
    """The classification spec's fields that the checkpoint decides."""
    labels = hf_labels(hf_config)
    regression = hf_config.get("problem_type") == "regression" or \
        len(labels) == 1
    return {"labels": [] if regression else labels,
            "regression": regression, "pooling": HEAD_POOLING[family]}


def assign(model, tensors, family, where):
    """Sets `model`'s head (a `BertClassifier`) from the HF tensors."""
    hidden, output = _LAYERS[family]
    model.head.set_dense_weights(
        linear(tensors, output, where),
        linear(tensors, hidden, where) if hidden else None)
