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

import yaml

from bert_tf import checkpoints, config as config_lib, sources, tasks
from bert_tf.models.encoder import BertEncoder
from bert_tf.storage import GPath
from bert_tf.serving.runtime import native_logs_quiet
from bert_tf.tasks.base import SPEC_FILE, write_spec
from bert_tf.tasks.labels import head_order
from bert_tf.training import distribute, run_setup
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
    # (the init's task spec, a function returning its task model) when it
    # is a fine-tuned model (a run, an HF task checkpoint): its head goes
    # on training where the task has the same kind and labels.
    task: tuple = None


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
    init = sources.resolve(cfg.init)
    source, _, rest = init.partition(":")
    rest = str(GPath(rest).expanduser()) if rest else rest
    vocab = (GPath(sources.resolve_vocab(cfg.vocab)).expanduser()
             if cfg.vocab else None)
    if not init:
        return Init(cfg.encoder, vocab, lambda encoder: None, "random init")
    if source in checkpoints.SOURCES and rest:
        encoder_config, weights, _ = checkpoints.READERS[source](rest)
        vocab = vocab or checkpoints.find_vocab(rest)
        return Init(encoder_config, vocab,
                    lambda encoder: checkpoints.assign_weights(
                        weights, encoder, source=rest),
                    f"{source} checkpoint {rest}", _hf_task(source, rest))
    path = GPath(init).expanduser()
    if _is_run(path):
        return _run_init(path, vocab)
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


def _hf_task(source, path):
    """`Init.task` of an HF checkpoint with a task head, else None."""
    from bert_tf.tasks import hf_runs
    if source != "hf" or not hf_runs.is_task_checkpoint(path):
        return None
    task, model, _ = hf_runs.from_hf(path, log=lambda line: None)
    return task.spec, lambda: model


def _is_run(path):
    return any((d / SPEC_FILE).is_file() for d in (path, path / "best"))


def _run_init(path, vocab):
    """The `Init` of a fine-tuning run (or a converted HF task checkpoint):
    its encoder, and its head to go on training."""
    best, spec = tasks.read_spec(path)
    encoder_config = config_lib.from_dict(config_lib.EncoderConfig,
                                          spec.encoder, "encoder")
    prefix = best / checkpoints.WEIGHTS_PREFIX
    return Init(encoder_config, vocab or best / checkpoints.VOCAB_FILE,
                lambda encoder: checkpoints.restore_model(prefix, encoder),
                f"{spec.kind} run {best}",
                (spec, lambda: tasks.load_finetuned(path)[1]))


def continue_head(init, task, model, log=print):
    """Puts the head of `init` (a fine-tuned model) on `model` where its
    kind and labels are the task's; says which head trains."""
    if init.task is None:
        return
    spec, load_model = init.task
    labels = getattr(spec, "labels", None), getattr(task.spec, "labels",
                                                     None)
    # The same labels in another order keep the head, its rows reordered.
    order = head_order(*labels) if labels[0] != labels[1] else None
    if spec.kind != task.kind or (labels[0] != labels[1] and order is None):
        log(f"a new {task.kind} head: {init.description} is "
            f"{spec.kind}" + (f" with labels {labels[0]}, the data has "
                              f"{labels[1]}" if spec.kind == task.kind
                              else ""))
        return
    weights = load_model().head.get_weights()
    try:
        model.head.set_weights(weights)
    except ValueError:
        raise ValueError(
            f"init = {init.description}: its {spec.kind} head differs from "
            "this task's (set the task's fields as in its task.yaml, e.g. "
            f"pooling: {getattr(spec, 'pooling', '')}).") from None
    if order is not None:
        kernel, bias = model.head.dense.get_weights()
        model.head.dense.set_weights([kernel[..., order], bias[order]])
    log(f"the head of {init.description} goes on training "
        f"({', '.join(map(str, labels[1] or []))}"
        f"{', its outputs reordered to these labels' if order else ''})")


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


def run(cfg, dry_run=False, log=print, init=None, variant=None,
        fresh=False):
    """Fine-tunes as `cfg` says; returns a `FinetuneResult` (None for a
    dry run, which prints the resolved plan).

    A run that finished (its `best/metrics.json` exists) is not trained
    again: it says so and returns its result, unless `fresh`, which moves
    the old run aside (nothing is deleted) and starts anew. A run stopped
    part way resumes from its latest checkpoint.

    `init` (an `Init`) overrides where the encoder starts; `variant`
    changes how the model learns while the run stays an ordinary
    fine-tuning run (`bert_tf.distill`): `variant.wrap(model)` is what
    trains and `variant.train_dataset(task, data, vocab, batch_size,
    context)` what it reads."""
    started = time.perf_counter()
    if dry_run:  # the config and strategy only; no data or weights read
        run_setup.show_dry_run(cfg, log)
        return None
    finished = already_finished(cfg, fresh, log)
    if finished is not None:
        return finished
    init = init or resolve_init(cfg)
    with run_setup.run_policy(cfg, init.encoder.hidden_size, log) as cfg:
        vocab = run_setup.checked_vocab(init.vocab_path, init.encoder)
        _check_init(cfg, init)
        task_cls, spec = task_of(cfg)
        data = task_cls.load_data(spec)
        task = task_cls(task_cls.make_spec(cfg, spec, data, init.encoder,
                                           vocab))
        data = _in_run_order(data, task.spec)
        run = _Run(cfg, init, task, data, vocab, variant, log)
        trainer = run.trainer()
        run_setup.write_run_files(trainer, {
            trainer.model_dir / "finetune.yaml":
                lambda path: config_lib.save_config(cfg, path),
            trainer.best_dir / SPEC_FILE:
                lambda path: write_spec(path.parent, task.spec),
            trainer.best_dir / checkpoints.VOCAB_FILE: vocab.save})
        run_setup.log_start(trainer, cfg, log)
        trainer.train()
        return run.finish(trainer, started)


