"""Named encoder sizes: the YAML files in `configs/models/`.

The YAML files are the single source of the sizes. They are found next to
the package in a source checkout, or under `<prefix>/share/bert_tf/configs`
after a regular (non-editable) install, beside the other shipped data
(`configs/finetune`, `configs/pretrain`, the demo in `examples/`).
"""

import functools
import sys
from pathlib import Path


def shared_dir():
    """The directory holding `configs/` and `examples/`: the source
    checkout, or `<prefix>/share/bert_tf` of an installed package."""
    for candidate in (Path(__file__).resolve().parents[1],
                      Path(sys.prefix) / "share" / "bert_tf"):
        if (candidate / "configs" / "models").is_dir():
            return candidate
    raise FileNotFoundError(
        "bert_tf cannot find its configs/ directory (looked next to the "
        f"package and under {sys.prefix}/share/bert_tf); reinstall bert_tf.")


def configs_dir():
    """The `configs/` directory this installation reads."""
    return shared_dir() / "configs"


def available():
    """Names of the encoder presets, e.g. `['bert_base', ...]`."""
    return sorted(p.stem for p in (configs_dir() / "models").glob("*.yaml"))


def preset_path(name):
    """Path of the YAML file of preset `name`.

    Examples:
        >>> preset_path("bert_tiny").name
        'bert_tiny.yaml'
    """
    path = configs_dir() / "models" / f"{name}.yaml"
    if not path.is_file():
        raise ValueError(
            f"Unknown encoder preset {name!r}; available presets: "
            f"{', '.join(available())}.")
    return path


@functools.lru_cache(maxsize=None)
def weights_source(name):
    """Where preset `name`'s weights come from (`hf://...`), or None when
    `name` is not a preset or is a size without weights.

    Examples:
        >>> weights_source("bert_base_uncased")
        'hf://google-bert/bert-base-uncased'
        >>> weights_source("bert_tiny") is None
        True
    """
    import yaml

    path = configs_dir() / "models" / f"{name}.yaml"
    if "/" in str(name) or not path.is_file():
        return None
    with open(path, encoding="utf-8") as f:
        data = yaml.safe_load(f) or {}
    return (data.get("weights") or {}).get("source") or None


def with_weights():
    """Names of the presets that come with pre-trained weights."""
    return [name for name in available() if weights_source(name)]
