"""Sentence-pair similarity with a bi-encoder: two texts in, a cosine
score out.

Features: `BertPreprocessor` on each text alone (one segment), stacked
[batch, 2, seq], in `tf.data` and in the exported graph. Model:
`BertBiEncoder` (shared encoder, mean pool, cosine). Loss: squared error
between the cosine and the gold score scaled to [0, 1]. Official metric:
Spearman correlation (also Pearson), as STS reports it.

Serving: `serving_default` takes `text` and `text_b` (tf.string [batch])
and returns `score` (float32 [batch], the cosine); `embed` takes `text`
and returns `embedding` (float32 [batch, H], unit length), so a corpus can
be embedded once and compared by dot products.
"""

import weakref

import keras
import numpy as np
import tensorflow as tf

from bert_tf.models.chunked import map_in_chunks, row_classes_of
from bert_tf.tasks.base import (Task, TaskModule, register, same_batch,
                                string_batch)
from bert_tf.tasks.metrics import compute
from bert_tf.tasks.similarity.config import SimilarityConfig
from bert_tf.tasks.similarity.data import load_pairs, pair_dataset
from bert_tf.tasks.similarity.model import BertBiEncoder
from bert_tf.text.features import INPUT_NAMES, cut_to_longest
from bert_tf.text.preprocessor import BertPreprocessor
from bert_tf.tasks.similarity.cli import SimilarityCommandLine

METRICS = ("spearman", "pearson")
WARMUP = (("A man is playing a guitar.", "Someone plays the guitar."),
          ("", ""))
_SCORERS = weakref.WeakKeyDictionary()


def pair_inputs(preprocessor, text, text_b, trim=False):
    """Encoder inputs of both texts, each packed alone, [batch, 2, seq];
    with `trim`, seq is the length of the longest of all texts."""
    a, b = preprocessor(text), preprocessor(text_b)
    rows = {k: tf.concat([a[k], b[k]], axis=0) for k in INPUT_NAMES}
    if trim:
        rows = cut_to_longest(rows)
    count = tf.shape(a["input_word_ids"])[0]
    return {k: tf.stack([v[:count], v[count:]], axis=1)
            for k, v in rows.items()}


@register
class Similarity(SimilarityCommandLine, Task):
    """The similarity task kind (see the module docstring)."""

    kind = "similarity"
    serving_inputs = ("text", "text_b")
    config_class = SimilarityConfig
    model_class = BertBiEncoder

    @classmethod
    def load_data(cls, spec):
        return load_pairs(spec.name, **spec.split_args(), text=spec.text,
                          text_b=spec.text_b, label=spec.label,
                          max_score=spec.max_score, fmt=spec.format or None)

    def describe(self, data):
        return (f"{data.size('train'):,} training pairs, scores in [0, 1], "
                "bi-encoder (cosine of mean-pooled embeddings)")

    def preprocessor(self, vocab):
        return BertPreprocessor(vocab, self.spec.seq_length,
                                lower_case=self.spec.lower_case)

    def _batches(self, data, split, vocab, batch_size, shuffle=False,
                 repeat=False, seed=0, input_context=None,
                 drop_remainder=False):
        preprocessor = self.preprocessor(vocab)
        dataset = pair_dataset(data, split)
        if input_context and input_context.num_input_pipelines > 1:
            dataset = dataset.shard(input_context.num_input_pipelines,
                                    input_context.input_pipeline_id)
        if shuffle:
            dataset = dataset.shuffle(data.size(split), seed=seed)
        if repeat:
            dataset = dataset.repeat()
        dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
        return dataset.map(
            lambda b: (pair_inputs(preprocessor, b["text"], b["text_b"]),
                       b["score"]),
            num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)

    def train_dataset(self, data, vocab, batch_size, seed=0,
                      input_context=None, drop_remainder=False,
                      dynamic_length=False):
        return self._batches(data, "train", vocab, batch_size, shuffle=True,
                             repeat=True, seed=seed,
                             input_context=input_context,
                             drop_remainder=drop_remainder)

    def build_model(self, encoder):
        return BertBiEncoder(encoder, dtype=encoder.dtype_policy)

    def compile(self, model):
        model.compile(loss=keras.losses.MeanSquaredError())

    @property
    def official_metric(self):
        return METRICS[0]

    def scores(self, model, texts, texts_b, vocab, batch_size=64):
        """Cosine scores (NumPy [n]) of lists of strings, through the same
        graph as the signature."""
        score = _SCORERS.get(model)
        if score is None:
            score = _SCORERS[model] = tf.function(
                score_graph(model, self.preprocessor(vocab)),
                input_signature=[tf.TensorSpec([None], tf.string)] * 2,
                autograph=False)
        parts = [score(tf.constant(texts[i:i + batch_size], tf.string),
                       tf.constant(texts_b[i:i + batch_size], tf.string)
                       ).numpy() for i in range(0, len(texts), batch_size)]
        return np.concatenate(parts) if parts else np.zeros((0,), np.float32)

    def evaluate(self, model, data, split, vocab, batch_size,
                 dynamic_length=False):
        texts, texts_b, gold = data.split(split)
        if not len(gold):
            return {}
        predicted = self.scores(model, texts, texts_b, vocab, batch_size)
        results = compute(METRICS, gold, predicted)
        results["loss"] = float(np.mean((predicted - gold) ** 2))
        return results

    def serving_module(self, model, vocab, fixed_length=False):
        return SimilarityModule(model, self.preprocessor(vocab), vocab,
                                fixed_length)


def score_graph(model, preprocessor, fixed_length=False):
    """text, text_b -> cosine scores (a plain function); each batch runs at
    its longest text's length unless `fixed_length`."""

    def score(text, text_b):
        inputs = pair_inputs(preprocessor, text, text_b,
                             trim=not fixed_length)
        return map_in_chunks(
            lambda chunk: {"score": model(chunk, training=False)}, inputs,
            ("score",), row_classes=row_classes_of(model))["score"]

    return score


class SimilarityModule(TaskModule):
    """The `tf.Module` of the similarity SavedModel (see the module
    docstring for its signatures)."""

    warmup_inputs = [{"text": [a], "text_b": [b]} for a, b in WARMUP]

    def __init__(self, model, preprocessor, vocab, fixed_length=False):
        super().__init__(model, vocab, "bert_similarity",
                         preprocessor.seq_length, fixed_length)
        score = score_graph(model, preprocessor, fixed_length)

        def serve(text, text_b):
            text = string_batch(text, "text")
            text_b = string_batch(text_b, "text_b")
            return {"score": score(*same_batch(text, text_b, "text",
                                               "text_b"))}

        def embed(text):
            inputs = preprocessor(string_batch(text, "text"))
            if not fixed_length:
                inputs = cut_to_longest(inputs)
            return map_in_chunks(
                lambda chunk: {"embedding": model.embed(chunk,
                                                        training=False)},
                {k: inputs[k] for k in INPUT_NAMES}, ("embedding",),
                row_classes=row_classes_of(model))

        self.serve = tf.function(serve, input_signature=[
            tf.TensorSpec([None], tf.string, name="text"),
            tf.TensorSpec([None], tf.string, name="text_b")], autograph=False)
        self.embed = tf.function(embed, input_signature=[
            tf.TensorSpec([None], tf.string, name="text")], autograph=False)

    def signatures(self):
        return {"serving_default": self.serve, "embed": self.embed}

    def filler_request(self, words, batch_size=1):
        text = " ".join(["a"] * words)
        return {"text": [text] * batch_size, "text_b": [text] * batch_size}
