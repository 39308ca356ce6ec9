"""Sentence and sentence-pair classification (or regression): GLUE, local
files, the RT sentiment sample.

Serving: `serving_default` takes `text` (and `text_b` for pairs) and
returns `probabilities` [batch, K] (softmax), `logits` [batch, K] and
`label` [batch] (class names); regression returns `score` and `logits`
[batch, 1]. `preprocess` returns the packed encoder inputs (TF Hub
preprocessor names) and `encode` the `pooled_output` and
`sequence_output`. Over-long input keeps its first word pieces: for pairs
the longer text loses pieces from its end first, as the original BERT's
`_truncate_seq_pair`. With `long_document`, nothing is cut: each text is
classified by windows whose logits are pooled (`long_document.py`), and
`serving_default` also returns `windows` [batch], the count per text.
"""

import weakref

import keras
import numpy as np
import tensorflow as tf

import bert_tf.tasks.classification.hf_head as hf_head
from bert_tf.tasks.base import (Task, TaskModule, read_spec, register,
                                restore_finetuned, run_spec, same_batch,
                                string_batch)
from bert_tf.tasks.labels import honoured
from bert_tf.tasks.classification.config import ClassificationConfig
from bert_tf.tasks.classification.data import (classification_dataset,
                                               load_classification)
from bert_tf.tasks.classification.long_document import (WINDOW_KEY,
                                                        DocumentWindows)
from bert_tf.tasks.classification.model import BertClassifier
from bert_tf.tasks.metrics import compute
from bert_tf.models.chunked import map_in_chunks, row_classes_of
from bert_tf.models.encoder import INPUT_NAMES
from bert_tf.text.features import cut_to_longest
from bert_tf.text.preprocessor import BertPreprocessor
from bert_tf.tasks.classification.cli import ClassificationCommandLine

WARMUP_TEXTS = ("a gripping, beautifully acted film",
                "dull and far too long", "")
_FORWARD = weakref.WeakKeyDictionary()  # one traced forward per model


def predict_logits(model, dataset):
    """(logits, labels) over a `classification_dataset`, as NumPy arrays."""
    forward = _FORWARD.get(model)
    if forward is None:
        forward = _FORWARD[model] = tf.function(
            lambda x: model(x, training=False), reduce_retracing=True,
            autograph=False)
    logits, labels = [], []
    for x, y in dataset:
        logits.append(forward(x).numpy())
        labels.append(y.numpy())
    if not logits:
        return np.zeros((0, model.num_classes), np.float32), np.zeros((0,))
    return np.concatenate(logits), np.concatenate(labels)


