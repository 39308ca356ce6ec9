"""`bert-tf finetune`: a `FinetuneConfig` -> the task kind's data and
model (`bert_tf.tasks`), an encoder (random, our checkpoint or an imported
one), and the same `Trainer` and strategies as pre-training; evaluation
each epoch with the task's official metric, the best model kept in
`model_dir/best/` (weights, `task.yaml`, vocab) ready for `bert-tf export`.
No task is named here: everything task-specific comes from the task kind.
"""

import dataclasses
import json
import math
import time

import keras
import yaml

from bert_tf import checkpoints, config as config_lib, tasks
from bert_tf.models.encoder import BertEncoder
from bert_tf.storage import GPath
from bert_tf.tasks.base import write_spec
from bert_tf.text.vocab import read_vocab
from bert_tf.training import distribute
from bert_tf.precision import resolve_precision
from bert_tf.training.optimization import create_optimizer, split_clipping
from bert_tf.training.trainer import Trainer


def load(path, overrides=()):
    """A validated `FinetuneConfig` from YAML plus `key=value` overrides."""
    cfg = config_lib.load_config(path, config_lib.FinetuneConfig, overrides)
    task_of(cfg)
    return cfg


@dataclasses.dataclass
class Init:
    """Where the encoder starts: its config, vocab and a restore function."""

    encoder: config_lib.EncoderConfig
    vocab_path: GPath
    restore: object  # encoder -> None
    description: str


def resolve_init(cfg):
    """The encoder config, vocab and weights `cfg.init` points at.

    Examples:
        >>> from bert_tf.config import EncoderConfig, FinetuneConfig
        >>> cfg = FinetuneConfig(encoder=EncoderConfig.from_name("bert_tiny"),
        ...                      init="", vocab="vocab.txt")
        >>> init = resolve_init(cfg)
        >>> init.description, init.encoder.num_layers
        ('random init', 2)
    """
    init = cfg.init
    source, _, rest = init.partition(":")
    rest = str(GPath(rest).expanduser()) if rest else rest
    vocab = GPath(cfg.vocab).expanduser() if cfg.vocab else None
    if not init:
        return Init(cfg.encoder, vocab, lambda encoder: None, "random init")
    if source in checkpoints.SOURCES and rest:
        encoder_config, weights, _ = checkpoints.READERS[source](rest)
        vocab = vocab or checkpoints.find_vocab(rest)
        return Init(encoder_config, vocab,
                    lambda encoder: checkpoints.assign_weights(
                        weights, encoder, source=rest),
                    f"{source} checkpoint {rest}")
    path = GPath(init).expanduser()
    if path.is_dir() and (path / checkpoints.CONFIG_FILE).is_file():
        encoder_config, found_vocab, prefix = checkpoints.checkpoint_files(
            path)
        vocab = vocab or found_vocab
    else:
        if not cfg.vocab:
            raise ValueError(f"init = {init}: a bare checkpoint needs vocab "
                             "and encoder set in the config.")
        encoder_config = cfg.encoder
        prefix = checkpoints.checkpoint_prefix(path,
                                                (checkpoints.WEIGHTS_PREFIX,))
    return Init(encoder_config, vocab,
                lambda encoder: checkpoints.restore_model(prefix, encoder),
                f"bert_tf checkpoint {prefix}")


def task_of(cfg):
    """(task kind class, typed task config) of a config: its `task:`
    section read by the kind's config class (`bert_tf.tasks`), so that an
    unknown or mistyped key fails here, before any work."""
    spec = tasks.task_config_of(cfg.task)
    return tasks.get_task_class(spec.kind), spec


@dataclasses.dataclass
class FinetuneResult:
    best: dict
    test: dict
    history: list
    eval_history: list
    best_dir: GPath
    seconds: float


def run(cfg, dry_run=False, log=print, init=None, variant=None):
    """Fine-tunes as `cfg` says; returns a `FinetuneResult` (None for a
    dry run, which prints the resolved plan).

    `init` (an `Init`) overrides where the encoder starts; `variant`
    changes how the model learns while the run stays an ordinary
    fine-tuning run (`bert_tf.distill`): `variant.wrap(model)` is what
    trains and `variant.train_dataset(task, data, vocab, batch_size,
    context)` what it reads."""
    started = time.perf_counter()
    if dry_run:  # the config and strategy only; no data or weights read
        log(yaml.safe_dump(config_lib.to_dict(cfg), sort_keys=False).rstrip())
        if cfg.strategy != "tpu":
            log("strategy: " + distribute.describe(
                distribute.create_strategy(cfg.strategy)))
        return None
    init = init or resolve_init(cfg)
    cfg = resolve_precision(cfg, log, hidden_size=init.encoder.hidden_size)
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(cfg.mixed_precision)
    try:
        return _train(cfg, init, log, started, variant)
    finally:  # what the caller builds next is not in this run's policy
        keras.mixed_precision.set_global_policy(previous)


