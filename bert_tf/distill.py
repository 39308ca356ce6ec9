"""`bert-tf distill`: a fine-tuned teacher teaches a smaller student.

A `DistillConfig` is a fine-tuning config of the student (its `init`,
`encoder`, schedule, trainer) plus the teacher's run and the recipe:
`layers` keeps chosen blocks of the student's init encoder (DistilBERT's
initialisation), `temperature` and `alpha` weigh the soft and hard
losses (`bert_tf.models.distiller`), `unlabeled` adds raw text to the
transfer set. The teacher's logits over the transfer set are computed
once, before training; then the student trains through the ordinary
fine-tuning run (`finetune.run`), so its `best/` exports, converts to
TFLite, evaluates and predicts like any run.

Supported teachers: classification runs (one soft distribution per
text) and tagging runs (one per word, read at its first piece in each
window). Span-QA teachers are refused with a message (not built yet).
"""

import dataclasses
import time

import numpy as np
import tensorflow as tf

from bert_tf import checkpoints, config as config_lib, finetune
from bert_tf.data import documents
from bert_tf.models.distiller import TEACHER_KEY, Distiller
from bert_tf.models.encoder import INPUT_NAMES, BertEncoder
from bert_tf.tasks import get_task_class, read_spec
from bert_tf.tasks.base import restore_finetuned
from bert_tf.text.features import cut_to_longest
from bert_tf.text.vocab import read_vocab

SUPPORTED_KINDS = ("classification", "tagging")
# Teacher spec fields that are the run's, not the student task's.
RUN_ONLY = ("seq_length", "lower_case", "dropout", "encoder", "pair",
            "metrics")


@dataclasses.dataclass
class DistillConfig(config_lib.FinetuneConfig):
    """A distillation run (`configs/distill/*.yaml`): every key of a
    fine-tuning config, for the student, plus:

    Args:
        teacher: the teacher's fine-tuning run directory (or its best/).
        layers: the blocks of the `init` encoder the student keeps, e.g.
            `[0, 2, 4]` (empty: all); `init: teacher` starts from the
            teacher's own fine-tuned encoder.
        temperature: T of the softened distributions.
        alpha: weight of the hard-label loss (1 - alpha: the soft loss).
        unlabeled: corpus specs (as `bert-tf pairs` reads, e.g.
            `sample:wikipedia`) whose sentences join the transfer set
            without labels.
        unlabeled_max: at most this many unlabeled sentences.
    """

    teacher: str = ""
    layers: list = dataclasses.field(default_factory=list)
    temperature: float = 2.0
    alpha: float = 0.5
    unlabeled: list = dataclasses.field(default_factory=list)
    unlabeled_max: int = 20_000

    def validate(self, where=""):
        if not self.teacher:
            raise ValueError("teacher: name the teacher's fine-tuning run "
                             "directory.")
        if not self.temperature > 0:
            raise ValueError(f"temperature = {self.temperature}: must be "
                             "> 0.")
        if not 0.0 <= self.alpha <= 1.0:
            raise ValueError(f"alpha = {self.alpha}: must be in [0, 1].")
        if any(not isinstance(i, int) or i < 0 for i in self.layers):
            raise ValueError(f"layers = {self.layers}: block indices >= 0.")
        if len(set(self.layers)) != len(self.layers):
            raise ValueError(f"layers = {self.layers}: each block once.")
        return super().validate(where)


def load(path, overrides=()):
    """A validated `DistillConfig` from YAML plus `key=value` overrides."""
    return config_lib.load_config(path, DistillConfig, overrides)


def load_dict(data):
    """A validated `DistillConfig` from a mapping (a notebook's config)."""
    return config_lib.from_dict(DistillConfig, data).validate()


