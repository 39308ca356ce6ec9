"""The configs of a model's size: `EncoderConfig` (what a `BertEncoder` is
built from, checked against ceilings before anything is built),
`WeightsConfig` (where a preset's weights come from) and `ModelConfig` (a
file of `configs/models/`), and how config files and presets are read.
Read them through `bert_tf.config`."""

import dataclasses
from pathlib import Path

from bert_tf import presets
from bert_tf.config_io import (apply_overrides, check_ceilings,
                               check_choice as _check_choice, check_types,
                               check_values, from_dict, join_key as _join,
                               read_yaml)

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
    return load_model_preset(name, overrides).encoder


def load_model_preset(name, overrides=()):
    """The validated `ModelConfig` of preset `name` (its size and, if it
    has them, where its weights come from)."""
    path = Path(name) if str(name).endswith((".yaml", ".yml")) else \
        presets.preset_path(name)
    return load_config(path, ModelConfig, overrides)
