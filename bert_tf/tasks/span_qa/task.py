"""Extractive question answering (SQuAD v1.1 / v2.0): a question and a
context of any length in, the answer text and its offsets out.

Features: `QAPreprocessor` (question + context windows with a document
stride, code-point offsets), in `tf.data` and in the exported graph.
Model: `BertSpanLabeler`. Post-processing: `span_decoding.decode_answers`
(n-best, max answer length, max-context rule, SQuAD 2.0 null threshold),
called by evaluation and by the signature through one `answer_function`.
Official metric: SQuAD F1 (v1.1) or best F1 over no-answer thresholds
(v2.0), whose threshold is stored with the best model.

Serving: `serving_default` takes `question` and `context` (tf.string
[batch]) and returns `answer` (string [batch], "" for no answer),
`score`, `start` and `end` (code points into `context`, -1 for no
answer), `has_answer`, `null_score`, and the top `n_best_size` distinct
answers best first, padded: `top_answers`, `top_scores`, `top_starts`,
`top_ends` [batch, K], with `count` [batch].
"""

import dataclasses
import weakref

import keras
import numpy as np
import tensorflow as tf

import bert_tf.tasks.span_qa.hf_head as hf_head
from bert_tf.models.chunked import map_in_chunks, row_classes_of
from bert_tf.models.encoder import INPUT_NAMES
from bert_tf.tasks.base import (Task, TaskModule, register, run_spec,
                                same_batch, string_batch)
from bert_tf.tasks.batching import grouped_window_batches, window_batches
from bert_tf.tasks.span_qa.config import SpanQAConfig
from bert_tf.tasks.span_qa.data import load_qa, qa_dataset
from bert_tf.tasks.span_qa.decoding import decode_answers
from bert_tf.tasks.span_qa.features import QAPreprocessor
from bert_tf.tasks.span_qa.metrics import squad_v1, squad_v2
from bert_tf.tasks.span_qa.model import BertSpanLabeler, SharedSpanLoss
from bert_tf.text.features import cut_to_longest
from bert_tf.tasks.span_qa.cli import SpanQACommandLine

WARMUP = (("Who wrote it?", "It was written by Ann Lee in 1999."),
          ("", ""),
          ("Where?", " ".join(["The river runs north to the sea."] * 80)))
_ANSWERERS = weakref.WeakKeyDictionary()