def evaluate_task(model, data, dataset):
    """The task's metrics (and mean loss) of `model` on a split's batches.

    Unlabeled examples (label -1, e.g. GLUE test sets) are skipped; with no
    labels at all the result is empty.
    """
    logits, labels = predict_logits(model, dataset)
    if data.is_regression:
        scores = logits[:, 0]
        results = compute(data.metrics, labels, scores) if len(labels) else {}
        if len(labels):
            results["loss"] = float(np.mean((scores - labels) ** 2))
        return results
    keep = labels >= 0
    logits, labels = logits[keep], labels[keep].astype(np.int64)
    if not len(labels):
        return {}
    results = compute(data.metrics, labels, logits.argmax(-1))
    shifted = logits - logits.max(-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    results["loss"] = float(-np.mean(log_probs[np.arange(len(labels)),
                                               labels]))
    return results


@register
class Classification(ClassificationCommandLine, Task):
    """The classification task kind (see the module docstring)."""

    kind = "classification"
    serving_inputs = ("text", "text_b")
    config_class = ClassificationConfig
    model_class = BertClassifier
    hf_head = hf_head

    @classmethod
    def reads_whole_text(cls, spec):
        return bool(getattr(spec, "long_document", False))
    tflite_outputs = ("probabilities", "label", "score")

    @classmethod
    def load_data(cls, spec):
        return load_classification(
            spec.name, **spec.split_args(), text=spec.text,
            text_b=spec.text_b, label=spec.label,
            labels=spec.labels or None, regression=spec.regression,
            fmt=spec.format or None)

    @classmethod
    def make_spec(cls, cfg, spec, data, encoder_config, vocab):
        if spec.long_document and data.pair:
            raise ValueError(f"task.long_document takes single texts; "
                             f"{data.name} has text pairs.")
        return run_spec(cfg, spec, data, encoder_config, vocab,
                        labels=honoured(spec.labels, data.labels, data.name),
                        regression=data.is_regression, pair=data.pair,
                        metrics=list(data.metrics))

    def describe(self, data):
        what = ("regression" if data.is_regression else
                f"{data.num_classes} classes")
        texts = "pairs" if data.pair else "single texts"
        if self.spec.long_document:
            texts = (f"documents in windows of {self.spec.seq_length} pieces"
                     f", {self.spec.window_pooling}-pooled")
        return f"{data.size('train'):,} training examples, {what}, {texts}"

    def preprocessor(self, vocab):
        if self.spec.long_document:
            return DocumentWindows(vocab, self.spec.seq_length,
                                   self.spec.doc_stride,
                                   lower_case=self.spec.lower_case)
        return BertPreprocessor(vocab, self.spec.seq_length,
                                lower_case=self.spec.lower_case)

    def train_dataset(self, data, vocab, batch_size, seed=0,
                      input_context=None, drop_remainder=False,
                      dynamic_length=False):
        return classification_dataset(
            data, "train", self.preprocessor(vocab), batch_size,
            shuffle=True, repeat=True, seed=seed, input_context=input_context,
            drop_remainder=drop_remainder,
            dynamic_length=dynamic_length and not self.spec.long_document)

    def build_model(self, encoder):
        return BertClassifier(encoder, len(self.spec.labels) or 1,
                              dropout=self.spec.dropout,
                              pooling=self.spec.pooling,
                              window_pooling=(self.spec.window_pooling if
                                              self.spec.long_document
                                              else None),
                              dtype=encoder.dtype_policy)

    def compile(self, model):
        if self.spec.regression:
            model.compile(loss=keras.losses.MeanSquaredError())
        else:
            model.compile(loss=keras.losses.SparseCategoricalCrossentropy(
                from_logits=True), metrics=["accuracy"])

    @property
    def official_metric(self):
        return self.spec.metrics[0]

    def evaluate(self, model, data, split, vocab, batch_size,
                 dynamic_length=False):
        dynamic_length = dynamic_length and not self.spec.long_document
        return evaluate_task(model, data, self.eval_dataset(
            data, split, vocab, lambda: classification_dataset(
                data, split, self.preprocessor(vocab), batch_size,
                dynamic_length=dynamic_length), batch_size, dynamic_length))

    # --- distillation (`bert_tf.distill`): a row per text or document ----

    @property
    def transfer_reads(self):
        return ("a pair teacher reads text pairs" if self.spec.pair
                else None)

    @property
    def teacher_batch(self):
        return 16 if self.spec.long_document else 256

    def transfer_examples(self, data):
        texts, labels = [], []
        for example in data.split("train").as_numpy_iterator():
            text = example["text"].decode("utf-8", "replace")
            texts.append((text, example["text_b"].decode(
                "utf-8", "replace")) if self.spec.pair else text)
            labels.append(float(example["label"]) if self.spec.regression
                          else int(example["label"]))
        return texts, labels

    def unlabeled_label(self, text):
        return float("nan") if self.spec.regression else -1

    def transfer_rows(self, preprocessor, texts, labels):
        if self.spec.long_document:
            # The rows are documents: their windows are cut per batch, in
            # `transfer_batches`, as the student's own run cuts them.
            return preprocessor(tf.constant(texts)), np.array(
                labels, np.int64), None
        pairs = isinstance(texts[0], tuple)
        x = preprocessor([tf.constant([t[i] for t in texts])
                          for i in (0, 1)] if pairs else tf.constant(texts))
        return x, np.array(labels, np.float32 if isinstance(
            labels[0], float) else np.int64), None

    def transfer_inputs(self, texts, rows):
        if self.spec.long_document:
            return {"text": np.array(texts, object)}
        return super().transfer_inputs(texts, rows)

    def transfer_batches(self, dataset, vocab, dynamic_length):
        if self.spec.long_document:
            preprocessor = self.preprocessor(vocab)
            return dataset.map(lambda x, y: (preprocessor(x["text"]) | {
                k: v for k, v in x.items() if k != "text"}, y))
        if dynamic_length:
            return dataset.map(lambda x, y: (cut_to_longest(x), y))
        return dataset

    def distill_metrics(self):
        return None if self.spec.regression else ["accuracy"]

    @classmethod
    def wrote_tflite_outputs(cls, outputs):
        return set(outputs) in ({"probabilities", "label"}, {"score"})

    def tflite_module(self, model, vocab):
        from bert_tf.tasks.classification.tflite import \
            ClassifierTFLiteModule
        return ClassifierTFLiteModule(model, self.spec, vocab)

    def describe_model(self):
        return f"labels {', '.join(self.spec.labels) or '(regression)'}"

    def serving_module(self, model, vocab, fixed_length=False):
        return ClassifierModule(model, self.preprocessor(vocab),
                                self.spec.labels, self.spec.pair,
                                vocab, fixed_length)


def load_classifier(directory, dtype=None):
    """(model, spec, vocab) from a fine-tuning run's `best/` directory (or
    the run directory holding it).

    Examples:
        >>> model, spec, vocab = load_classifier(example_files.finetuned())
        >>> spec.labels
        ['negative', 'positive']
    """
    best, spec = read_spec(directory)
    if spec.kind != Classification.kind:
        raise ValueError(f"{directory} holds a {spec.kind} model, not a "
                         "classifier.")
    model, vocab = restore_finetuned(Classification(spec), best, dtype)
    return model, spec, vocab


def classify_in_chunks(model, inputs):
    """`model(inputs)` (float32 logits, one row per text) with the encoder
    run a bounded number of rows at a time (`map_in_chunks`); the windows
    of long documents are pooled once all are classified."""
    rows = {k: inputs[k] for k in INPUT_NAMES}
    if model.is_windowed(inputs):
        return model.pool(map_in_chunks(
            lambda chunk: model.window_outputs(chunk, training=False), rows,
            model.window_output_names, row_classes=row_classes_of(model)),
            inputs)
    return map_in_chunks(
        lambda chunk: {"logits": model(chunk, training=False)}, rows,
        ("logits",), row_classes=row_classes_of(model))["logits"]


class ClassifierModule(TaskModule):
    """The `tf.Module` that becomes the classifier's SavedModel.

    Args:
        model: a `BertClassifier`.
        preprocessor: the `BertPreprocessor` it was trained with.
        labels: class names in id order (empty: regression).
        pair: the task takes `text` and `text_b`.
        vocab: the `Vocab` (its file is copied into the SavedModel's
            assets).
        fixed_length: run every request at the full sequence length (for
            XLA or TPU serving) instead of its longest text's length.
    """

    def __init__(self, model, preprocessor, labels, pair, vocab,
                 fixed_length=False):
        super().__init__(model, vocab, "bert_classifier",
                         preprocessor.seq_length, fixed_length)
        self.pair = pair
        self.label_names = tf.constant(list(labels) or [""])
        self.warmup_inputs = [
            {"text": [text], **({"text_b": [text]} if pair else {})}
            for text in WARMUP_TEXTS]
        regression = not labels
        label_names = self.label_names

        def inputs_of(text, text_b):
            text = string_batch(text, "text")
            if not pair:
                return preprocessor(text)
            text_b = string_batch(text_b, "text_b")
            return preprocessor(same_batch(text, text_b, "text", "text_b"))

        def serve(text, text_b=None):
            inputs = inputs_of(text, text_b)
            if not fixed_length:
                inputs = cut_to_longest(inputs)
            logits = classify_in_chunks(model, inputs)
            windows = {"windows": inputs["windows"]} if \
                WINDOW_KEY in inputs else {}
            if regression:
                return {"score": logits[:, 0], "logits": logits, **windows}
            return {"probabilities": tf.nn.softmax(logits),
                    "logits": logits,
                    "label": tf.gather(label_names,
                                       tf.argmax(logits, axis=-1)),
                    **windows}

        def preprocess(text, text_b=None):
            return inputs_of(text, text_b)

        def encode(text, text_b=None):
            inputs = inputs_of(text, text_b)
            outputs = map_in_chunks(
                lambda chunk: model.encoder(chunk, training=False),
                {k: inputs[k] for k in INPUT_NAMES},
                ("pooled_output", "sequence_output"),
                row_classes=row_classes_of(model))
            if WINDOW_KEY in inputs:  # one row per window
                outputs[WINDOW_KEY] = inputs[WINDOW_KEY]
            return outputs

        specs = [tf.TensorSpec([None], tf.string, name="text")]
        if pair:
            specs.append(tf.TensorSpec([None], tf.string, name="text_b"))
        self.serve = tf.function(serve, input_signature=specs, autograph=False)
        self.preprocess = tf.function(preprocess, input_signature=specs,
                                      autograph=False)
        self.encode = tf.function(encode, input_signature=specs,
                                  autograph=False)

    def signatures(self):
        return {"serving_default": self.serve, "preprocess": self.preprocess,
                "encode": self.encode}

    def filler_request(self, words, batch_size=1):
        texts = [" ".join(["a"] * words)] * batch_size
        return {"text": texts, **({"text_b": [""] * batch_size}
                                  if self.pair else {})}