def teacher_of(directory):
    """(spec, model, vocab) of the teacher's run; a clear error for a kind
    that cannot teach yet."""
    best, spec = read_spec(directory)
    if getattr(spec, "pair", False) or getattr(spec, "long_document", False):
        raise ValueError(
            f"teacher {directory} classifies text pairs or long documents; "
            "distillation reads single texts of the model's length (pairs "
            "and windows are not built yet).")
    if spec.kind not in SUPPORTED_KINDS:
        raise ValueError(
            f"teacher {directory} is a {spec.kind} run; distillation "
            f"supports {', '.join(SUPPORTED_KINDS)} teachers (span_qa is "
            "not built yet).")
    model, vocab = restore_finetuned(get_task_class(spec.kind)(spec), best)
    return spec, model, vocab


def student_task(cfg, teacher_spec):
    """The student's `task:` section: the teacher's data and labels, with
    what the distillation config's own `task:` sets on top."""
    fields = {k: v for k, v in config_lib.to_dict(teacher_spec).items()
              if k not in RUN_ONLY}
    return {**fields, **cfg.task}


def student_init(cfg, teacher_best):
    """The `finetune.Init` of the student: `cfg.init` (or the encoder of
    the teacher's run `teacher_best` with `init: teacher`), cut to
    `cfg.layers`."""
    if cfg.init == "teacher":
        full = _teacher_encoder_init(teacher_best)
    else:
        full = finetune.resolve_init(cfg)
    if not cfg.layers:
        return full
    depth = full.encoder.num_layers
    if max(cfg.layers) >= depth:
        raise ValueError(f"layers = {cfg.layers}: the init encoder has "
                         f"{depth} blocks (0 to {depth - 1}).")
    config = dataclasses.replace(full.encoder, num_layers=len(cfg.layers))

    def restore(student):
        source = BertEncoder.from_config_object(full.encoder)
        full.restore(source)
        student.embeddings.set_weights(source.embeddings.get_weights())
        student.pooler.set_weights(source.pooler.get_weights())
        for block, index in zip(student.transformer_layers, cfg.layers):
            block.set_weights(source.transformer_layers[index].get_weights())

    return finetune.Init(config, full.vocab_path, restore,
                         f"{full.description}, blocks {cfg.layers}")


def _teacher_encoder_init(directory):
    best, spec = read_spec(directory)
    encoder_config = config_lib.from_dict(config_lib.EncoderConfig,
                                          spec.encoder, "encoder")
    return finetune.Init(
        encoder_config, best / checkpoints.VOCAB_FILE,
        lambda encoder: checkpoints.restore_model(
            best / checkpoints.WEIGHTS_PREFIX, encoder),
        f"the teacher's encoder ({best})")


def check_same_vocab(teacher_vocab, student_vocab_path):
    student = read_vocab(student_vocab_path)
    if tuple(student.tokens) != tuple(teacher_vocab.tokens):
        raise ValueError(
            f"the student's vocab ({student_vocab_path}, {student.size} "
            f"tokens) differs from the teacher's ({teacher_vocab.size} "
            "tokens): a student reads the teacher's word pieces, so give it "
            "the teacher's vocab (an init with the same vocab, or "
            "`vocab:` pointing at the teacher's best/vocab.txt).")


