"""The multiple-choice kind as one TFLite graph: `context` [B] and
`choices` [B, C] raw strings in, `probabilities` [B, C] and `choice` [B]
out as from the SavedModel's `serving_default`, with tf-text's TFLite
kernels for tokenization and TFLite builtins for the rest (see
`bert_tf/serving/tflite.py`)."""

import tensorflow as tf

from bert_tf.tasks.serving_module import TFLiteModule
from bert_tf.text.packer import pack_dense
from bert_tf.text.tokenizer import BertTokenizer


class ChoiceTFLiteModule(TFLiteModule):
    """`serve(context, choices)`: each context paired with each of its
    choices, packed at the model's `seq_length` (every pair runs at that
    length: TFLite has no padding cut), scored, and softmaxed per row."""

    def __init__(self, model, spec, vocab):
        super().__init__(model, name="bert_multiple_choice_tflite")
        tokenizer = BertTokenizer(vocab, spec.lower_case).fused()
        length = spec.seq_length

        def serve(context, choices):
            count = tf.shape(choices)[1]
            # Each context once per choice, by a gather of strings (no
            # ragged repeat, which TFLite builtins lack).
            row = tf.range(tf.size(choices)) // count
            packed = pack_dense(
                [tokenizer.tokenize(tf.gather(context, row)),
                 tokenizer.tokenize(tf.reshape(choices, [-1]))],
                length, vocab.cls_id, vocab.sep_id, vocab.pad_id)
            inputs = {name: tf.reshape(value, [-1, count, length])
                      for name, value in packed.items()}
            logits = tf.cast(model(inputs, training=False), tf.float32)
            return {"probabilities": tf.nn.softmax(logits),
                    "choice": tf.argmax(logits, axis=-1,
                                        output_type=tf.int32)}

        self.serve = tf.function(serve, input_signature=[
            tf.TensorSpec([None], tf.string, name="context"),
            tf.TensorSpec([None, None], tf.string, name="choices")],
            autograph=False)
