"""Configs: plain dataclasses, YAML loading, dotted overrides and validation.

Every config file is read with `yaml.safe_load`, turned into dataclasses by
`from_dict` (an unknown key is an error that lists the valid ones), then
checked by each dataclass's `validate()`. Overrides use dotted paths, as on
the command line: `--set encoder.num_layers=4`.
"""

import dataclasses
import typing
from pathlib import Path

from bert_tf import presets
# save_config and to_dict are re-exported: bert_tf.config is the API.
from bert_tf.config_io import (  # noqa: F401
    apply_overrides, check_ceilings, check_choice as _check_choice,
    check_types, check_values, from_dict,
    join_key as _join, read_yaml, save_config, to_dict)

HIDDEN_ACTIVATIONS = ("gelu", "gelu_exact", "relu")
ATTENTION_KINDS = ("bidirectional", "causal")


# The largest encoder sizes built: far past any BERT-family checkpoint
# (BERT-Large: 24 x 1024, 4096 inner, 512 positions; multilingual
# vocabularies reach 250,000), and low enough that a crafted config.json
# is refused before anything is built.
ENCODER_CEILINGS = {"vocab_size": 1_000_000, "hidden_size": 16_384,
                    "num_layers": 256, "num_heads": 1_024,
                    "intermediate_size": 65_536,
                    "max_position_embeddings": 131_072,
                    "type_vocab_size": 1_024, "embedding_size": 16_384}
# 40 GB of float32 weights: more than a 24 GB machine holds.
MAX_PARAMETERS = 10_000_000_000


@dataclasses.dataclass
class EncoderConfig:
    """Size and behaviour of a BERT encoder.

    Args:
        vocab_size: number of WordPiece ids (rows of the token embedding).
        hidden_size: H, the width of every layer.
        num_layers: L, the number of transformer blocks.
        num_heads: A, attention heads; must divide `hidden_size`.
        intermediate_size: feed-forward width (4H in the paper).
        max_position_embeddings: longest sequence the model accepts.
        type_vocab_size: number of segment ids (2: A and B; 0: no segment
            embedding, as DistilBERT: `input_type_ids` is then ignored).
        hidden_act: `gelu` (tanh approximation, as the original BERT),
            `gelu_exact` (erf, as HF transformers) or `relu`.
        hidden_dropout: dropout on embeddings and sub-layer outputs.
        attention_dropout: dropout on attention probabilities.
        initializer_range: stddev of the truncated-normal initializer.
        layer_norm_eps: LayerNorm epsilon.
        attention: `bidirectional` (BERT) or `causal` (the paper's LTR
            ablation).
        embedding_size: width of the token, segment and position
            embeddings when it differs from `hidden_size` (ELECTRA-Small:
            128), projected to `hidden_size` by a dense layer; 0: the same.

    Examples:
        >>> cfg = EncoderConfig(hidden_size=128, num_layers=2, num_heads=2,
        ...                     intermediate_size=512)
        >>> cfg.validate().num_layers
        2
    """

    vocab_size: int = 30522
    hidden_size: int = 768
    num_layers: int = 12
    num_heads: int = 12
    intermediate_size: int = 3072
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    hidden_act: str = "gelu"
    hidden_dropout: float = 0.1
    attention_dropout: float = 0.1
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    attention: str = "bidirectional"
    embedding_size: int = 0

    @classmethod
    def from_name(cls, name):
        """The preset `name` (a string where an encoder section goes)."""
        return load_preset(name)

    def validate(self, where="encoder"):
        check_types(self, where)
        check_ceilings(self, where, ENCODER_CEILINGS)
        check_values(self, where, (
            "vocab_size", "hidden_size", "num_layers", "num_heads",
            "intermediate_size", "max_position_embeddings",
            "initializer_range", "layer_norm_eps"), "> 0")
        check_values(self, where, ("type_vocab_size", "embedding_size"),
                     ">= 0")
        check_values(self, where, ("hidden_dropout", "attention_dropout"),
                     "in [0, 1)")
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"{where}.hidden_size = {self.hidden_size} is not divisible "
                f"by {where}.num_heads = {self.num_heads}: every head gets "
                "hidden_size / num_heads dimensions.")
        _check_choice(f"{where}.hidden_act", self.hidden_act,
                      HIDDEN_ACTIVATIONS)
        _check_choice(f"{where}.attention", self.attention, ATTENTION_KINDS)
        if self.num_parameters() > MAX_PARAMETERS:
            raise ValueError(
                f"{where}: {self.num_parameters():,} parameters, over the "
                f"ceiling of {MAX_PARAMETERS:,} this library builds.")
        return self

    def num_parameters(self, pooler=True):
        """Parameter count of the encoder this config builds.

        Examples:
            >>> EncoderConfig().num_parameters()
            109482240
        """
        h, i = self.hidden_size, self.intermediate_size
        e = self.embedding_size or h
        embeddings = ((self.vocab_size + self.max_position_embeddings +
                       self.type_vocab_size) * e + 2 * e +
                      (e * h + h if e != h else 0))
        block = 4 * (h * h + h) + 2 * h * i + i + h + 4 * h
        return embeddings + self.num_layers * block + (h * h + h if pooler
                                                       else 0)


