"""BertPreprocessor: raw strings -> the three encoder inputs.

The one preprocessing path of the project: the same layer runs in
pre-training and fine-tuning `tf.data` pipelines and inside exported
serving graphs.
"""

import keras

from bert_tf.text.features import input_specs, legacy_seq_length
from bert_tf.text.packer import BertPacker
from bert_tf.text.tokenizer import BertTokenizer, preprocessor_config


@keras.saving.register_keras_serializable(package="bert_tf")
class BertPreprocessor(keras.layers.Layer):
    """Tokenizes one or two texts and packs them for the encoder.

    Args:
        vocabulary: a vocab.txt path, a `Vocab` or a token list.
        seq_length: output length, special tokens included.
        lower_case: see `BertTokenizer` (None: from the vocab).
        strip_accents: see `BertTokenizer`.
        truncator: see `BertPacker`.

    Call args:
        text: tf.string [batch] (or scalar), or a tuple `(text_a, text_b)`.

    Examples:
        >>> import tensorflow as tf
        >>> pre = BertPreprocessor(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
        ...                         "hi", "there"], seq_length=6)
        >>> pre((tf.constant(["Hi"]), tf.constant(["there"])))[
        ...     "input_word_ids"].numpy().tolist()
        [[2, 5, 3, 6, 3, 0]]
    """

    def __init__(self, vocabulary, seq_length=128, lower_case=None,
                 strip_accents=None, truncator="round_robin", **kwargs):
        seq_length = legacy_seq_length(kwargs, seq_length, "BertPreprocessor")
        kwargs.pop("dtype", None)
        super().__init__(dtype="int32", **kwargs)
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        # === Layers ===
        self.tokenizer = BertTokenizer(vocabulary, lower_case, strip_accents,
                                       name="tokenizer")
        vocab = self.tokenizer.vocab
        self.packer = BertPacker(seq_length, vocab.cls_id, vocab.sep_id,
                                 vocab.pad_id, truncator, name="packer")
        self.built = True

    @property
    def seq_length(self):
        return self.packer.seq_length

    def call(self, text):
        texts = text if isinstance(text, (tuple, list)) else [text]
        return self.packer([self.tokenizer(t) for t in texts])

    def compute_output_spec(self, text):
        first = text[0] if isinstance(text, (tuple, list)) else text
        return input_specs(first.shape, self.seq_length)

    def get_config(self):
        return preprocessor_config(
            super().get_config(), self.tokenizer,
            seq_length=self.seq_length,
            truncator=self.packer.truncator)

