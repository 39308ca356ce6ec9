"""Token tagging (NER): raw sentences in, entities with offsets out.

Features: `TaggingPreprocessor` (whitespace words, word pieces, each word's
label on its first piece, overlapping windows), in `tf.data` and in the
exported graph. Model: `BertTokenClassifier`. Post-processing:
`decoding.decode_entities` (first-piece tags, BIO -> entities as
seqeval's default mode), called by evaluation and by the signature.
Official metric: entity-level micro F1 (also precision, recall and F1 per
type), equal to seqeval's default mode.

Serving: `serving_default` takes `text` (tf.string [batch]) and returns
each text's entities, padded to K (`max_entities`): `type`, `text`
(string [batch, K]), `start`, `end` (int32 [batch, K], code points into
the input, end exclusive), `score` (float32 [batch, K]) and `count`
(int32 [batch]).
"""

import collections
import weakref

import keras
import numpy as np
import tensorflow as tf

import bert_tf.tasks.tagging.hf_head as hf_head
from bert_tf.samples import readers
from bert_tf.models.chunked import map_in_chunks, row_classes_of
from bert_tf.models.encoder import INPUT_NAMES
from bert_tf.tasks.base import (Task, TaskModule, register, run_spec,
                                string_batch)
from bert_tf.tasks.batching import window_batches
from bert_tf.tasks.labels import honoured
from bert_tf.tasks.tagging.config import TaggingConfig
from bert_tf.tasks.tagging.data import load_tagging
from bert_tf.tasks.tagging.decoding import (OUTPUTS, decode_entities,
                                            entity_spans)
from bert_tf.tasks.tagging.metrics import entity_scores
from bert_tf.tasks.tagging.model import BertTokenClassifier
from bert_tf.tasks.tagging.preprocessor import TaggingPreprocessor
from bert_tf.tasks.tagging.cli import TaggingCommandLine

WARMUP = ("Barack Obama visited Paris on Monday .", "",
          " ".join(["New York"] * 200))
_TAGGERS = weakref.WeakKeyDictionary()


