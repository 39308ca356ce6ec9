"""The transfer set of a distillation run: the texts the student learns
the teacher's outputs on (the task's training split, unlabeled text and
augmented copies), with the teacher's logits computed once."""

import time

import numpy as np
import tensorflow as tf

from bert_tf.data import documents
from bert_tf.models.distiller import SPAN_OUTPUTS, TEACHER_KEY, Distiller
from bert_tf.models.encoder import INPUT_NAMES
from bert_tf.tasks.span_qa.data import qa_dataset
from bert_tf.text.features import cut_to_longest

MASK = "[MASK]"
UNLABELED_SCORE = float("nan")


def replacement_words(vocab_tokens):
    """Whole words of the vocab a substitution may insert: alphabetic, not
    pieces (`##...`) or special tokens."""
    return [t for t in vocab_tokens if t.isalpha() and len(t) > 1]


def augmented_texts(texts, copies, rate, words, seed=0):
    """`copies` noisy copies of each text: each word is replaced with
    probability `rate` (at least one per copy) by `[MASK]` or, as often,
    a random whole word of `words`. Word counts are kept, so a tagging
    text's words stay aligned.

    Examples:
        >>> augmented_texts(["a b c d"], 2, 0.5, ["x", "y"], seed=1)
        ['[MASK] b x d', '[MASK] b y [MASK]']
    """
    rng = np.random.default_rng(seed)
    out = []
    for text in texts:
        tokens = text.split()
        if not tokens:
            continue
        for _ in range(copies):
            replace = rng.random(len(tokens)) < rate
            replace[rng.integers(len(tokens))] = True
            out.append(" ".join(
                (MASK if rng.random() < 0.5 else
                 words[rng.integers(len(words))]) if r else token
                for token, r in zip(tokens, replace)))
    return out


def windowed(task):
    """True for a long-document classifier: a transfer-set row is then a
    document, whatever its windows, with the teacher's pooled logits."""
    return bool(getattr(task.spec, "long_document", False))


