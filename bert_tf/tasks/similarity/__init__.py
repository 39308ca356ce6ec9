"""The sentence-pair similarity kind: a bi-encoder. Two texts in, each
embedded alone by the same encoder (mean pool, L2-normalised), their cosine
out as the score. Trained on scored pairs (STS-B style) with the squared
error between cosine and the scaled gold score."""

from bert_tf.tasks.similarity.task import Similarity

__all__ = ["Similarity"]