@register
class SpanQA(SpanQACommandLine, Task):
    """The span QA task kind (see the module docstring)."""

    kind = "span_qa"
    serving_inputs = ("question", "context")
    config_class = SpanQAConfig
    model_class = BertSpanLabeler
    hf_head = hf_head

    @classmethod
    def reads_whole_text(cls, spec):
        return True
    tflite_outputs = ("answer",)

    @classmethod
    def load_data(cls, spec):
        return load_qa(spec.name, **spec.split_args())

    @classmethod
    def make_spec(cls, cfg, spec, data, encoder_config, vocab):
        if cfg.seq_length < spec.max_query_length + 4:
            raise ValueError(
                f"seq_length = {cfg.seq_length} leaves no room for context "
                f"after task.max_query_length = {spec.max_query_length}: make "
                f"it at least {spec.max_query_length + 4}.")
        if spec.shared_norm and cfg.strategy == "tpu":
            raise ValueError(
                "task.shared_norm batches all windows of each question, a "
                "varying number, and TPUs need fixed batch shapes: turn it "
                "off for strategy = tpu.")
        return run_spec(cfg, spec, data, encoder_config, vocab,
                        version_2=data.version_2, null_threshold=0.0)

    def describe(self, data):
        train = data.split("train")
        answerable = sum(not e["is_impossible"] for e in train)
        skipped = [(split, id_, why) for split, items in
                   data.skipped.items() for id_, why in items]
        shown = "; ".join(f"{split} {id_}: {why}"
                          for split, id_, why in skipped[:3])
        return (f"{len(train):,} training questions ({answerable:,} "
                f"answerable), SQuAD {'2.0' if data.version_2 else '1.1'} "
                f"style, windows of {self.spec.seq_length} pieces with "
                f"stride {self.spec.doc_stride}"
                + (f"; {len(skipped)} questions skipped ({shown}"
                   f"{'; ...' if len(skipped) > 3 else ''})"
                   if skipped else ""))

    def preprocessor(self, vocab):
        s = self.spec
        return QAPreprocessor(vocab, s.seq_length, s.doc_stride,
                              s.max_query_length,
                              lower_case=s.lower_case)

    def train_dataset(self, data, vocab, batch_size, seed=0,
                      input_context=None, drop_remainder=False,
                      dynamic_length=False):
        examples = data.split("train")
        preprocessor = self.preprocessor(vocab)
        shared = self.spec.shared_norm

        def windows(batch):
            features = preprocessor(batch["question"], batch["context"],
                                    batch["answer_start"],
                                    batch["answer_end"])
            x = {name: features[name] for name in INPUT_NAMES}
            y = {"start_logits": features["start_positions"],
                 "end_logits": features["end_positions"]}
            if shared:  # one element per question: its windows
                index = features["example_index"]
                rows = tf.shape(batch["question"])[0]
                x, y = tf.nest.map_structure(
                    lambda t: tf.RaggedTensor.from_value_rowids(
                        t, index, nrows=rows), (x, y))
            return tf.data.Dataset.from_tensor_slices((x, y))

        if shared:
            # A batch is `batch_size` questions with all their windows.
            return grouped_window_batches(
                qa_dataset(examples), len(examples), windows, batch_size,
                self.spec.seq_length, seed, input_context, dynamic_length)
        return window_batches(
            qa_dataset(examples), len(examples), windows, batch_size,
            self.spec.seq_length, seed, input_context, drop_remainder,
            dynamic_length)

    def build_model(self, encoder):
        return BertSpanLabeler(encoder, dtype=encoder.dtype_policy)

    def compile(self, model):
        loss = (SharedSpanLoss() if self.spec.shared_norm else
                keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.compile(loss={"start_logits": loss, "end_logits": loss},
                      loss_weights={"start_logits": 0.5, "end_logits": 0.5})

    @property
    def official_metric(self):
        return "best_f1" if self.spec.version_2 else "f1"

    def answer_function(self, model, vocab):
        """The traced (question, context, null threshold) -> answers
        function (featurize, forward, decode) that evaluation and serving
        share. The threshold is an input, so the dev-tuned one needs no
        new trace."""
        key = (id(vocab), tuple(sorted(
            (k, v) for k, v in dataclasses.asdict(self.spec).items()
            if k not in ("encoder", "null_threshold"))))
        cached = _ANSWERERS.get(model)
        if cached is not None and cached[0] == key:
            return cached[1]
        function = tf.function(
            answer_graph(model, self.preprocessor(vocab), self.spec),
            input_signature=[tf.TensorSpec([None], tf.string)] * 2 +
            [tf.TensorSpec([], tf.float32)], autograph=False)
        _ANSWERERS[model] = (key, function)
        return function

    def answer(self, model, vocab, questions, contexts, batch_size=32):
        """{output: NumPy array} of the answers to lists of strings."""
        answer = self.answer_function(model, vocab)
        parts = []
        for start in range(0, len(questions), batch_size):
            out = answer(tf.constant(questions[start:start + batch_size],
                                     tf.string),
                         tf.constant(contexts[start:start + batch_size],
                                     tf.string),
                         tf.constant(self.spec.null_threshold, tf.float32))
            parts.append({k: v.numpy() for k, v in out.items()})
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}

    def evaluate(self, model, data, split, vocab, batch_size,
                 dynamic_length=False):
        examples = data.split(split)
        if not examples:
            return {}
        out = self.answer(model, vocab, [e["question"] for e in examples],
                          [e["context"] for e in examples], batch_size)
        golds = [e["answers"] for e in examples]
        answers = [a.decode("utf-8", "replace") for a in out["answer"]]
        if not self.spec.version_2:
            return squad_v1(golds, answers)
        spans = [a.decode("utf-8", "replace") for a in out["top_answers"][:, 0]]
        diffs = np.where(out["count"] > 0, out["null_score"] - out["score"],
                         np.inf)
        return squad_v2(golds, answers, diffs, spans)

    def update_spec(self, best_results):
        if not self.spec.version_2 or "best_f1_thresh" not in best_results:
            return {}
        return {"null_threshold": float(best_results["best_f1_thresh"])}

    # --- distillation (`bert_tf.distill`): a row per window ------------

    transfer_reads = "a span QA teacher reads questions with contexts"
    teacher_batch = 16

    def transfer_examples(self, data):
        return list(data.split("train")), None

    def transfer_rows(self, preprocessor, texts, labels):
        batch = next(iter(qa_dataset(texts).batch(len(texts))))
        features = preprocessor(batch["question"], batch["context"],
                                batch["answer_start"], batch["answer_end"])
        x = {k: features[k] for k in INPUT_NAMES}
        y = tf.stack([features["start_positions"],
                      features["end_positions"]], -1)
        return x, y.numpy().astype(np.int64), None

    def distill_metrics(self):
        return None

    def tflite_module(self, model, vocab):
        from bert_tf.tasks.span_qa.tflite import QATFLiteModule
        return QATFLiteModule(model, self.spec, vocab)

    def serving_module(self, model, vocab, fixed_length=False):
        return SpanQAModule(model, self.preprocessor(vocab), self.spec,
                            vocab, fixed_length)


