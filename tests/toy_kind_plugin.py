"""A task kind that lives outside bert_tf: the toy-kind test writes this
file into a temporary folder as a package with an entry point in the
`bert_tf.kinds` group, and runs it through fine-tuning, SavedModel export,
TFLite and `bert-tf predict` with no library file touched.

The kind: is a text long (more than four words)? Its data are made up
from a few words; its model is a classifier on the encoder."""

import dataclasses
import typing

import keras
import numpy as np
import tensorflow as tf

from bert_tf.tasks.base import (Task, TaskModule, command_line_texts,
                                register, register_config, string_batch)
from bert_tf.tasks.classification.model import BertClassifier
from bert_tf.tasks.task_config import TaskConfig
from bert_tf.text.packer import pack_dense
from bert_tf.text.preprocessor import BertPreprocessor
from bert_tf.text.tokenizer import BertTokenizer

WORDS = "the film was good and long short new great fine bad dull".split()


@register_config
@dataclasses.dataclass
class LengthConfig(TaskConfig):
    names: typing.ClassVar[str] = "made_up"
    data_names: typing.ClassVar[tuple] = ("made_up",)
    kind: str = "toy_length"
    name: str = "made_up"


class LengthData:
    """Texts of 1 to 8 words; label 1 when longer than four."""

    name, splits = "made_up", ("train", "validation")

    def __init__(self, seed):
        rng = np.random.default_rng(seed)
        self.rows = {}
        for split, count in (("train", 256), ("validation", 64)):
            lengths = rng.integers(1, 9, count)
            self.rows[split] = ([" ".join(rng.choice(WORDS, n))
                                 for n in lengths],
                                (lengths > 4).astype("int32"))

    def size(self, split):
        return len(self.rows[split][1])

    def split(self, split):
        return self.rows[split]


@register
class Length(Task):
    kind = "toy_length"
    config_class = LengthConfig
    model_class = BertClassifier
    tflite_outputs = ("long",)

    @classmethod
    def load_data(cls, spec):
        return LengthData(spec.seed)

    def describe(self, data):
        return f"{data.size('train')} made-up texts, short or long"

    def preprocessor(self, vocab):
        return BertPreprocessor(vocab, self.spec.seq_length,
                                lower_case=self.spec.lower_case)

    def train_dataset(self, data, vocab, batch_size, seed=0,
                      input_context=None, drop_remainder=False,
                      dynamic_length=False):
        texts, labels = data.split("train")
        preprocessor = self.preprocessor(vocab)
        return (tf.data.Dataset.from_tensor_slices((texts, labels))
                .shuffle(len(texts), seed=seed).repeat()
                .batch(batch_size, drop_remainder=drop_remainder)
                .map(lambda text, label: (preprocessor(text), label)))

    def build_model(self, encoder):
        return BertClassifier(encoder, 2, dropout=self.spec.dropout)

    def compile(self, model):
        model.compile(loss=keras.losses.SparseCategoricalCrossentropy(
            from_logits=True), metrics=["accuracy"])

    official_metric = "accuracy"

    def evaluate(self, model, data, split, vocab, batch_size,
                 dynamic_length=False):
        texts, labels = data.split(split)
        logits = model(self.preprocessor(vocab)(tf.constant(texts)))
        return {"accuracy": float(np.mean(
            np.argmax(logits, -1) == labels))}

    def serving_module(self, model, vocab, fixed_length=False):
        return LengthModule(model, self.preprocessor(vocab), vocab)

    def tflite_module(self, model, vocab):
        return LengthTFLite(model, self.spec, vocab)

    @classmethod
    def print_predictions(cls, loaded, args, log=print):
        texts = command_line_texts(args)
        out = loaded.signatures["serving_default"](text=tf.constant(texts))
        for text, long in zip(texts, np.asarray(out["long"])):
            log(f"{'long' if long else 'short'}\t{text}")


class LengthModule(TaskModule):
    warmup_inputs = [{"text": ["the film was good"]}]

    def __init__(self, model, preprocessor, vocab):
        super().__init__(model, vocab, "toy_length",
                         preprocessor.seq_length, fixed_length=True)

        def serve(text):
            logits = model(preprocessor(string_batch(text, "text")),
                           training=False)
            return {"long": tf.argmax(logits, -1, output_type=tf.int32)}

        self.serve = tf.function(serve, input_signature=[
            tf.TensorSpec([None], tf.string, name="text")])

    def filler_request(self, words, batch_size=1):
        return {"text": [" ".join(["the"] * words)] * batch_size}


class LengthTFLite(tf.Module):
    def __init__(self, model, spec, vocab):
        super().__init__(name="toy_length_tflite")
        self.model_variables = [v.value for v in model.variables]
        tokenizer = BertTokenizer(vocab, spec.lower_case).fused()

        def serve(text):
            inputs = pack_dense([tokenizer.tokenize(text)], spec.seq_length,
                                vocab.cls_id, vocab.sep_id, vocab.pad_id)
            logits = model(inputs, training=False)
            return {"long": tf.argmax(logits, -1, output_type=tf.int32)}

        self.serve = tf.function(serve, input_signature=[
            tf.TensorSpec([None], tf.string, name="text")])
