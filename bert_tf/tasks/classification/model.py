"""The classification model: `BertClassifier`."""

import keras
from keras import ops

from bert_tf.layers.heads import MaskedMeanPool
from bert_tf.models.encoder import INPUT_NAMES, select_inputs
from bert_tf.models.task_model import TaskModel
from bert_tf.tasks.classification.long_document import (WINDOW_KEY,
                                                        WINDOW_POOLINGS,
                                                        pool_windows)


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
        pooling: `cls`, the pooled `[CLS]` output (the paper); `mean`,
            the mean of the final hidden states of the real tokens; or
            `cls_relu` / `cls_gelu`, the final hidden state of `[CLS]`
            through a dense layer of the head's own and ReLU (DistilBERT's
            classifier) or exact GELU (ELECTRA's).
        window_pooling: for documents longer than the model (see
            `long_document.py`): inputs that carry `window_document` are
            windows, and their logits are pooled per document by `mean`,
            `max` or `attention` (a learned score per window). None: one
            row, one text.

    Examples:
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
    CONFIG_ARGS = ("num_classes", "dropout", "pooling", "window_pooling")
    POOLED = {"cls": "pooled_output", "mean": "mean_pooled",
              "cls_relu": "first_token", "cls_gelu": "first_token"}
    HIDDEN_ACTIVATIONS = {"cls_relu": "relu", "cls_gelu": "gelu_exact"}

    def __init__(self, encoder, num_classes, dropout=0.1, pooling="cls",
                 window_pooling=None, **kwargs):
        if pooling not in self.POOLED:
            raise ValueError(f"pooling = {pooling!r}: must be one of "
                             f"{', '.join(self.POOLED)}.")
        if window_pooling not in (None,) + WINDOW_POOLINGS:
            raise ValueError(f"window_pooling = {window_pooling!r}: must be "
                             f"one of {', '.join(WINDOW_POOLINGS)}.")
        self._build_dense(encoder, "num_classes", num_classes, dropout,
                          self.POOLED[pooling],
                          self.HIDDEN_ACTIVATIONS.get(pooling), **kwargs)
        self.pooling = pooling
        self.window_pooling = window_pooling
        self.window_scorer = None
        if window_pooling and pooling == "mean":
            self.window_mean = MaskedMeanPool(dtype=encoder.dtype_policy)
        if window_pooling == "attention":
            self.window_scorer = keras.layers.Dense(
                1, name="window_scorer", dtype=encoder.dtype_policy)
            self.window_scorer.build((None, encoder.config.hidden_size))

    def is_windowed(self, inputs):
        """Whether `inputs` are windows of documents this model pools."""
        return bool(getattr(self, "window_pooling", None) and
                    isinstance(inputs, dict) and WINDOW_KEY in inputs)

    @property
    def window_output_names(self):
        """What `window_outputs` returns (and `pool` reads)."""
        return ("logits", "scores") if self.window_scorer is not None \
            else ("logits",)

    def window_outputs(self, inputs, training=None):
        """Each window's `logits` (and, for attention pooling, `scores`):
        the per-window half of a windowed call, which `pool` finishes.
        Windows do not depend on each other, so they may run a chunk at a
        time."""
        return self._window_head(self.encoder(
            select_inputs(inputs, INPUT_NAMES), training=training),
            inputs, training)

    def window_outputs_with(self, encode, inputs):
        """`window_outputs` in inference with `encode` as the encoder (as
        `call_with`)."""
        return self._window_head(encode(select_inputs(inputs, INPUT_NAMES)),
                                 inputs)

    def pool(self, window_outputs, inputs):
        """Document logits [D, K] from `window_outputs` of all the windows
        of `inputs` (`window_document`, and `windows` for D)."""
        count = (ops.size(inputs["windows"]) if "windows" in inputs
                 else None)
        return pool_windows(window_outputs["logits"], inputs[WINDOW_KEY],
                            self.window_pooling,
                            window_outputs.get("scores"), count)

    def _window_head(self, encoder_outputs, inputs, training=None):
        if self.pooling == "mean":
            features = self.window_mean(encoder_outputs["sequence_output"],
                                        inputs["input_mask"])
        else:
            features = self.features(encoder_outputs, inputs)
        outputs = {"logits": self.head(features, training=training)}
        if self.window_scorer is not None:
            outputs["scores"] = self.window_scorer(features)[:, 0]
        return outputs

    def head_on(self, encoder_outputs, inputs, training=None):
        if not self.is_windowed(inputs):
            return super().head_on(encoder_outputs, inputs, training)
        return self.pool(self._window_head(encoder_outputs, inputs, training),
                         inputs)

    def call(self, inputs, training=None, mask=None, **kwargs):
        if not self.is_windowed(inputs):
            return super().call(inputs, training=training, mask=mask,
                                **kwargs)
        return self.pool(self.window_outputs(inputs, training), inputs)

    def checkpoint_heads(self):
        heads = super().checkpoint_heads()
        if self.window_scorer is not None:
            heads["window_scorer"] = self.window_scorer
        return heads
