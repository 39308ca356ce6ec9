"""The tagging model: `BertTokenClassifier`."""

import keras

from bert_tf.models.task_model import TaskModel


@keras.saving.register_keras_serializable(package="bert_tf")
class BertTokenClassifier(TaskModel):
    """Token tagging (NER) with BERT: dropout + dense on every final hidden
    state T_i, float32 logits [batch, seq, num_labels].

    As in the paper, train with each word's label on its first piece and
    a sample weight of 0 on the other pieces and the special tokens
    (`TaggingPreprocessor` makes both).

    Args:
        encoder: a `BertEncoder`.
        num_labels: number of tags.
        dropout: dropout rate before the output layer.

    Examples:
        >>> import numpy as np, keras
        >>> from bert_tf.models.encoder import BertEncoder
        >>> model = BertTokenClassifier(BertEncoder.from_preset("bert_tiny"), 5)
        >>> x = {"input_word_ids": np.full((4, 8), 1000, "int32"),
        ...      "input_mask": np.ones((4, 8), "int32"),
        ...      "input_type_ids": np.zeros((4, 8), "int32")}
        >>> y, weights = np.ones((4, 8), "int32"), np.ones((4, 8), "float32")
        >>> model.compile(optimizer=keras.optimizers.AdamW(5e-5),
        ...               loss=keras.losses.SparseCategoricalCrossentropy(
        ...                   from_logits=True))
        >>> history = model.fit(x, y, sample_weight=weights, epochs=2, verbose=0)
        >>> tuple(model.predict(x, verbose=0).shape)
        (4, 8, 5)
    """

    CHECKPOINT_ROOT = "token_classifier"
    CONFIG_ARGS = ("num_labels", "dropout")

    def __init__(self, encoder, num_labels, dropout=0.1, **kwargs):
        self._build_dense(encoder, "num_labels", num_labels, dropout,
                          "sequence_output", **kwargs)