@register
class Tagging(TaggingCommandLine, Task):
    """The token tagging task kind (see the module docstring)."""

    kind = "tagging"
    config_class = TaggingConfig
    model_class = BertTokenClassifier
    hf_head = hf_head

    @classmethod
    def reads_whole_text(cls, spec):
        return True
    tflite_outputs = ("type",)

    @classmethod
    def load_data(cls, spec):
        return load_tagging(spec.name, **spec.split_args(),
                            tag_column=spec.tag_column, scheme=spec.tag_scheme)

    @classmethod
    def make_spec(cls, cfg, spec, data, encoder_config, vocab):
        return run_spec(cfg, spec, data, encoder_config, vocab,
                        labels=honoured(spec.labels, data.labels, data.name))

    def describe(self, data):
        train = data.split("train")
        entities = sum(len(readers.entity_spans(tags)) for _, tags in train)
        return (f"{len(train):,} training sentences, {entities:,} entities "
                f"of {len(data.types)} types ({', '.join(data.types)})")

    def preprocessor(self, vocab, pretokenized=True):
        """The featurizer of data sentences (words joined by spaces, as
        their tags count them), or with `pretokenized=False` of raw text
        (words as BERT splits them: what the exports serve)."""
        return TaggingPreprocessor(vocab, self.spec.seq_length,
                                   self.spec.doc_stride,
                                   lower_case=self.spec.lower_case,
                                   pretokenized=pretokenized)

    def _examples(self, data, split):
        index = {t: i for i, t in enumerate(self.spec.labels)}
        sentences = data.split(split)
        unknown = {t for _, tags in sentences for t in tags} - set(index)
        if unknown:
            raise ValueError(f"{data.name} {split}: tags {sorted(unknown)} "
                             f"are not among the model's labels "
                             f"{self.spec.labels}.")
        texts = [" ".join(words) for words, _ in sentences]
        labels = tf.ragged.constant([[index[t] for t in tags]
                                     for _, tags in sentences],
                                    dtype=tf.int32, ragged_rank=1) \
            if sentences else tf.zeros([0, 0], tf.int32)
        return texts, labels

    def train_dataset(self, data, vocab, batch_size, seed=0,
                      input_context=None, drop_remainder=False,
                      dynamic_length=False):
        texts, labels = self._examples(data, "train")
        preprocessor = self.preprocessor(vocab)

        def windows(batch):
            features = preprocessor(batch["text"], batch["labels"])
            x = {name: features[name] for name in INPUT_NAMES}
            return tf.data.Dataset.from_tensor_slices(
                (x, features["labels"], features["label_weights"]))

        return window_batches(
            tf.data.Dataset.from_tensor_slices({"text": texts,
                                                "labels": labels}),
            len(texts), windows, batch_size, self.spec.seq_length, seed,
            input_context, drop_remainder, dynamic_length)

    def build_model(self, encoder):
        return BertTokenClassifier(encoder, len(self.spec.labels),
                                   dropout=self.spec.dropout,
                                   dtype=encoder.dtype_policy)

    def compile(self, model):
        model.compile(loss=keras.losses.SparseCategoricalCrossentropy(
            from_logits=True))

    @property
    def official_metric(self):
        return "f1"

    def tag_function(self, model, vocab):
        """The traced text -> entities function evaluation and serving
        share (featurize, forward, decode)."""
        cached = _TAGGERS.get(model)
        if cached is not None and cached[0] == id(vocab):
            return cached[1]
        function = tf.function(
            tag_graph(model, self.preprocessor(vocab), self.spec),
            input_signature=[tf.TensorSpec([None], tf.string)],
            autograph=False)
        _TAGGERS[model] = (id(vocab), function)
        return function

    def tag(self, model, vocab, texts, batch_size=32):
        """{output: list per text} of `decode_entities` on Python strings."""
        function = self.tag_function(model, vocab)
        results = collections.defaultdict(list)
        for start in range(0, len(texts), batch_size):
            out = function(tf.constant(texts[start:start + batch_size],
                                       tf.string))
            for key, value in out.items():
                results[key].extend(list(value.numpy()))
        return dict(results)

    def evaluate(self, model, data, split, vocab, batch_size,
                 dynamic_length=False):
        texts, gold_labels = self._examples(data, split)
        if not texts:
            return {}
        out = self.tag(model, vocab, texts, batch_size)
        labels = self.spec.labels
        width = max(len(t) for t in out["tags"])
        predicted_tags = np.stack([np.pad(t, (0, width - len(t)))
                                   for t in out["tags"]])
        num_words = tf.constant([len(w) for w, _ in data.split(split)],
                                tf.int32)
        predicted = _span_set(entity_spans(predicted_tags, num_words,
                                           labels))
        gold = _span_set(entity_spans(gold_labels.to_tensor(), num_words,
                                      labels))
        types = sorted({t[2:] for t in labels if t != "O"})
        return entity_scores(gold, predicted, types)

    # --- distillation (`bert_tf.distill`): a row per window ------------

    teacher_batch = 64

    def transfer_examples(self, data):
        texts, labels = self._examples(data, "train")
        return list(texts), labels.to_list()

    def unlabeled_label(self, text):
        return [-1] * len(text.split())

    def transfer_rows(self, preprocessor, texts, labels):
        words = tf.ragged.constant(labels, dtype=tf.int32, ragged_rank=1)
        features = preprocessor(tf.constant(texts), tf.maximum(words, 0))
        x = {k: features[k] for k in INPUT_NAMES}
        # Unlabeled words carry -1 at their first piece (soft loss only).
        unlabeled = tf.gather(tf.constant([-1 if l and l[0] < 0 else 0
                                           for l in labels]),
                              features["example_index"])
        y = tf.where((unlabeled[:, None] < 0) & (features["label_weights"] >
                                                 0), -1, features["labels"])
        return x, y.numpy().astype(np.int64), \
            features["label_weights"].numpy()

    def tflite_module(self, model, vocab):
        from bert_tf.tasks.tagging.tflite import TaggingTFLiteModule
        return TaggingTFLiteModule(model, self.spec, vocab)

    def serving_module(self, model, vocab, fixed_length=False):
        return TaggingModule(model, self.preprocessor(vocab, False),
                             self.spec, vocab, fixed_length)


def _span_set(spans):
    return set(zip(*(s.numpy().tolist() for s in spans)))


def tag_graph(model, preprocessor, spec, fixed_length=False):
    """text -> `decode_entities` outputs (a plain function); the windows
    run at their longest row's length unless `fixed_length`, a bounded
    number at a time (`map_in_chunks`)."""

    def tag(text):
        features = preprocessor.trimmed(text, fixed_length)
        window_features = {k: features[k] for k in (
            *INPUT_NAMES, "word_index", "word_is_max", "example_index",
            "num_words", "word_char_start", "word_char_end",
            "word_byte_start", "word_byte_end")}
        logits = map_in_chunks(
            lambda chunk: {"logits": model(chunk, training=False)},
            {k: window_features[k] for k in INPUT_NAMES},
            ("logits",), row_classes=row_classes_of(model))["logits"]
        return decode_entities(window_features, logits, text,
                               spec.labels, spec.max_entities)

    return tag


class TaggingModule(TaskModule):
    """The `tf.Module` that becomes the tagging SavedModel."""

    warmup_inputs = [{"text": [text]} for text in WARMUP]

    def __init__(self, model, preprocessor, spec, vocab,
                 fixed_length=False):
        super().__init__(model, vocab, "bert_tagger",
                         preprocessor.seq_length, fixed_length)
        tag = tag_graph(model, preprocessor, spec, fixed_length)

        def serve(text):
            out = tag(string_batch(text, "text"))
            return {name: out[name] for name in OUTPUTS}

        self.serve = tf.function(serve, input_signature=[
            tf.TensorSpec([None], tf.string, name="text")], autograph=False)

    def filler_request(self, words, batch_size=1):
        return {"text": [" ".join(["a"] * words)] * batch_size}