class TransferSet:
    """The `finetune.run` variant of distillation: the transfer set with
    the teacher's logits (computed once), and the student wrapped in a
    `Distiller`.

    Args:
        cfg: the `DistillConfig`.
        task: the student's task (the teacher's data and labels).
        teacher: the teacher task model, restored.
        teacher_vocab: its vocab (the student's too).
        rebuild_teacher: a function that builds the teacher again, in the
            strategy's scope, when intermediate layers are matched (the
            teacher then runs on each batch).
    """

    def __init__(self, cfg, task, teacher, teacher_vocab, rebuild_teacher,
                 log=print):
        self.cfg, self.task, self.teacher, self.log = cfg, task, teacher, log
        self.teacher_vocab = teacher_vocab
        self.rebuild_teacher = rebuild_teacher
        self.arrays = None
        self._texts = None  # read once: the empty check, then the teacher
        self.counts = {}

    def unlabeled_texts(self):
        if not self.cfg.unlabeled:
            return []
        docs, _ = documents.load_documents(list(self.cfg.unlabeled))
        return [s for doc in docs for s in doc if s.strip()][
            :self.cfg.unlabeled_max]

    def texts(self, task, data):
        """(texts, labels) of the transfer set: the training split, then
        unlabeled and augmented texts (a text is a (text, text_b) tuple
        for a pair teacher). Per text a class id, or (tagging) a list of
        tag ids per word, -1 where unlabeled; span QA: (the training
        examples, None)."""
        if self._texts is not None:
            return self._texts
        pair = getattr(task.spec, "pair", False)
        regression = getattr(task.spec, "regression", False)
        if (task.kind == "span_qa" or pair) and (self.cfg.unlabeled or
                                                  self.cfg.augment):
            raise ValueError(
                "unlabeled and augment add single texts; a "
                f"{'pair' if pair else 'span QA'} teacher reads "
                f"{'text pairs' if pair else 'questions with contexts'}: "
                "leave both empty for it.")
        if task.kind == "span_qa":
            examples = list(data.split("train"))
            self.counts = {"labeled": len(examples)}
            self._texts = self._checked(examples, None)
            return self._texts
        if task.kind == "tagging":
            texts, labels = task._examples(data, "train")
            texts, labels = list(texts), labels.to_list()
        else:
            texts, labels = [], []
            for example in data.split("train").as_numpy_iterator():
                text = example["text"].decode("utf-8", "replace")
                texts.append((text, example["text_b"].decode(
                    "utf-8", "replace")) if pair else text)
                labels.append(float(example["label"]) if regression
                              else int(example["label"]))
        extra = self.unlabeled_texts()
        augmented = augmented_texts(
            texts, self.cfg.augment, self.cfg.augment_rate,
            replacement_words(self.teacher_vocab.tokens),
            self.cfg.trainer.seed) if self.cfg.augment else []
        self.counts = {"labeled": len(texts), "unlabeled": len(extra),
                       "augmented": len(augmented)}
        # Unlabeled: -1 (a class id or tag), NaN (a regression score).
        for more in (extra, augmented):
            labels += ([[-1] * len(t.split()) for t in more]
                       if task.kind == "tagging" else
                       [UNLABELED_SCORE if regression else -1] * len(more))
        self._texts = self._checked(texts + extra + augmented, labels)
        return self._texts

    @staticmethod
    def _checked(texts, labels):
        if not texts:
            raise ValueError("the transfer set is empty: the task's "
                             "training split and `unlabeled` hold no text.")
        return texts, labels

    @staticmethod
    def _rows(task, preprocessor, texts, labels):
        """Encoder inputs, labels and weights (None: every row counts) of
        the training rows of `texts`: a row per text, or per window for
        tagging and span QA."""
        if task.kind == "span_qa":
            batch = next(iter(qa_dataset(texts).batch(len(texts))))
            features = preprocessor(batch["question"], batch["context"],
                                    batch["answer_start"],
                                    batch["answer_end"])
            x = {k: features[k] for k in INPUT_NAMES}
            y = tf.stack([features["start_positions"],
                          features["end_positions"]], -1)
            return x, y.numpy().astype(np.int64), None
        if windowed(task):
            # The rows are documents: their windows are cut per batch, in
            # `train_dataset`, as the student's own run cuts them.
            return preprocessor(tf.constant(texts)), np.array(
                labels, np.int64), None
        if task.kind != "tagging":
            pairs = isinstance(texts[0], tuple)
            x = preprocessor([tf.constant([t[i] for t in texts])
                              for i in (0, 1)] if pairs
                             else tf.constant(texts))
            return x, np.array(labels, np.float32 if isinstance(
                labels[0], float) else np.int64), None
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

    def prepare(self, task, data):
        """Runs the teacher once over the transfer set."""
        if self.arrays is not None:
            return self.arrays
        start = time.perf_counter()
        texts, labels = self.texts(task, data)
        preprocessor = task.preprocessor(self.teacher_vocab)

        @tf.function
        def forward(x):
            out = self.teacher(x, training=False)
            if isinstance(out, dict):
                out = tf.stack([out[name] for name in SPAN_OUTPUTS], -1)
            return tf.cast(out, tf.float32)

        parts = []
        step = 16 if windowed(task) else {"tagging": 64, "span_qa": 16}.get(
            task.kind, 256)
        for i in range(0, len(texts), step):
            x, y, w = self._rows(task, preprocessor, texts[i:i + step],
                                 None if labels is None else
                                 labels[i:i + step])
            inputs = ({"text": np.array(texts[i:i + step], object)}
                      if windowed(task) else
                      {k: v.numpy() for k, v in x.items()})
            parts.append((inputs | {TEACHER_KEY: forward(x).numpy()}, y, w))
        x = {k: np.concatenate([p[0][k] for p in parts]) for k in parts[0][0]}
        y = np.concatenate([p[1] for p in parts])
        w = None if parts[0][2] is None else np.concatenate(
            [p[2] for p in parts])
        self.arrays = (x, y) if w is None else (x, y, w)
        counts = ", ".join(f"{v:,} {k}" for k, v in self.counts.items()
                           if v or k == "labeled")
        self.log(f"teacher outputs for {len(texts):,} texts ({counts}; "
                 f"{len(y):,} rows) in {time.perf_counter() - start:.1f} s")
        return self.arrays

    def train_size(self, data):
        return len(self.prepare(self.task, data)[1])

    def train_dataset(self, task, data, vocab, batch_size, context):
        arrays = self.prepare(task, data)
        dataset = tf.data.Dataset.from_tensor_slices(arrays)
        if context.num_input_pipelines > 1:
            dataset = dataset.shard(context.num_input_pipelines,
                                    context.input_pipeline_id)
        dataset = dataset.shuffle(len(arrays[1]), seed=self.cfg.trainer.seed,
                                  reshuffle_each_iteration=True).repeat()
        dataset = dataset.batch(batch_size,
                                drop_remainder=self.cfg.strategy == "tpu")
        if windowed(task):
            preprocessor = task.preprocessor(vocab)
            return dataset.map(lambda x, y: (preprocessor(x["text"]) | {
                TEACHER_KEY: x[TEACHER_KEY]}, y)).prefetch(tf.data.AUTOTUNE)
        # Per-token rows (tagging, span QA) keep their length: their
        # labels and teacher logits are per position.
        if self.cfg.dynamic_length and self.cfg.strategy != "tpu" and \
                task.kind == "classification":
            dataset = dataset.map(lambda x, y: (cut_to_longest(x), y))
        return dataset.prefetch(tf.data.AUTOTUNE)

    def wrap(self, model):
        cfg = self.cfg
        teacher = self.rebuild_teacher() if cfg.matches_layers else None
        distiller = Distiller(
            model, teacher, temperature=cfg.temperature, alpha=cfg.alpha,
            hidden_weight=cfg.hidden_weight,
            attention_weight=cfg.attention_weight,
            layer_map=cfg.layer_map or None)
        if distiller.layer_map:
            self.log(f"matching student blocks to teacher blocks "
                     f"{distiller.layer_map} (hidden x{cfg.hidden_weight:g}"
                     f", attention x{cfg.attention_weight:g}"
                     f"{', projected' if distiller.projection else ''})")
        scores = getattr(self.task.spec, "regression", False)
        distiller.compile(metrics=None if self.task.kind == "span_qa" or
                          scores else ["accuracy"])
        return distiller