def _in_run_order(data, spec):
    """`data` whose label ids follow the run's labels (`task.labels` as
    configured, `labels.honoured`), matched by name."""
    run_labels = getattr(spec, "labels", None)
    if not run_labels or tuple(getattr(data, "labels", None) or ()) in (
            (), tuple(run_labels)):
        return data
    return data.relabeled(run_labels, [list(run_labels).index(label)
                                       for label in data.labels])


def already_finished(cfg, fresh=False, log=print):
    """The result of `cfg`'s run if it finished (said in one line), else
    None; with `fresh`, an existing run directory is moved aside first."""
    model_dir = GPath(cfg.trainer.model_dir)
    if fresh:
        run_setup.move_aside(model_dir, log)
        return None
    finished = finished_result(model_dir, cfg)
    if finished is not None:
        log(f"{model_dir} is a finished run (best at step "
            f"{finished.best.get('step', '?')}; "
            f"{finished.best_dir / 'metrics.json'}): nothing to train. "
            f"Export it with `bert-tf export --run {model_dir}`, or train "
            "it again with --fresh (the old run is moved aside).")
    return finished


def finished_result(model_dir, cfg):
    """The `FinetuneResult` of `cfg`'s run in `model_dir` if it finished
    with this same config (its `finetune.yaml` and `best/metrics.json`),
    else None: a changed config (more steps, say) continues the run."""
    metrics = GPath(model_dir) / "best" / "metrics.json"
    saved_config = GPath(model_dir) / "finetune.yaml"
    if not (metrics.is_file() and saved_config.is_file()):
        return None
    now = yaml.safe_load(yaml.safe_dump(config_lib.to_dict(cfg)))
    saved = yaml.safe_load(saved_config.read_text()) or {}
    if now.get("mixed_precision") == "auto":  # the run saved its choice
        saved.pop("mixed_precision", None)
        now.pop("mixed_precision")
    if saved != now:
        return None
    saved = json.loads(metrics.read_text())
    return FinetuneResult(saved.get("best") or {}, saved.get("test") or {},
                          [], [], metrics.parent, 0.0)


def _check_init(cfg, init):
    if cfg.seq_length > init.encoder.max_position_embeddings:
        raise ValueError(
            f"seq_length = {cfg.seq_length} exceeds the encoder's "
            f"max_position_embeddings = "
            f"{init.encoder.max_position_embeddings}.")
    if cfg.freeze_layers > init.encoder.num_layers:
        raise ValueError(
            f"freeze_layers = {cfg.freeze_layers} exceeds the encoder's "
            f"{init.encoder.num_layers} layers.")


def schedule(cfg, steps_per_epoch):
    """(trainer config, optimizer config) of a run: with `epochs`, the
    steps, evaluations, checkpoints, decay and warm-up follow the epochs.

    Examples:
        >>> from bert_tf.config import EncoderConfig, FinetuneConfig
        >>> cfg = FinetuneConfig(encoder=EncoderConfig.from_name(
        ...     "bert_tiny"), epochs=2, warmup_share=0.1)
        >>> trainer, optimizer = schedule(cfg, steps_per_epoch=50)
        >>> trainer.train_steps, trainer.eval_every, optimizer.warmup_steps
        (100, 50, 10)
    """
    trainer_cfg, optimizer_cfg = cfg.trainer, cfg.optimizer
    if not cfg.epochs:
        return trainer_cfg, optimizer_cfg
    steps = max(1, math.ceil(cfg.epochs * steps_per_epoch))
    trainer_cfg = dataclasses.replace(
        trainer_cfg, train_steps=steps, eval_every=steps_per_epoch,
        checkpoint_every=min(trainer_cfg.checkpoint_every, steps_per_epoch))
    optimizer_cfg = dataclasses.replace(
        optimizer_cfg, decay_steps=steps,
        warmup_steps=int(round(cfg.warmup_share * steps)))
    return trainer_cfg, optimizer_cfg


