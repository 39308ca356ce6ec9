"""Multiple choice (SWAG, HellaSwag, COPA, the next-sentence set): a
context and C choices in, the most plausible choice out.

Features: `choice_features` pairs the context with each choice through
the task's `BertPreprocessor` (`[CLS] context [SEP] choice [SEP]`, the
longer text trimmed first) into [batch, C, seq] inputs, in `tf.data` and
in the exported graph. Model: `BertMultipleChoice`. Post-processing:
`choose` (a softmax over the choices that are there), shared by
evaluation and serving. Official metric: accuracy.

Serving: `serving_default` takes `context` (string [batch]) and `choices`
(string [batch, C]) and returns `probabilities` (float32 [batch, C]),
`choice` (int32 [batch], the best choice's index) and `text` (its
string). `with_count` also takes `count` (int32 [batch]): only the first
`count` choices of a row are real (rows with fewer choices padded); the
others get probability 0, and a row with count 0 gets choice -1.
"""

import weakref

import keras
import numpy as np
import tensorflow as tf

import bert_tf.tasks.multiple_choice.hf_head as hf_head
from bert_tf.models.chunked import map_in_chunks, row_classes_of
from bert_tf.tasks.base import (Task, TaskModule, register, run_spec,
                                string_batch)
from bert_tf.tasks.multiple_choice.config import MultipleChoiceConfig
from bert_tf.tasks.multiple_choice.data import load_choices
from bert_tf.tasks.multiple_choice.model import BertMultipleChoice
from bert_tf.text.features import cut_to_longest
from bert_tf.text.preprocessor import BertPreprocessor
from bert_tf.tasks.multiple_choice.cli import MultipleChoiceCommandLine

WARMUP = (("A man is sitting on a roof.",
           ("He starts pulling up roofing.", "He is using wrap to wrap a "
            "pair of skis.", "", "He goes inside.")),)
_FORWARD = weakref.WeakKeyDictionary()


def choice_features(preprocessor, context, choices, fixed_length=True):
    """Encoder inputs [batch, C, seq] of `context` [batch] paired with each
    of `choices` [batch, C] (cut to the length of the longest pair
    unless `fixed_length`)."""
    count = tf.shape(choices)[1]
    # The context tokenized once and cut to what one pair can hold, then
    # its pieces repeated per choice: a long context costs once, not once
    # per choice (the packer keeps at most seq_length pieces of a side).
    pieces = preprocessor.tokenizer(context)[:, :preprocessor.seq_length]
    rows = tf.repeat(tf.range(tf.shape(context)[0]), count)
    packed = preprocessor.packer([
        tf.gather(pieces, rows),
        preprocessor.tokenizer(tf.reshape(choices, [-1]))])
    if not fixed_length:
        packed = cut_to_longest(packed)
    length = tf.shape(packed["input_word_ids"])[1]
    return {name: tf.reshape(value, [-1, count, length])
            for name, value in packed.items()}


def choose(logits, choices, count=None):
    """{probabilities, choice, text} of logits [batch, C]; with `count`
    [batch], choices past it are padding (probability 0; choice -1 when a
    row has none)."""
    logits = tf.cast(logits, tf.float32)
    size = tf.shape(logits)[1]
    if count is None:
        count = tf.fill(tf.shape(logits)[:1], size)
    real = tf.range(size)[None, :] < count[:, None]
    probabilities = tf.where(real, tf.nn.softmax(
        tf.where(real, logits, -1e9)), 0.0)
    choice = tf.where(count > 0, tf.argmax(probabilities, axis=-1,
                                           output_type=tf.int32), -1)
    text = tf.where(count > 0, tf.gather(choices, tf.maximum(choice, 0),
                                         batch_dims=1), "")
    return {"probabilities": probabilities, "choice": choice, "text": text}


