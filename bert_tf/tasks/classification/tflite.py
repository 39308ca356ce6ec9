"""The classifier as one TFLite graph: raw strings in (a text, or a text
pair), the SavedModel's `probabilities` and `label` (or `score`) out, with
tf-text's TFLite kernels for tokenization and TFLite builtins for the rest
(see `bert_tf/serving/tflite.py`). Every request runs at the model's full
`seq_length`: TFLite has no padding cut."""

import tensorflow as tf

from bert_tf.tasks.base import same_batch
from bert_tf.tasks.serving_module import TFLiteModule
from bert_tf.text.packer import pack_dense
from bert_tf.text.tokenizer import BertTokenizer


class ClassifierTFLiteModule(TFLiteModule):
    """`serve(text[, text_b])` -> `probabilities` [B, K] and `label` [B]
    (class names), or `score` [B] for regression.

    Args:
        model: a `BertClassifier` (not a long-document one).
        spec: its `ClassificationConfig`.
        vocab: its `Vocab`.
    """

    def __init__(self, model, spec, vocab):
        super().__init__(model, name="bert_classifier_tflite")
        if spec.long_document:
            raise ValueError(
                "This classifier reads long documents in windows "
                "(task.long_document); its TFLite export is not built yet, "
                "and a TFLite file that cut documents short would answer "
                "wrongly. Export a SavedModel: bert-tf export "
                "--run RUN --out DIR.")
        tokenizer = BertTokenizer(vocab, spec.lower_case).fused()
        length, labels = spec.seq_length, list(spec.labels)
        label_names = tf.constant(labels or [""])

        def serve(text, text_b=None):
            texts = [text] if text_b is None else list(
                same_batch(text, text_b, "text", "text_b"))
            inputs = pack_dense([tokenizer.tokenize(t) for t in texts],
                                length, vocab.cls_id, vocab.sep_id,
                                vocab.pad_id)
            logits = tf.cast(model(inputs, training=False), tf.float32)
            if not labels:
                return {"score": logits[:, 0]}
            return {"probabilities": tf.nn.softmax(logits),
                    "label": tf.gather(label_names,
                                       tf.argmax(logits, axis=-1))}

        specs = [tf.TensorSpec([None], tf.string, name="text")]
        if spec.pair:
            specs.append(tf.TensorSpec([None], tf.string, name="text_b"))
        self.serve = tf.function(serve, input_signature=specs, autograph=False)
