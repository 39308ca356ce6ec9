"""bert_tf: BERT pre-training, fine-tuning and serving in TensorFlow 2 / Keras 3.

The public API, loaded on first use (so `bert-tf --help` does not import
TensorFlow):

    from bert_tf import BertEncoder, BertPretrainer, BertPreprocessor
"""

import importlib

from bert_tf import _moved

__version__ = "0.1.0"
_moved.install()  # old import paths warn and work for one release

_EXPORTS = {
    "EncoderConfig": "bert_tf.config",
    "ModelConfig": "bert_tf.config",
    "load_config": "bert_tf.config",
    "BertEncoder": "bert_tf.models.encoder",
    "BertPretrainer": "bert_tf.models.pretrainer",
    "BertDiscriminator": "bert_tf.models.discriminator",
    "ReplacedTokenHead": "bert_tf.layers.heads",
    "BertClassifier": "bert_tf.tasks.classification.model",
    "BertSpanLabeler": "bert_tf.tasks.span_qa.model",
    "BertTokenClassifier": "bert_tf.tasks.tagging.model",
    "BertMultipleChoice": "bert_tf.tasks.multiple_choice.model",
    "BertBiEncoder": "bert_tf.tasks.similarity.model",
    "BertEmbeddings": "bert_tf.layers.embeddings",
    "TransformerBlock": "bert_tf.layers.transformer",
    "MultiHeadSelfAttention": "bert_tf.layers.transformer",
    "MaskedLMHead": "bert_tf.layers.heads",
    "NextSentenceHead": "bert_tf.layers.heads",
    "ClassificationHead": "bert_tf.layers.heads",
    "BertTokenizer": "bert_tf.text.tokenizer",
    "BertPacker": "bert_tf.text.packer",
    "BertPreprocessor": "bert_tf.text.preprocessor",
    "Vocab": "bert_tf.text.vocab",
    "read_vocab": "bert_tf.text.vocab",
    "load_classification": "bert_tf.tasks.classification.data",
    "load_data": "bert_tf.tasks",
    "load_finetuned": "bert_tf.tasks",
    "export_keras_model": "bert_tf.serving.export",
    "FeatureExtractor": "bert_tf.tasks.embeddings.extract",
    "SentenceEmbedder": "bert_tf.tasks.embeddings.extract",
    "load_encoder": "bert_tf.checkpoints",
    "classification_dataset": "bert_tf.tasks.classification.data",
    "FusedAdamW": "bert_tf.training.optimization",
}
_MODULES = ("checkpoints", "config", "presets", "samples", "sources")

__all__ = sorted(_EXPORTS) + list(_MODULES)


# Public names of 0.1 that were renamed: they warn (bert_tf/_moved.py).
_RENAMED = {"load_task": "bert_tf.tasks.classification.data",
            "task_dataset": "bert_tf.tasks.classification.data"}


def __getattr__(name):
    if name in _RENAMED:
        return _moved.renamed(_RENAMED[name], name)
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    if name == "samples":
        return importlib.import_module("bert_tf.samples")
    if name in _MODULES:
        return importlib.import_module(f"bert_tf.{name}")
    raise AttributeError(f"module 'bert_tf' has no attribute {name!r}")
