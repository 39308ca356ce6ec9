"""Configs: plain dataclasses, YAML loading, dotted overrides and validation.

Every config file is read with `yaml.safe_load`, turned into dataclasses by
`from_dict` (an unknown key is an error that lists the valid ones), then
checked by each dataclass's `validate()`. Overrides use dotted paths, as on
the command line: `--set encoder.num_layers=4`.
"""

import dataclasses
import typing
from pathlib import Path

import yaml

HIDDEN_ACTIVATIONS = ("gelu", "gelu_exact", "relu")
ATTENTION_KINDS = ("bidirectional", "causal")


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
        type_vocab_size: number of segment ids (2: A and B).
        hidden_act: `gelu` (tanh approximation, as the original BERT),
            `gelu_exact` (erf, as HF transformers) or `relu`.
        hidden_dropout: dropout on embeddings and sub-layer outputs.
        attention_dropout: dropout on attention probabilities.
        initializer_range: stddev of the truncated-normal initializer.
        layer_norm_eps: LayerNorm epsilon.
        attention: `bidirectional` (BERT) or `causal` (the paper's LTR
            ablation).

    Example:
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

    def validate(self, where="encoder"):
        for key in ("vocab_size", "hidden_size", "num_layers", "num_heads",
                    "intermediate_size", "max_position_embeddings",
                    "type_vocab_size"):
            if getattr(self, key) <= 0:
                raise ValueError(
                    f"{where}.{key} = {getattr(self, key)}: sizes must be "
                    "positive integers.")
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"{where}.hidden_size = {self.hidden_size} is not divisible "
                f"by {where}.num_heads = {self.num_heads}: every head gets "
                "hidden_size / num_heads dimensions.")
        for key in ("hidden_dropout", "attention_dropout"):
            if not 0.0 <= getattr(self, key) < 1.0:
                raise ValueError(
                    f"{where}.{key} = {getattr(self, key)}: a dropout rate "
                    "must be in [0, 1).")
        for key in ("initializer_range", "layer_norm_eps"):
            if getattr(self, key) <= 0:
                raise ValueError(
                    f"{where}.{key} = {getattr(self, key)}: must be > 0.")
        _check_choice(f"{where}.hidden_act", self.hidden_act,
                      HIDDEN_ACTIVATIONS)
        _check_choice(f"{where}.attention", self.attention, ATTENTION_KINDS)
        return self

    def num_parameters(self, pooler=True):
        """Parameter count of the encoder this config builds.

        Example:
        >>> EncoderConfig().num_parameters()
        109482240
        """
        h, i = self.hidden_size, self.intermediate_size
        embeddings = ((self.vocab_size + self.max_position_embeddings +
                       self.type_vocab_size) * h + 2 * h)
        block = 4 * (h * h + h) + 2 * h * i + i + h + 4 * h
        return embeddings + self.num_layers * block + (h * h + h if pooler
                                                       else 0)


@dataclasses.dataclass
class ModelConfig:
    """A model file in `configs/models/`: for now just the encoder."""

    encoder: EncoderConfig = dataclasses.field(default_factory=EncoderConfig)

    def validate(self, where=""):
        self.encoder.validate(_join(where, "encoder"))
        return self


def _check_choice(key, value, choices):
    if value not in choices:
        raise ValueError(
            f"{key} = {value!r}: must be one of {', '.join(choices)}.")


def _join(prefix, key):
    return f"{prefix}.{key}" if prefix else key


def _coerce(value, kind, key):
    """Checks one scalar against its annotated type (ints are valid floats)."""
    if kind is float and isinstance(value, int) and not isinstance(
            value, bool):
        return float(value)
    if kind is float and isinstance(value, str):
        try:  # YAML 1.1 reads `1e-12` (no dot) as a string.
            return float(value)
        except ValueError:
            pass
    if kind in (int, float, str, bool):
        if isinstance(value, kind) and not (kind is int and
                                            isinstance(value, bool)):
            return value
        raise ValueError(
            f"{key} = {value!r}: expected {kind.__name__}, got "
            f"{type(value).__name__}.")
    return value


def from_dict(cls, data, where=""):
    """Builds dataclass `cls` from a mapping, rejecting unknown keys.

    A string where a nested config is expected is read as a preset name (for
    encoders) so that `encoder: bert_tiny` works in any config file.

    Args:
        cls: the dataclass type to build.
        data: a mapping (e.g. from `yaml.safe_load`) or None for defaults.
        where: dotted path of `data` inside the whole config, for messages.

    Example:
    >>> from_dict(EncoderConfig, {"num_layers": 2}).num_layers
    2
    """
    if data is None:
        data = {}
    if isinstance(data, str) and cls is EncoderConfig:
        from bert_tf import presets
        return presets.load_preset(data)
    if not isinstance(data, dict):
        raise ValueError(
            f"{where or 'config'}: expected a mapping of keys to values, got "
            f"{type(data).__name__} {data!r}.")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = [k for k in data if k not in names]
    if unknown:
        raise ValueError(
            f"Unknown config key {_join(where, str(unknown[0]))!r}; valid "
            f"keys{' under ' + repr(where) if where else ''}: "
            f"{', '.join(names)}.")
    kwargs = {}
    for key, value in data.items():
        kind = hints[key]
        path = _join(where, key)
        if dataclasses.is_dataclass(kind):
            kwargs[key] = from_dict(kind, value, path)
        else:
            kwargs[key] = _coerce(value, kind, path)
    return cls(**kwargs)


def apply_overrides(data, overrides):
    """Applies `a.b.c=value` strings to a nested dict (values parsed as YAML).

    Example:
    >>> apply_overrides({"encoder": {"num_layers": 2}},
    ...                 ["encoder.num_layers=4"])
    {'encoder': {'num_layers': 4}}
    """
    data = dict(data or {})
    for item in overrides or ():
        if "=" not in item:
            raise ValueError(
                f"Override {item!r} must look like key.path=value, e.g. "
                "encoder.num_layers=4.")
        path, raw = item.split("=", 1)
        keys = path.strip().split(".")
        node = data
        for i, key in enumerate(keys[:-1]):
            child = node.get(key)
            if child is None or isinstance(child, str):
                child = {}
            elif not isinstance(child, dict):
                raise ValueError(
                    f"Override {item!r}: {'.'.join(keys[:i + 1])} is a value, "
                    "not a section.")
            node[key] = dict(child)
            node = node[key]
        node[keys[-1]] = yaml.safe_load(raw)
    return data


def read_yaml(path):
    """Reads a YAML mapping, with errors that name the file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Config file {path} does not exist.")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise ValueError(f"Config file {path} is not valid YAML: {e}") from e
    if data is not None and not isinstance(data, dict):
        raise ValueError(
            f"Config file {path} must hold a mapping at the top level.")
    return data or {}


def load_config(path, cls=ModelConfig, overrides=()):
    """Reads a YAML file into dataclass `cls`, applies overrides, validates.

    Args:
        path: the YAML file.
        cls: the dataclass its top level describes.
        overrides: `key.path=value` strings applied before validation.

    Example:
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


def to_dict(config):
    """A config as plain nested dicts (for YAML output)."""
    return dataclasses.asdict(config)


def save_config(config, path):
    """Writes a config as YAML that `load_config` reads back."""
    Path(path).write_text(yaml.safe_dump(to_dict(config), sort_keys=False),
                          encoding="utf-8")
    return path
