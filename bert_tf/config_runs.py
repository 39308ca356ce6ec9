"""The configs of runs: `PretrainConfig` and `FinetuneConfig`, with the
sections they share (`OptimizerConfig`, `TrainerConfig`) and pre-training's
`DataConfig`. Read them through `bert_tf.config`."""

import dataclasses
import typing

from bert_tf.config_io import (check_choice as _check_choice, check_values,
                               join_key as _join)

from bert_tf.config_model import EncoderConfig


OPTIMIZERS = ("adamw", "lamb")
STRATEGIES = ("default", "one_device", "mirrored", "multi_worker_mirrored",
              "tpu")
PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16", "auto")


@dataclasses.dataclass
class OptimizerConfig:
    """How to optimize.

    Args:
        name: `adamw` or `lamb`.
        learning_rate: peak learning rate (reached after warm-up).
        warmup_steps: linear warm-up from 0.
        decay_steps: total steps; the rate decays to `end_learning_rate`
            at this step (0: no decay after warm-up).
        end_learning_rate: final rate.
        power: decay exponent (1.0 = linear).
        weight_decay: decoupled weight decay (not on LayerNorm / bias).
        beta_1, beta_2, epsilon: Adam moments.
        clipnorm: global-norm gradient clipping (0: off).
        gradient_accumulation_steps: apply once every k micro-batches
            (1: every step).
    """

    name: str = "adamw"
    learning_rate: float = 1e-4
    warmup_steps: int = 10_000
    decay_steps: int = 1_000_000
    end_learning_rate: float = 0.0
    power: float = 1.0
    weight_decay: float = 0.01
    beta_1: float = 0.9
    beta_2: float = 0.999
    epsilon: float = 1e-6
    clipnorm: float = 1.0
    gradient_accumulation_steps: int = 1

    def validate(self, where="optimizer"):
        _check_choice(f"{where}.name", self.name, OPTIMIZERS)
        check_values(self, where, ("learning_rate",), "> 0")
        check_values(self, where, ("warmup_steps", "decay_steps",
                                   "weight_decay", "clipnorm",
                                   "end_learning_rate"), ">= 0")
        if self.decay_steps and self.decay_steps < self.warmup_steps:
            raise ValueError(
                f"{where}.decay_steps = {self.decay_steps} is shorter than "
                f"{where}.warmup_steps = {self.warmup_steps}.")
        check_values(self, where, ("gradient_accumulation_steps",), ">= 1")
        return self


@dataclasses.dataclass
class TrainerConfig:
    """The loop.

    Args:
        model_dir: checkpoints and TensorBoard logs go here.
        train_steps: total optimizer steps.
        steps_per_loop: steps per `tf.function` call (and log line).
        checkpoint_every: steps between checkpoints (also written at the
            end).
        keep_checkpoints: how many to keep.
        eval_every: steps between evaluations (0: only at the end).
        eval_steps: batches per evaluation.
        jit_compile: compile the train step with XLA.
        seed: initialization and dropout seed.
    """

    model_dir: str = "runs/pretrain"
    train_steps: int = 1000
    steps_per_loop: int = 100
    checkpoint_every: int = 1000
    keep_checkpoints: int = 3
    eval_every: int = 0
    eval_steps: int = 20
    jit_compile: bool = False
    seed: int = 0

    def validate(self, where="trainer"):
        check_values(self, where, ("train_steps", "steps_per_loop",
                                   "checkpoint_every", "keep_checkpoints",
                                   "eval_steps"), "> 0")
        check_values(self, where, ("eval_every",), ">= 0")
        return self