class TransferSet:
    """The `finetune.run` variant of distillation: the transfer set with
    the teacher's logits (computed once), and the student wrapped in a
    `Distiller`."""

    def __init__(self, cfg, task, teacher, teacher_vocab, log=print):
        self.cfg, self.task, self.teacher, self.log = cfg, task, teacher, log
        self.teacher_vocab = teacher_vocab
        self.arrays = None
        self._texts = None  # read once: the empty check, then the teacher

    def unlabeled_texts(self):
        if not self.cfg.unlabeled:
            return []
        docs, _ = documents.load_documents(list(self.cfg.unlabeled))
        return [s for doc in docs for s in doc if s.strip()][
            :self.cfg.unlabeled_max]

    def texts(self, task, data):
        """(texts, labels) of the training split plus the unlabeled text:
        per text a class id, or (tagging) a list of tag ids per word; -1
        for unlabeled."""
        if self._texts is not None:
            return self._texts
        extra = self.unlabeled_texts()
        if task.kind == "tagging":
            texts, labels = task._examples(data, "train")
            labels = labels.to_list() + [[-1] * len(t.split())
                                         for t in extra]
        else:
            texts, labels = [], []
            for example in data.split("train").as_numpy_iterator():
                texts.append(example["text"].decode("utf-8", "replace"))
                labels.append(int(example["label"]))
            labels += [-1] * len(extra)
        texts = list(texts) + extra
        self.unlabeled_count = len(extra)
        if not texts:
            raise ValueError("the transfer set is empty: the task's "
                             "training split and `unlabeled` hold no text.")
        self._texts = (texts, labels)
        return self._texts

    @staticmethod
    def _rows(task, preprocessor, texts, labels):
        """Encoder inputs, labels and weights (None: every row counts) of
        the training rows of `texts`: a row per text, or per window for
        tagging."""
        if task.kind != "tagging":
            x = preprocessor(tf.constant(texts))
            return x, np.array(labels, np.int64), None
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
        forward = tf.function(lambda x: self.teacher(x, training=False))
        parts = []
        step = 64 if task.kind == "tagging" else 256
        for i in range(0, len(texts), step):
            x, y, w = self._rows(task, preprocessor, texts[i:i + step],
                                 labels[i:i + step])
            parts.append(({k: v.numpy() for k, v in x.items()} | {
                TEACHER_KEY: tf.cast(forward(x), tf.float32).numpy()}, y, w))
        x = {k: np.concatenate([p[0][k] for p in parts]) for k in parts[0][0]}
        y = np.concatenate([p[1] for p in parts])
        w = None if parts[0][2] is None else np.concatenate(
            [p[2] for p in parts])
        self.arrays = (x, y) if w is None else (x, y, w)
        unlabeled = self.unlabeled_count
        self.log(f"teacher outputs for {len(texts):,} texts "
                 f"({len(texts) - unlabeled:,} labeled, {unlabeled:,} "
                 f"unlabeled; {len(y):,} rows) in "
                 f"{time.perf_counter() - start:.1f} s")
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
        if self.cfg.dynamic_length and self.cfg.strategy != "tpu" and \
                len(arrays) == 2:  # tagging rows keep their positions
            dataset = dataset.map(lambda x, y: (cut_to_longest(x), y))
        return dataset.prefetch(tf.data.AUTOTUNE)

    def wrap(self, model):
        distiller = Distiller(model, temperature=self.cfg.temperature,
                              alpha=self.cfg.alpha)
        distiller.compile(metrics=["accuracy"])
        return distiller


def run(cfg, log=print):
    """Distils as `cfg` says; returns the student's `FinetuneResult`.
    Every check (teacher kind, vocab, layers, transfer set) runs before
    training."""
    teacher_spec, teacher, teacher_vocab = teacher_of(cfg.teacher)
    cfg = dataclasses.replace(cfg, task=student_task(cfg, teacher_spec))
    finetune.task_of(cfg)  # the merged task section still reads
    init = student_init(cfg, cfg.teacher)
    check_same_vocab(teacher_vocab, init.vocab_path)
    task_cls, task_config = finetune.task_of(cfg)
    data = task_cls.load_data(task_config)
    task = task_cls(dataclasses.replace(
        task_config, **{k: getattr(teacher_spec, k) for k in RUN_ONLY
                        if k not in ("encoder", "seq_length") and
                        hasattr(teacher_spec, k)},
        seq_length=cfg.seq_length))
    transfer = TransferSet(cfg, task, teacher, teacher_vocab, log)
    transfer.texts(task, data)  # an empty transfer set fails now
    log(f"teacher {cfg.teacher} ({teacher_spec.kind}, L="
        f"{teacher.encoder.config.num_layers} H="
        f"{teacher.encoder.config.hidden_size}); temperature "
        f"{cfg.temperature:g}, alpha {cfg.alpha:g}")
    return finetune.run(cfg, log=log, init=init, variant=transfer)