FAMILIES = ("bert", "electra", "distilbert")


@dataclasses.dataclass
class WeightsConfig:
    """Where a preset's pre-trained weights come from.

    Args:
        source: a name `bert_tf.sources.resolve` reads (`hf://ORG/NAME`);
            "" for a size without weights.
        family: `bert`, `electra` (the discriminator) or `distilbert`.
        lower_case: the tokenizer lower-cases (and strips accents); the
            vocab says the same (`Vocab.is_cased`).
        languages: what it was pre-trained on, for the docs.
        description: one line for `bert-tf presets` and the docs.
    """

    source: str = ""
    family: str = "bert"
    lower_case: bool = True
    languages: str = "English"
    description: str = ""

    def validate(self, where="weights"):
        _check_choice(f"{where}.family", self.family, FAMILIES)
        return self


@dataclasses.dataclass
class ModelConfig:
    """A model file in `configs/models/`: the encoder's size and, for a
    preset with pre-trained weights, where they come from."""

    encoder: EncoderConfig = dataclasses.field(default_factory=EncoderConfig)
    weights: WeightsConfig = dataclasses.field(default_factory=WeightsConfig)

    def validate(self, where=""):
        self.encoder.validate(_join(where, "encoder"))
        self.weights.validate(_join(where, "weights"))
        return self


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


def load_config(path, cls=ModelConfig, overrides=()):
    """Reads a YAML file into dataclass `cls`, applies overrides, validates.

    Args:
        path: the YAML file.
        cls: the dataclass its top level describes.
        overrides: `key.path=value` strings applied before validation.

    Examples:
        >>> from bert_tf import presets
        >>> cfg = load_config(presets.preset_path("bert_tiny"),
        ...                   overrides=["encoder.num_layers=4"])
        >>> cfg.encoder.num_layers
        4
    """
    data = apply_overrides(read_yaml(path), overrides)
    try:
        return from_dict(cls, data).validate()
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None


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


def load_preset(name, overrides=()):
    """The validated `EncoderConfig` of preset `name`.

    Args:
        name: a preset name (see `presets.available()`) or a path to a
            model YAML.
        overrides: `encoder.key=value` strings.

    Examples:
        >>> load_preset("bert_tiny").hidden_size
        128
    """
    path = Path(name) if str(name).endswith((".yaml", ".yml")) else \
        presets.preset_path(name)
    return load_model_preset(name, overrides).encoder


def load_model_preset(name, overrides=()):
    """The validated `ModelConfig` of preset `name` (its size and, if it
    has them, where its weights come from)."""
    path = Path(name) if str(name).endswith((".yaml", ".yml")) else \
        presets.preset_path(name)
    return load_config(path, ModelConfig, overrides)