@dataclasses.dataclass
class DataConfig:
    """The pre-training input pipeline (see `pretraining_dataset`).

    Args:
        train_files: shard directory or glob (from `bert-tf pairs`);
            several separated by commas.
        eval_files: held-out shards ("" : no evaluation).
        vocab: vocab.txt.
        seq_length: packed length.
        max_predictions_per_seq: masked-LM slots per sequence.
        masking_rate: share of maskable tokens predicted.
        whole_word_masking: mask whole words.
        global_batch_size: examples per step over all replicas.
        shuffle_buffer: examples in the shuffle buffer.
        seed: reproducible order and masks (not under `service`).
        service: a tf.data service dispatcher, `HOST:PORT` (see
            `bert-tf data-service`): its workers build the training
            batches; "" : this host builds them.
    """

    train_files: str = ""
    eval_files: str = ""
    vocab: str = ""
    seq_length: int = 128
    max_predictions_per_seq: int = 20
    masking_rate: float = 0.15
    whole_word_masking: bool = False
    global_batch_size: int = 256
    shuffle_buffer: int = 10_000
    seed: int = 0
    service: str = ""

    def validate(self, where="data"):
        for key in ("train_files", "vocab"):
            if not getattr(self, key):
                raise ValueError(f"{where}.{key} is required.")
        check_values(self, where, ("seq_length", "max_predictions_per_seq",
                                   "global_batch_size", "shuffle_buffer"),
                     "> 0")
        if self.max_predictions_per_seq > self.seq_length:
            raise ValueError(
                f"{where}.max_predictions_per_seq = "
                f"{self.max_predictions_per_seq} exceeds {where}.seq_length "
                f"= {self.seq_length}.")
        check_values(self, where, ("masking_rate",), "in (0, 1)")
        return self


@dataclasses.dataclass
class PretrainConfig:
    """A whole pre-training run (`configs/pretrain/*.yaml`).

    Args:
        encoder: an `EncoderConfig` or a preset name.
        nsp: train next-sentence prediction (False: "No NSP").
        init_checkpoint: start from this checkpoint directory (e.g. the
            seq-128 phase of the two-phase schedule), or a name
            (`bert_base_uncased`, `hf://ORG/NAME`: continued pre-training,
            the checkpoint's config replacing `encoder`); "" : random init.
        strategy: `default`, `one_device`, `mirrored`,
            `multi_worker_mirrored` or `tpu`.
        tpu: TPU name/address for `strategy: tpu`.
        mixed_precision: `float32`, `mixed_bfloat16`, `mixed_float16` or
            `auto` (`mixed_bfloat16` on a TPU, an Ampere or later GPU or a
            CPU with AVX512_BF16 or AMX, `float32` elsewhere; the choice is
            logged).
    """

    encoder: EncoderConfig = dataclasses.field(default_factory=EncoderConfig)
    nsp: bool = True
    init_checkpoint: str = ""
    strategy: str = "default"
    tpu: str = ""
    mixed_precision: str = "float32"
    data: DataConfig = dataclasses.field(default_factory=DataConfig)
    optimizer: OptimizerConfig = dataclasses.field(
        default_factory=OptimizerConfig)
    trainer: TrainerConfig = dataclasses.field(default_factory=TrainerConfig)

    def validate(self, where=""):
        self.encoder.validate(_join(where, "encoder"))
        self.data.validate(_join(where, "data"))
        _validate_run(self, where)
        if self.data.seq_length > self.encoder.max_position_embeddings:
            raise ValueError(
                f"data.seq_length = {self.data.seq_length} exceeds "
                "encoder.max_position_embeddings = "
                f"{self.encoder.max_position_embeddings}.")
        return self


def _validate_run(cfg, where):
    """What pre-training and fine-tuning configs share: optimizer, trainer,
    strategy and precision."""
    cfg.optimizer.validate(_join(where, "optimizer"))
    cfg.trainer.validate(_join(where, "trainer"))
    _check_choice(_join(where, "strategy"), cfg.strategy, STRATEGIES)
    _check_choice(_join(where, "mixed_precision"), cfg.mixed_precision,
                  PRECISIONS)


