"""Named encoder sizes: the YAML files in `configs/models/`.

The YAML files are the single source of the sizes. They are found next to
the package in a source checkout, or under `<prefix>/share/bert_tf/configs`
after a regular (non-editable) install.
"""

import sys
from pathlib import Path


def configs_dir():
    """The `configs/` directory this installation reads."""
    for candidate in (Path(__file__).resolve().parents[1] / "configs",
                      Path(sys.prefix) / "share" / "bert_tf" / "configs"):
        if (candidate / "models").is_dir():
            return candidate
    raise FileNotFoundError(
        "bert_tf cannot find its configs/ directory (looked next to the "
        f"package and under {sys.prefix}/share/bert_tf); reinstall bert_tf.")


def available():
    """Names of the encoder presets, e.g. `['bert_base', ...]`."""
    return sorted(p.stem for p in (configs_dir() / "models").glob("*.yaml"))


def preset_path(name):
    """Path of the YAML file of preset `name`.

    Example:
    >>> preset_path("bert_tiny").name
    'bert_tiny.yaml'
    """
    path = configs_dir() / "models" / f"{name}.yaml"
    if not path.is_file():
        raise ValueError(
            f"Unknown encoder preset {name!r}; available presets: "
            f"{', '.join(available())}.")
    return path