@register
class MultipleChoice(MultipleChoiceCommandLine, Task):
    """The multiple-choice task kind (see the module docstring)."""

    kind = "multiple_choice"
    serving_inputs = ("context", "choices")
    config_class = MultipleChoiceConfig
    model_class = BertMultipleChoice
    hf_head = hf_head
    tflite_outputs = ("choice",)

    @classmethod
    def load_data(cls, spec):
        return load_choices(spec.name, **spec.split_args(),
                            fmt=spec.format or None)

    @classmethod
    def make_spec(cls, cfg, spec, data, encoder_config, vocab):
        return run_spec(cfg, spec, data, encoder_config, vocab,
                        num_choices=data.num_choices)

    def describe(self, data):
        labels = [label for _, _, label in data.split("train")]
        return (f"{len(labels):,} training examples, {data.num_choices} "
                f"choices each (chance {1 / data.num_choices:.0%})")

    def preprocessor(self, vocab):
        return BertPreprocessor(vocab, self.spec.seq_length,
                                lower_case=self.spec.lower_case)

    def _dataset(self, data, split, vocab, batch_size, dynamic_length,
                 shuffle=False, seed=0, input_context=None,
                 drop_remainder=False):
        examples = [e for e in data.split(split) if e[2] >= 0]
        dataset = tf.data.Dataset.from_tensor_slices({
            "context": [c for c, _, _ in examples] or tf.zeros([0],
                                                               tf.string),
            "choices": [list(x) for _, x, _ in examples] or tf.zeros(
                [0, data.num_choices], tf.string),
            "label": [label for _, _, label in examples] or tf.zeros(
                [0], tf.int32)})
        pipelines = input_context.num_input_pipelines if input_context \
            else 1
        if pipelines > 1:
            dataset = dataset.shard(pipelines,
                                    input_context.input_pipeline_id)
        if shuffle:
            dataset = dataset.shuffle(max(len(examples), 1), seed=seed,
                                      reshuffle_each_iteration=True).repeat()
        preprocessor = self.preprocessor(vocab)

        def encode(batch):
            return (choice_features(preprocessor, batch["context"],
                                    batch["choices"], not dynamic_length),
                    batch["label"])

        return dataset.batch(batch_size, drop_remainder=drop_remainder).map(
            encode, num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=True).prefetch(tf.data.AUTOTUNE)

    def train_dataset(self, data, vocab, batch_size, seed=0,
                      input_context=None, drop_remainder=False,
                      dynamic_length=False):
        return self._dataset(data, "train", vocab, batch_size,
                             dynamic_length, True, seed, input_context,
                             drop_remainder)

    def build_model(self, encoder):
        return BertMultipleChoice(encoder, dropout=self.spec.dropout,
                                  pooling=self.spec.pooling,
                                  dtype=encoder.dtype_policy)

    def compile(self, model):
        model.compile(loss=keras.losses.SparseCategoricalCrossentropy(
            from_logits=True), metrics=["accuracy"])

    @property
    def official_metric(self):
        return "accuracy"

    def evaluate(self, model, data, split, vocab, batch_size,
                 dynamic_length=False):
        forward = _FORWARD.get(model)
        if forward is None:
            forward = _FORWARD[model] = tf.function(
                lambda x: model(x, training=False), reduce_retracing=True,
                autograph=False)
        logits, labels = [], []
        for x, y in self.eval_dataset(
                data, split, vocab, lambda: self._dataset(
                    data, split, vocab, batch_size, dynamic_length),
                batch_size, dynamic_length):
            logits.append(forward(x).numpy())
            labels.append(y.numpy())
        if not logits:
            return {}
        logits, labels = np.concatenate(logits), np.concatenate(labels)
        shifted = logits - logits.max(-1, keepdims=True)
        log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
        return {"accuracy": float(np.mean(logits.argmax(-1) == labels)),
                "loss": float(-np.mean(log_probs[np.arange(len(labels)),
                                                 labels]))}

    def tflite_module(self, model, vocab):
        from bert_tf.tasks.multiple_choice.tflite import ChoiceTFLiteModule
        return ChoiceTFLiteModule(model, self.spec, vocab)

    def serving_module(self, model, vocab, fixed_length=False):
        return MultipleChoiceModule(model, self.preprocessor(vocab),
                                    vocab, fixed_length)


class MultipleChoiceModule(TaskModule):
    """The `tf.Module` that becomes the multiple-choice SavedModel."""

    def __init__(self, model, preprocessor, vocab, fixed_length=False):
        super().__init__(model, vocab, "bert_multiple_choice",
                         preprocessor.seq_length, fixed_length)
        self.warmup_inputs = [{"context": [context], "choices": [list(c)]}
                              for context, c in WARMUP]

        def answer(context, choices, count=None):
            context = string_batch(context, "context")
            choices = tf.raw_ops.EnsureShape(
                input=choices, shape=tf.TensorShape([None, None]),
                name="choices")
            check = tf.debugging.assert_equal(
                tf.shape(context)[0], tf.shape(choices)[0], message=(
                    "`context` and `choices` must have the same batch size"
                    " (choices is [batch, C])"))
            with tf.control_dependencies([check]):
                inputs = choice_features(preprocessor, context, choices,
                                         fixed_length)
            # Each context-choice pair a row of its own [B * C, 1, L]: the
            # encoder's steps then bound memory however many choices a
            # question has (the choices of a row never see each other).
            pairs = {name: tf.reshape(value, [-1, 1, tf.shape(value)[-1]])
                     for name, value in inputs.items()}
            logits = map_in_chunks(
                lambda chunk: {"logits": model(chunk, training=False)},
                pairs, ("logits",),
                row_classes=row_classes_of(model))["logits"]
            return choose(tf.reshape(logits, tf.shape(choices)), choices,
                          count)

        context_spec = tf.TensorSpec([None], tf.string, name="context")
        choices_spec = tf.TensorSpec([None, None], tf.string, name="choices")
        self.serve = tf.function(
            lambda context, choices: answer(context, choices),
            input_signature=[context_spec, choices_spec], autograph=False)

        def with_count(context, choices, count):
            count = tf.raw_ops.EnsureShape(input=count,
                                           shape=tf.TensorShape([None]),
                                           name="count")
            check = tf.debugging.assert_equal(
                tf.shape(count)[0], tf.shape(context)[0], message=(
                    "`count` must hold one number per context"))
            with tf.control_dependencies([check]):
                count = tf.clip_by_value(count, 0, tf.shape(choices)[1])
            return answer(context, choices, count)

        self.with_count = tf.function(with_count, input_signature=[
            context_spec, choices_spec,
            tf.TensorSpec([None], tf.int32, name="count")], autograph=False)

    def signatures(self):
        return {"serving_default": self.serve, "with_count": self.with_count}

    def filler_request(self, words, batch_size=1):
        text = " ".join(["a"] * max(1, words // 2))
        return {"context": [text] * batch_size,
                "choices": [[text, text]] * batch_size}
