"""The embeddings kind as one TFLite graph: raw strings in, the same
`embedding` vectors as the SavedModel's `serving_default` out, with
tf-text's TFLite kernels for tokenization and TFLite builtins for the rest
(see `bert_tf/serving/tflite.py`)."""

import tensorflow as tf

from bert_tf.tasks.embeddings.extract import mean_pool
from bert_tf.tasks.serving_module import TFLiteModule
from bert_tf.text.packer import pack_dense
from bert_tf.text.tokenizer import BertTokenizer


class EmbeddingTFLiteModule(TFLiteModule):
    """`serve(text [B])` -> `embedding` float32 [B, H]: the mean of the
    final hidden states over the real tokens (L2-normalised if
    `normalize`), every text truncated to `seq_length` pieces and run at
    that length (TFLite has no padding cut).

    Examples:
        >>> from bert_tf.models.encoder import BertEncoder
        >>> from bert_tf.text.vocab import read_vocab
        >>> vocab = read_vocab(example_files.toy_task() / "vocab.txt")
        >>> encoder = BertEncoder(vocab_size=vocab.size, hidden_size=8,
        ...                       num_layers=1, num_heads=2, intermediate_size=16)
        >>> module = EmbeddingTFLiteModule(encoder, vocab, seq_length=16)
        >>> module.serve(tf.constant(["the film", ""]))["embedding"].shape
        TensorShape([2, 8])
    """

    def __init__(self, encoder, vocab, seq_length, normalize=True,
                 lower_case=None):
        super().__init__(encoder, name="bert_embeddings_tflite")
        tokenizer = BertTokenizer(vocab, lower_case).fused()

        def serve(text):
            inputs = pack_dense([tokenizer.tokenize(text)], seq_length,
                                vocab.cls_id, vocab.sep_id, vocab.pad_id)
            outputs = encoder(inputs, training=False)
            return {"embedding": mean_pool(outputs["sequence_output"],
                                           inputs["input_mask"], normalize)}

        self.serve = tf.function(serve, input_signature=[
            tf.TensorSpec([None], tf.string, name="text")], autograph=False)