def _train(cfg, init, log, started, variant=None):
    keras.utils.set_random_seed(cfg.trainer.seed)
    vocab = read_vocab(init.vocab_path)
    checkpoints.check_vocab_size(vocab, init.encoder, init.vocab_path)
    if cfg.seq_length > init.encoder.max_position_embeddings:
        raise ValueError(
            f"seq_length = {cfg.seq_length} exceeds the encoder's "
            f"max_position_embeddings = "
            f"{init.encoder.max_position_embeddings}.")
    if cfg.freeze_layers > init.encoder.num_layers:
        raise ValueError(
            f"freeze_layers = {cfg.freeze_layers} exceeds the encoder's "
            f"{init.encoder.num_layers} layers.")
    task_cls, spec = task_of(cfg)
    data = task_cls.load_data(spec)
    task = task_cls(task_cls.make_spec(cfg, spec, data, init.encoder,
                                       vocab))
    train_size = variant.train_size(data) if variant else data.size("train")
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
    plan = (f"task {data.name} ({task.kind}): {task.describe(data)}; "
            f"encoder from {init.description} (L={init.encoder.num_layers} "
            f"H={init.encoder.hidden_size}"
            f"{f', first {cfg.freeze_layers} frozen' if cfg.freeze_layers else ''}"
            f"); {trainer_cfg.train_steps} steps "
            f"of batch {cfg.batch_size} ({steps_per_epoch} per epoch), "
            f"warm-up {optimizer_cfg.warmup_steps}, peak lr "
            f"{optimizer_cfg.learning_rate:g}")
    log(plan)
    strategy = distribute.create_strategy(cfg.strategy, tpu=cfg.tpu)

    def model_fn():
        encoder = BertEncoder.from_config_object(init.encoder)
        init.restore(encoder)
        encoder.freeze(cfg.freeze_layers)
        model = task.build_model(encoder)
        task.compile(model)
        return variant.wrap(model) if variant else model

    dynamic = cfg.dynamic_length and not cfg.trainer.jit_compile and \
        cfg.strategy != "tpu"

    def train_fn(context):
        if variant:
            return variant.train_dataset(
                task, data, vocab,
                context.get_per_replica_batch_size(cfg.batch_size), context)
        return task.train_dataset(
            data, vocab, context.get_per_replica_batch_size(cfg.batch_size),
            seed=cfg.trainer.seed, input_context=context,
            drop_remainder=cfg.strategy == "tpu", dynamic_length=dynamic)

    validation = "validation" if "validation" in data.splits else None

    def evaluate_fn(model):
        if validation is None:
            return {}
        return task.evaluate(model, data, validation, vocab,
                             cfg.eval_batch_size, dynamic_length=dynamic)

    opt_cfg, clipnorm = split_clipping(optimizer_cfg, cfg.mixed_precision)
    trainer = Trainer(
        strategy, model_fn, lambda: create_optimizer(opt_cfg), train_fn,
        trainer_cfg, global_batch_size=cfg.batch_size,
        clipnorm=clipnorm, log=log,
        evaluate_fn=evaluate_fn,
        best_metric=task.official_metric if validation else None)
    model_dir = trainer.model_dir
    if trainer.is_chief:
        model_dir.mkdir(parents=True, exist_ok=True)
        config_lib.save_config(cfg, model_dir / "finetune.yaml")
        trainer.best_dir.mkdir(parents=True, exist_ok=True)
        write_spec(trainer.best_dir, task.spec)
        vocab.save(trainer.best_dir / checkpoints.VOCAB_FILE)
    log(f"strategy: {distribute.describe(strategy)}; precision "
        f"{cfg.mixed_precision}; model dir {model_dir}")
    trainer.train()
    if validation is None:  # no dev set: the last model is the one kept
        trainer.save_best_weights()
        trainer.best = {"step": int(trainer.step.numpy())}
    if trainer.is_chief and trainer.best and trainer.best.get("results"):
        task.spec = dataclasses.replace(
            task.spec, **task.update_spec(trainer.best["results"]))
        write_spec(trainer.best_dir, task.spec)
    test = {}
    if "test" in data.splits:
        # The trained model with the best weights read back: its traced
        # evaluation is reused (a freshly loaded model would trace again).
        trainer.restore_best_weights()
        test = task.evaluate(trainer.model, data, "test", vocab,
                             cfg.eval_batch_size, dynamic_length=dynamic)
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
