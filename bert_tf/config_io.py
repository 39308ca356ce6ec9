"""Reading configs: YAML files and `key=value` overrides into dataclasses,
with errors that name the key and the rule; and writing them back."""

import dataclasses
import typing
import warnings

import yaml

from bert_tf.storage import GPath

# The files of a bert_tf model directory (what `bert-tf convert` and
# pre-training write, fine-tuning's best model adds task.yaml).
CONFIG_FILE = "config.yaml"
VOCAB_FILE = "vocab.txt"
WEIGHTS_PREFIX = "model.ckpt"
# The foreign checkpoint formats (`init: <source>:PATH`, `bert-tf convert
# --from`); bert_tf.checkpoints has one reader per source.
CHECKPOINT_SOURCES = ("hf", "tf1", "garden")


def check_choice(key, value, choices):
    """Raises a ValueError naming `key` unless `value` is in `choices`."""
    if value not in choices:
        raise ValueError(
            f"{key} = {value!r}: must be one of {', '.join(choices)}.")


# The numeric rules `check_values` knows, by the words its errors use.
VALUE_RULES = {
    "> 0": lambda v: v > 0,
    ">= 0": lambda v: v >= 0,
    ">= 1": lambda v: v >= 1,
    "in [0, 1)": lambda v: 0 <= v < 1,
    "in (0, 1)": lambda v: 0 < v < 1,
}


def check_values(cfg, where, keys, rule):
    """Raises a ValueError naming `where.key`, its value and `rule` (a key of
    VALUE_RULES) for the first of `keys` whose value breaks the rule."""
    for key in keys:
        value = getattr(cfg, key)
        if not VALUE_RULES[rule](value):
            raise ValueError(
                f"{join_key(where, key)} = {value}: must be {rule}.")


def check_types(cfg, where):
    """Raises a ValueError naming `where.key` for the first scalar field of
    the dataclass `cfg` whose value is not of its annotated type (a bool
    is no int; an int is a valid float): a config read from a file is
    checked before any comparison or build sees a string.

    Examples:
        >>> from bert_tf.config import EncoderConfig
        >>> check_types(EncoderConfig(num_layers="12"), "encoder")
        Traceback (most recent call last):
        ...
        ValueError: encoder.num_layers = '12': expected int, got str.
    """
    hints = typing.get_type_hints(type(cfg))
    for field in dataclasses.fields(cfg):
        expected = hints.get(field.name)
        value = getattr(cfg, field.name)
        if expected not in (int, float, str, bool):
            continue
        fits = (isinstance(value, expected) and not (
            expected in (int, float) and isinstance(value, bool))) or (
            expected is float and isinstance(value, int) and
            not isinstance(value, bool))
        if not fits:
            raise ValueError(
                f"{join_key(where, field.name)} = {value!r}: expected "
                f"{expected.__name__}, got {type(value).__name__}.")


def check_ceilings(cfg, where, ceilings):
    """Raises a ValueError naming `where.key` for the first of `ceilings`
    ({key: most}) that `cfg` exceeds."""
    for key, most in ceilings.items():
        if getattr(cfg, key) > most:
            raise ValueError(
                f"{join_key(where, key)} = {getattr(cfg, key):,}: over the "
                f"ceiling of {most:,} this library builds (a config over "
                "it is a mistake or a crafted file).")


def join_key(prefix, key):
    """`prefix.key` (just `key` at the top level)."""
    return f"{prefix}.{key}" if prefix else key



def _coerce(value, expected, key):
    """Checks one scalar against its annotated type (ints are valid floats)."""
    if expected is float and isinstance(value, int) and not isinstance(
            value, bool):
        return float(value)
    if expected is float and isinstance(value, str):
        try:  # YAML 1.1 reads `1e-12` (no dot) as a string.
            return float(value)
        except ValueError:
            pass
    if expected in (int, float, str, bool):
        if isinstance(value, expected) and not (expected is int and
                                            isinstance(value, bool)):
            return value
        raise ValueError(
            f"{key} = {value!r}: expected {expected.__name__}, got "
            f"{type(value).__name__}.")
    return value



