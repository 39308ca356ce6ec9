"""The transfer set of a distillation run: the texts the student learns
the teacher's outputs on (the task's training split, unlabeled text and
augmented copies), with the teacher's logits computed once."""

import time

import numpy as np
import tensorflow as tf

from bert_tf.data import documents
from bert_tf.models.distiller import (TEACHER_KEY, Distiller,
                                      stacked_positions)

MASK = "[MASK]"


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
        unlabeled and augmented texts, as the kind reads them
        (`task.transfer_examples`; unlabeled ones get
        `task.unlabeled_label`)."""
        if self._texts is not None:
            return self._texts
        if task.transfer_reads and (self.cfg.unlabeled or self.cfg.augment):
            raise ValueError(
                "unlabeled and augment add single texts; "
                f"{task.transfer_reads}: leave both empty for it.")
        texts, labels = task.transfer_examples(data)
        extra = self.unlabeled_texts()
        augmented = augmented_texts(
            texts, self.cfg.augment, self.cfg.augment_rate,
            replacement_words(self.teacher_vocab.tokens),
            self.cfg.trainer.seed) if self.cfg.augment else []
        self.counts = {"labeled": len(texts), "unlabeled": len(extra),
                       "augmented": len(augmented)}
        if labels is not None:
            labels = list(labels) + [task.unlabeled_label(t)
                                     for t in extra + augmented]
        self._texts = self._checked(texts + extra + augmented, labels)
        return self._texts

    @staticmethod
    def _checked(texts, labels):
        if not texts:
            raise ValueError("the transfer set is empty: the task's "
                             "training split and `unlabeled` hold no text.")
        return texts, labels

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
            return tf.cast(stacked_positions(self.teacher, out), tf.float32)

        parts, step = [], task.teacher_batch
        for i in range(0, len(texts), step):
            chunk = texts[i:i + step]
            x, y, w = task.transfer_rows(
                preprocessor, chunk,
                None if labels is None else labels[i:i + step])
            parts.append((task.transfer_inputs(chunk, x) | {
                TEACHER_KEY: forward(x).numpy()}, y, w))
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
        return task.transfer_batches(
            dataset, vocab, self.cfg.dynamic_length and
            self.cfg.strategy != "tpu").prefetch(tf.data.AUTOTUNE)

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
        distiller.compile(metrics=self.task.distill_metrics())
        return distiller
