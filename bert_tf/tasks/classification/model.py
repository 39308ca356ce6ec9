"""The classification model: `BertClassifier`."""

import keras

from bert_tf.models.task_model import TaskModel


@keras.saving.register_keras_serializable(package="bert_tf")
class BertClassifier(TaskModel):
    """Sentence or sentence-pair classification (or regression) with BERT.

    Dropout + dense on the encoder's pooled `[CLS]` output, as in the paper.
    Outputs float32 logits [batch, num_classes]; with `num_classes=1` the
    single output is a regression score (STS-B style).

    Args:
        encoder: a `BertEncoder`.
        num_classes: number of classes (1: regression).
        dropout: dropout rate before the output layer.
        pooling: `cls`, the pooled `[CLS]` output (the paper), or `mean`,
            the mean of the final hidden states of the real tokens.

    Example:
    >>> import numpy as np, keras
    >>> from bert_tf.models.encoder import BertEncoder
    >>> model = BertClassifier(BertEncoder.from_preset("bert_tiny"), 2)
    >>> x = {"input_word_ids": np.full((4, 8), 1000, "int32"),
    ...      "input_mask": np.ones((4, 8), "int32"),
    ...      "input_type_ids": np.zeros((4, 8), "int32")}
    >>> model.compile(optimizer=keras.optimizers.AdamW(2e-5),
    ...               loss=keras.losses.SparseCategoricalCrossentropy(
    ...                   from_logits=True), metrics=["accuracy"])
    >>> history = model.fit(x, np.array([0, 1, 0, 1]), epochs=2, verbose=0)
    >>> model.predict(x, verbose=0).shape
    (4, 2)
    """

    CHECKPOINT_ROOT = "classifier"
    CONFIG_ARGS = ("num_classes", "dropout", "pooling")
    POOLED = {"cls": "pooled_output", "mean": "mean_pooled"}

    def __init__(self, encoder, num_classes, dropout=0.1, pooling="cls",
                 **kwargs):
        if pooling not in self.POOLED:
            raise ValueError(f"pooling = {pooling!r}: must be one of "
                             f"{', '.join(self.POOLED)}.")
        self._build_dense(encoder, "num_classes", num_classes, dropout,
                          self.POOLED[pooling], **kwargs)
        self.pooling = pooling