class _Run:
    """One fine-tuning run's pieces: its trainer (model, data, schedule)
    and what follows training (the spec's decided keys, the test split,
    metrics.json)."""

    def __init__(self, cfg, init, task, data, vocab, variant, log):
        self.cfg, self.init, self.task, self.data = cfg, init, task, data
        self.vocab, self.variant, self.log = vocab, variant, log
        self.dynamic = cfg.dynamic_length and not cfg.trainer.jit_compile \
            and cfg.strategy != "tpu"
        self.validation = ("validation" if "validation" in data.splits
                           else None)

    def plan(self, trainer_cfg, optimizer_cfg, steps_per_epoch):
        cfg, init, frozen = self.cfg, self.init, self.cfg.freeze_layers
        return (f"task {self.data.name} ({self.task.kind}): "
                f"{self.task.describe(self.data)}; encoder from "
                f"{init.description} (L={init.encoder.num_layers} "
                f"H={init.encoder.hidden_size}"
                f"{f', first {frozen} frozen' if frozen else ''}); "
                f"{trainer_cfg.train_steps} steps of batch {cfg.batch_size} "
                f"({steps_per_epoch} per epoch), warm-up "
                f"{optimizer_cfg.warmup_steps}, peak lr "
                f"{optimizer_cfg.learning_rate:g}")

    def model(self):
        encoder = BertEncoder.from_config_object(self.init.encoder)
        self.init.restore(encoder)
        encoder.freeze(self.cfg.freeze_layers)
        model = self.task.build_model(encoder)
        continue_head(self.init, self.task, model, self.log)
        self.task.compile(model)
        return self.variant.wrap(model) if self.variant else model

    def train_dataset(self, context):
        cfg, batch_size = self.cfg, context.get_per_replica_batch_size(
            self.cfg.batch_size)
        if self.variant:
            return self.variant.train_dataset(self.task, self.data,
                                              self.vocab, batch_size, context)
        return self.task.train_dataset(
            self.data, self.vocab, batch_size, seed=cfg.trainer.seed,
            input_context=context, drop_remainder=cfg.strategy == "tpu",
            dynamic_length=self.dynamic)

    def evaluate(self, model, split=None):
        split = split or self.validation
        if split is None:
            return {}
        # Evaluation runs the serving graphs, whose first calls print C++
        # cost-estimate lines that say nothing to the user.
        with native_logs_quiet():
            return self.task.evaluate(model, self.data, split, self.vocab,
                                      self.cfg.eval_batch_size,
                                      dynamic_length=self.dynamic)

    def trainer(self):
        cfg = self.cfg
        train_size = (self.variant.train_size(self.data) if self.variant
                      else self.data.size("train"))
        steps_per_epoch = max(1, math.ceil(train_size / cfg.batch_size))
        trainer_cfg, optimizer_cfg = schedule(cfg, steps_per_epoch)
        self.log(self.plan(trainer_cfg, optimizer_cfg, steps_per_epoch))
        strategy = distribute.create_strategy(cfg.strategy, tpu=cfg.tpu)
        opt_cfg, clipnorm = split_clipping(optimizer_cfg, cfg.mixed_precision)
        return Trainer(
            strategy, self.model, lambda: create_optimizer(opt_cfg),
            self.train_dataset, trainer_cfg, global_batch_size=cfg.batch_size,
            clipnorm=clipnorm, log=self.log, evaluate_fn=self.evaluate,
            best_metric=self.task.official_metric if self.validation
            else None)

    def finish(self, trainer, started):
        """The spec's keys decided by the best evaluation, the test split
        on the best weights, metrics.json; the run's `FinetuneResult`."""
        task, log = self.task, self.log
        if self.validation is None:  # no dev set: the last model is kept
            trainer.save_best_weights()
            trainer.best = {"step": int(trainer.step.numpy())}
        if trainer.is_chief and trainer.best and trainer.best.get("results"):
            task.spec = dataclasses.replace(
                task.spec, **task.update_spec(trainer.best["results"]))
            write_spec(trainer.best_dir, task.spec)
        test = {}
        if "test" in self.data.splits:
            # The trained model with the best weights read back: its traced
            # evaluation is reused (a freshly loaded model would trace
            # again).
            trainer.restore_best_weights()
            test = self.evaluate(trainer.model, "test")
            if test:
                log("test (best checkpoint): " + ", ".join(
                    f"{k} {v:.4f}" for k, v in test.items()))
        seconds = time.perf_counter() - started
        if trainer.is_chief:
            (trainer.best_dir / "metrics.json").write_text(json.dumps(
                {"best": trainer.best, "test": test, "seconds": seconds},
                indent=2) + "\n")
        model_dir = trainer.model_dir
        log(f"best model (for `bert-tf export --run {model_dir}`) "
            f"in {trainer.best_dir}; checkpoints in "
            f"{model_dir / 'checkpoints'}; TensorBoard logs in "
            f"{model_dir / 'tensorboard'}")
        return FinetuneResult(trainer.best or {}, test, trainer.history,
                              trainer.eval_history, trainer.best_dir,
                              seconds)