@dataclasses.dataclass
class FinetuneConfig:
    """A fine-tuning run (`configs/finetune/*.yaml`).

    Args:
        task: the `task:` section: its `kind` (a folder of
            `bert_tf/tasks/`, default `classification`) and that kind's
            keys; the kind's typed config reads and checks it
            (`bert_tf.tasks.task_config_of`).
        init: where the encoder starts: "" (random init from `encoder`), a
            name (a preset with weights such as `bert_base_uncased`,
            `hf://ORG/NAME[@REVISION]`, or `sample:minilm` /
            `sample:antiberty`: `bert_tf.sources`), a bert_tf directory
            (from `bert-tf convert`, a pre-training run's model_dir, or a
            checkpoint prefix), or `hf:PATH`, `tf1:PATH`, `garden:PATH` to
            import a foreign checkpoint directly.
        encoder: the encoder for random init (taken from the checkpoint
            otherwise).
        vocab: vocab.txt ("" : the one beside the checkpoint;
            `sample:minilm`: that sample's).
        seq_length: packed input length (longer inputs are truncated).
        head_dropout: dropout before the task head's output layer
            (`dropout` before 0.2, still read with a warning).
        freeze_layers: train neither the embeddings nor the first N
            transformer blocks (0: fine-tune everything, as the paper).
        batch_size: global training batch size.
        eval_batch_size: batch size of evaluation.
        epochs: passes over the training data; sets `trainer.train_steps`,
            evaluation once per epoch, and the learning-rate schedule (0:
            use `trainer.train_steps` and `optimizer` as written).
        warmup_share: share of the steps spent warming up (with `epochs`).
        dynamic_length: batch texts of similar length and cut padding
            (off under `trainer.jit_compile` and on TPUs).
        strategy, tpu, mixed_precision: as in `PretrainConfig`.
    """

    # Old key -> new key; the old one is still read, with a warning.
    RENAMED_KEYS: typing.ClassVar[dict] = {"dropout": "head_dropout",
                                           "pooling": "task.pooling"}

    task: dict = dataclasses.field(default_factory=dict)
    init: str = ""
    encoder: EncoderConfig = dataclasses.field(default_factory=EncoderConfig)
    vocab: str = ""
    seq_length: int = 128
    head_dropout: float = 0.1
    freeze_layers: int = 0
    batch_size: int = 32
    eval_batch_size: int = 64
    epochs: float = 3.0
    warmup_share: float = 0.1
    dynamic_length: bool = True
    strategy: str = "default"
    tpu: str = ""
    mixed_precision: str = "float32"
    optimizer: OptimizerConfig = dataclasses.field(
        default_factory=lambda: OptimizerConfig(
            learning_rate=2e-5, warmup_steps=0, decay_steps=0))
    trainer: TrainerConfig = dataclasses.field(
        default_factory=lambda: TrainerConfig(model_dir="runs/finetune"))

    def validate(self, where=""):
        if not isinstance(self.task, dict):
            raise ValueError(f"{_join(where, 'task')}: expected a mapping of "
                             f"keys to values, got {self.task!r}.")
        self.encoder.validate(_join(where, "encoder"))
        _validate_run(self, where)
        check_values(self, where, ("seq_length", "batch_size",
                                   "eval_batch_size"), "> 0")
        if self.seq_length < 3:
            raise ValueError(f"{_join(where, 'seq_length')} = "
                             f"{self.seq_length}: must be >= 3.")
        if self.epochs < 0 or not 0 <= self.warmup_share < 1:
            raise ValueError(
                f"{_join(where, 'epochs')} must be >= 0 and "
                f"{_join(where, 'warmup_share')} in [0, 1).")
        check_values(self, where, ("head_dropout",), "in [0, 1)")
        check_values(self, where, ("freeze_layers",), ">= 0")
        if not self.init and not self.vocab:
            raise ValueError(
                f"{_join(where, 'vocab')} is required when training from "
                "random init (init is empty).")
        return self
