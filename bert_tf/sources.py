"""Checkpoints by name: one resolver for every place that takes weights
(`init:` in configs, `bert-tf convert --input`, `bert-tf export`'s encoder
kinds, `from_preset`).

- `hf://ORG/NAME[@REVISION]`: the Hugging Face Hub (`bert_tf.hf_hub`);
- a preset with weights (`bert_base_uncased`, ...: `configs/models/`);
- `sample:NAME`: a bundled sample's weights (`bert_tf.samples`);
- anything else: a path, exactly as before (`hf:PATH`, `tf1:PATH`, a
  bert_tf directory).

`kaggle://` is refused with a pointer to `hf://`: see `docs/models.md`.
"""

import difflib
from pathlib import Path

from bert_tf import hf_hub, presets, samples

KAGGLE = "kaggle://"


def resolve(value, log=print):
    """`value` as `LAYOUT:DIR` when it names a checkpoint (downloading it
    into the cache if needed); other values unchanged.

    Examples:
        >>> resolve("hf:/some/dir")
        'hf:/some/dir'
    """
    value = str(value)
    if value.startswith("sample:"):
        return samples.resolve(value)
    if hf_hub.is_hub_name(value):
        return f"hf:{hf_hub.download(value, log)}"
    if value.startswith(KAGGLE):
        raise ValueError(
            f"{value}: kaggle:// is not supported (Kaggle hosts BERT in the "
            "keras-hub format); name the same model as hf://ORG/NAME or a "
            "preset (`bert-tf presets`).")
    source = presets.weights_source(value)
    if source:
        return resolve(source, log)
    if value not in presets.available() and _looks_like_a_name(value):
        close = difflib.get_close_matches(value, presets.available(), n=2)
        raise ValueError(
            f"{value}: neither a preset nor an existing path"
            + (f"; did you mean {' or '.join(close)}?" if close else
               f"; presets with weights: "
               f"{', '.join(presets.with_weights())}."))
    if value in presets.available():
        raise ValueError(
            f"{value} is a size without weights: set `encoder: {value}` and "
            "leave `init:` empty for a random start, or name a preset with "
            f"weights ({', '.join(presets.with_weights())}).")
    return value


def _looks_like_a_name(value):
    """A bare word that is no file, directory or checkpoint prefix here."""
    if not value or "/" in value or ":" in value or "." in value:
        return False
    path = Path(value).expanduser()
    return not (path.exists() or Path(f"{value}.index").exists())


def resolve_vocab(value, log=print):
    """A `vocab:` value naming a checkpoint read as its vocab.txt; other
    values unchanged."""
    if is_name(value):
        return resolve(value, log).partition(":")[2] + "/vocab.txt"
    return value


def is_name(value):
    """Whether `value` names a checkpoint (rather than being a path)."""
    value = str(value)
    return value.startswith(("sample:", hf_hub.SCHEME, KAGGLE)) or \
        bool(presets.weights_source(value))
