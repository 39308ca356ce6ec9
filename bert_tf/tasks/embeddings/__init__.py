"""The embeddings export kind: sentence embeddings and per-word features of
any pre-trained encoder, without fine-tuning."""

from bert_tf.tasks.embeddings.serving import Embeddings

__all__ = ["Embeddings"]