def from_dict(cls, data, where=""):
    """Builds dataclass `cls` from a mapping, rejecting unknown keys.

    A string where a nested config is expected is handed to the class's
    `from_name` (encoders read it as a preset name, so that
    `encoder: bert_tiny` works in any config file).

    Args:
        cls: the dataclass type to build.
        data: a mapping (e.g. from `yaml.safe_load`) or None for defaults.
        where: dotted path of `data` inside the whole config, for messages.

    Examples:
        >>> import dataclasses
        >>> @dataclasses.dataclass
        ... class Sizes:
        ...     layers: int = 1
        >>> from_dict(Sizes, {"layers": 2})
        Sizes(layers=2)
    """
    if data is None:
        data = {}
    if isinstance(data, str) and hasattr(cls, "from_name"):
        return cls.from_name(data)
    if not isinstance(data, dict):
        raise ValueError(
            f"{where or 'config'}: expected a mapping of keys to values, got "
            f"{type(data).__name__} {data!r}.")
    data = _renamed(cls, data, where)
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = [k for k in data if k not in names]
    if unknown:
        raise ValueError(
            f"Unknown config key {join_key(where, str(unknown[0]))!r}; valid "
            f"keys{' under ' + repr(where) if where else ''}: "
            f"{', '.join(names)}.")
    kwargs = {}
    for key, value in data.items():
        field_type = hints[key]
        path = join_key(where, key)
        if dataclasses.is_dataclass(field_type):
            kwargs[key] = from_dict(field_type, value, path)
        else:
            kwargs[key] = _coerce(value, field_type, path)
    return cls(**kwargs)


def _renamed(cls, data, where):
    """`data` with the deprecated keys of `cls.RENAMED_KEYS` moved to their
    new names (`section.key`: into a section), warning once per key."""
    renamed = getattr(cls, "RENAMED_KEYS", {})
    if not any(old in data for old in renamed):
        return data
    data = dict(data)
    for old, new in renamed.items():
        if old not in data:
            continue
        section, _, leaf = new.rpartition(".")
        target = data
        if section:
            target = data[section] = dict(data.get(section) or {})
        if leaf in target:
            raise ValueError(
                f"{join_key(where, old)} and {join_key(where, new)} are both "
                f"set; {old!r} is the old name of {new!r}: keep only "
                f"{new!r}.")
        warnings.warn(f"Config key {join_key(where, old)!r} is deprecated: "
                      f"it is now {join_key(where, new)!r}.", FutureWarning,
                      stacklevel=3)
        target[leaf] = data.pop(old)
    return data


def apply_overrides(data, overrides):
    """Applies `a.b.c=value` strings to a nested dict (values parsed as YAML).

    Examples:
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


def parse_config_file(path, parse, errors, language):
    """`parse` of a config file's text; a missing file or text `parse`
    rejects (raising one of `errors`) is an error that names the file."""
    path = GPath(path)
    if not path.is_file():
        raise FileNotFoundError(f"Config file {path} does not exist.")
    try:
        return parse(path.read_text(encoding="utf-8"))
    except (*errors, UnicodeDecodeError) as e:
        raise ValueError(
            f"Config file {path} is not valid {language}: {e}") from e


def read_yaml(path):
    """Reads a YAML mapping, with errors that name the file."""
    data = parse_config_file(path, yaml.safe_load, (yaml.YAMLError,), "YAML")
    if data is not None and not isinstance(data, dict):
        raise ValueError(
            f"Config file {path} must hold a mapping at the top level.")
    return data or {}


def to_dict(config):
    """A config as plain nested dicts (for YAML output)."""
    return dataclasses.asdict(config)


def save_config(config, path):
    """Writes a config (or a dict of sections) as YAML that `load_config`
    reads back."""
    data = config if isinstance(config, dict) else to_dict(config)
    GPath(path).write_text(yaml.safe_dump(data, sort_keys=False),
                          encoding="utf-8")
    return path