def answer_graph(model, preprocessor, spec, fixed_length=False):
    """question, context -> `decode_answers` outputs (a plain function);
    the windows run at their longest row's length unless `fixed_length`,
    a bounded number at a time (`map_in_chunks`), so memory does not grow
    with the context."""

    def answer(question, context, null_threshold=None):
        if null_threshold is None:
            null_threshold = spec.null_threshold
        features = preprocessor(question, context)
        if not fixed_length:
            features = cut_to_longest(
                features,
                [k for k, v in features.items() if v.shape.rank == 2])
        logits = map_in_chunks(
            lambda chunk: model(chunk, training=False),
            {k: features[k] for k in INPUT_NAMES},
            ("start_logits", "end_logits"), row_classes=row_classes_of(model))
        return decode_answers(
            features, logits["start_logits"], logits["end_logits"], context,
            n_best_size=spec.n_best_size,
            max_answer_length=spec.max_answer_length,
            null_threshold=null_threshold, version_2=spec.version_2)

    return answer


class SpanQAModule(TaskModule):
    """The `tf.Module` that becomes the QA SavedModel (see the module
    docstring for the signature)."""

    warmup_inputs = [{"question": [q], "context": [c]} for q, c in WARMUP]

    def __init__(self, model, preprocessor, spec, vocab,
                 fixed_length=False):
        super().__init__(model, vocab, "bert_span_qa",
                         preprocessor.seq_length, fixed_length)
        answer = answer_graph(model, preprocessor, spec, fixed_length)

        def serve(question, context):
            question = string_batch(question, "question")
            context = string_batch(context, "context")
            question, context = same_batch(question, context, "question",
                                           "context")
            return answer(question, context)

        self.serve = tf.function(serve, input_signature=[
            tf.TensorSpec([None], tf.string, name="question"),
            tf.TensorSpec([None], tf.string, name="context")], autograph=False)

    def filler_request(self, words, batch_size=1):
        return {"question": ["a"] * batch_size,
                "context": [" ".join(["a"] * max(1, words - 2))] * batch_size}
