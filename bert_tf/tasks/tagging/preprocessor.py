"""The token-tagging featurizer: `WordWindows` (sentences -> word pieces
in windows, `bert_tf.text.word_windows`) with each word's label on its
first piece, as in the paper; the other pieces carry no loss."""

import keras
import tensorflow as tf

from bert_tf.text.word_windows import WordWindows


@keras.saving.register_keras_serializable(package="bert_tf")
class TaggingPreprocessor(WordWindows):
    """`WordWindows` with labels: the featurizer of token tagging in
    `tf.data`, evaluation and the export.

    Call args:
        text: tf.string [batch].
        word_labels: optional int ragged [batch, (words)] label ids of
            pre-tokenized text; with them the output has `labels` and
            `label_weights` [W, L].

    Examples:
        >>> pre = TaggingPreprocessor(["[PAD]", "[UNK]", "[CLS]", "[SEP]",
        ...                            "[MASK]", "ann", "lives", "in", "oslo",
        ...                            "##w"], seq_length=8, pretokenized=True)
        >>> out = pre(tf.constant(["Ann lives in Oslow"]),
        ...           tf.ragged.constant([[1, 0, 0, 3]]))
        >>> out["labels"].numpy().tolist(), out["label_weights"].numpy().tolist()
        ([[0, 1, 0, 0, 3, 0, 0, 0]], [[0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0]])
    """

    def call(self, text, word_labels=None):
        if word_labels is not None and not self.pretokenized:
            raise ValueError("word_labels count the words of pre-tokenized "
                             "text: build the TaggingPreprocessor with "
                             "pretokenized=True.")
        features = super().call(text)
        if word_labels is not None:
            word_index = features["word_index"]
            labels = tf.cast(word_labels, tf.int32).to_tensor(
                default_value=0)
            rows = tf.broadcast_to(features["example_index"][:, None],
                                   tf.shape(word_index))
            at = tf.stack([rows, tf.maximum(word_index, 0)], axis=-1)
            features["labels"] = tf.where(
                word_index >= 0, tf.gather_nd(labels, at), 0)
            features["label_weights"] = tf.cast(features["word_is_max"],
                                                tf.float32)
        return features
