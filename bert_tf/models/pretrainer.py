"""BertPretrainer: encoder + masked-LM head + next-sentence head, with the
pre-training losses and metrics, trainable with plain `compile` + `fit`."""

import keras
import tensorflow as tf
from keras import ops

from bert_tf.layers.heads import MaskedLMHead, NextSentenceHead
from bert_tf.losses import (global_sum, masked_lm_loss,
                            next_sentence_loss, scale_for_replicas)
from bert_tf.models.encoder import (INPUT_NAMES, BertEncoder, encoder_inputs,
                                    from_config_with_encoder, select_inputs)

PRETRAINING_INPUT_NAMES = INPUT_NAMES + ("masked_lm_positions",)


@keras.saving.register_keras_serializable(package="bert_tf")
class BertPretrainer(keras.Model):
    """BERT with its two pre-training tasks.

    Takes a feature dict with `input_word_ids`, `input_mask`,
    `input_type_ids`, `masked_lm_positions` and, for the losses,
    `masked_lm_ids`, `masked_lm_weights`, `next_sentence_labels` (the
    batches `bert_tf.data.pretraining` produces). Outputs `mlm_logits`
    [batch, P, vocab] and, unless `nsp=False`, `nsp_logits` [batch, 2].

    `fit` needs no `loss=`: the masked-LM loss is the cross-entropy averaged
    over `masked_lm_weights`, plus the NSP cross-entropy. Metrics:
    `mlm_loss`, `mlm_accuracy`, `nsp_loss`, `nsp_accuracy`.

    Args:
        encoder: a `BertEncoder`; the MLM output is tied to its token
            embedding.
        nsp: include the next-sentence head and loss (False: the paper's
            "No NSP" ablation).

    Examples:
        >>> import numpy as np, keras, tensorflow as tf
        >>> model = BertPretrainer(BertEncoder.from_preset("bert_tiny"))
        >>> batch = {
        ...     "input_word_ids": np.full((4, 16), 1000, "int32"),
        ...     "input_mask": np.ones((4, 16), "int32"),
        ...     "input_type_ids": np.zeros((4, 16), "int32"),
        ...     "masked_lm_positions": np.tile([[1, 2]], (4, 1)).astype("int32"),
        ...     "masked_lm_ids": np.full((4, 2), 2000, "int32"),
        ...     "masked_lm_weights": np.ones((4, 2), "float32"),
        ...     "next_sentence_labels": np.zeros((4,), "int32")}
        >>> model.compile(optimizer=keras.optimizers.Adam(1e-3))
        >>> history = model.fit(tf.data.Dataset.from_tensors(batch).repeat(3),
        ...                     verbose=0)
        >>> sorted(history.history)
        ['loss', 'mlm_accuracy', 'mlm_loss', 'nsp_accuracy', 'nsp_loss']
    """

    CHECKPOINT_ROOTS = ("masked_lm", "next_sentence")

    def __init__(self, encoder, nsp=True, **kwargs):
        config = encoder.config
        if config.embedding_size not in (0, config.hidden_size):
            raise ValueError(
                f"encoder.embedding_size = {config.embedding_size} differs "
                f"from hidden_size = {config.hidden_size}: the masked-LM "
                "head is tied to the token embedding, which needs them "
                "equal (ELECTRA's generator is a separate model).")
        # === Layers ===
        self.encoder = encoder
        self.masked_lm = MaskedLMHead(
            config.vocab_size, config.hidden_size, config.hidden_act,
            config.layer_norm_eps, config.initializer_range,
            token_embedding=encoder.token_embedding,
            dtype=encoder.dtype_policy, name="masked_lm")
        self.next_sentence = NextSentenceHead(
            config.initializer_range, dtype=encoder.dtype_policy,
            name="next_sentence") if nsp else None

        # === Functional model ===
        inputs = encoder_inputs(PRETRAINING_INPUT_NAMES)
        super().__init__(inputs=inputs,
                         outputs=self.call_with(encoder, inputs), **kwargs)

        # === Config ===
        self.nsp = nsp

        # === Metrics ===
        self.mlm_loss_tracker = keras.metrics.Mean(name="mlm_loss")
        # A mean of matches, computed in `compute_loss` (see there).
        self.mlm_accuracy = keras.metrics.Mean(name="mlm_accuracy")
        if nsp:
            self.nsp_loss_tracker = keras.metrics.Mean(name="nsp_loss")
            self.nsp_accuracy = keras.metrics.SparseCategoricalAccuracy(
                name="nsp_accuracy")

    def call(self, inputs, training=None, mask=None, **kwargs):
        return super().call(select_inputs(inputs, PRETRAINING_INPUT_NAMES),
                            training=training, mask=mask, **kwargs)

    def call_with(self, encode, inputs):
        """The heads' logits on `encode`'s outputs (`encode`: the encoder,
        or an export's served encoder, `bert_tf.models.served`)."""
        encoded = encode({name: inputs[name] for name in INPUT_NAMES})
        outputs = {"mlm_logits": self.masked_lm(
            encoded["sequence_output"], inputs["masked_lm_positions"])}
        if self.next_sentence is not None:
            outputs["nsp_logits"] = self.next_sentence(
                encoded["pooled_output"])
        return outputs

    @property
    def reads_pooled_output(self):
        """Whether a head reads the pooler (next-sentence prediction)."""
        return self.next_sentence is not None

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None,
                     training=True):
        """Masked-LM (+ NSP) loss from the labels inside the feature dict."""
        if y_pred is None:
            y_pred = self(x, training=training)
        weights = ops.cast(x["masked_lm_weights"], "float32")
        # Divide by the weight sum of the whole global batch, so that the
        # replicas' shares add up to exactly the single-device loss.
        replicas = tf.distribute.get_strategy().num_replicas_in_sync
        mlm_share = masked_lm_loss(x["masked_lm_ids"], y_pred["mlm_logits"],
                                   weights, global_sum(ops.sum(weights)))
        mlm_loss = mlm_share * replicas  # this replica's view of the mean
        self.mlm_loss_tracker.update_state(mlm_loss)
        # tf.argmax, not Keras's: that one first rewrites negative zeros,
        # four more passes over the [batch, P, vocab] logits (9% of an
        # L4/H256 bf16 step on 2 EPYC cores).
        predicted = tf.argmax(y_pred["mlm_logits"], -1, output_type=tf.int32)
        self.mlm_accuracy.update_state(
            ops.cast(ops.equal(predicted, ops.cast(x["masked_lm_ids"],
                                                   "int32")), "float32"),
            sample_weight=weights)
        loss = mlm_loss
        if self.nsp:
            labels = ops.reshape(x["next_sentence_labels"], (-1,))
            nsp_loss = next_sentence_loss(labels, y_pred["nsp_logits"])
            self.nsp_loss_tracker.update_state(nsp_loss)
            self.nsp_accuracy.update_state(labels, y_pred["nsp_logits"])
            loss = loss + nsp_loss
        for extra in self.losses:
            loss = loss + ops.cast(ops.sum(extra), "float32")
        # Keras sums gradients over replicas; each contributes 1/n.
        return scale_for_replicas(loss)

    def checkpoint_heads(self):
        """The heads by checkpoint root (see `checkpoints/layout.py`)."""
        return {root: head for root, head in zip(
            self.CHECKPOINT_ROOTS, (self.masked_lm, self.next_sentence))
            if head is not None}

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "encoder": keras.saving.serialize_keras_object(self.encoder),
            "nsp": self.nsp,
        }

    @classmethod
    def from_config(cls, config):
        return from_config_with_encoder(cls, config)
