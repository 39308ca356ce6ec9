"""Finding the files of a checkpoint on disk."""


import tensorflow as tf

from bert_tf.storage import GPath


def find_file(directory, names, what):
    for name in names:
        if (directory / name).is_file():
            return directory / name
    raise FileNotFoundError(
        f"No {what} in {directory} (looked for {', '.join(names)}).")


def find_vocab(path):
    """The vocab.txt next to a checkpoint (or one directory up)."""
    path = GPath(path)
    directory = path if path.is_dir() else path.parent
    for candidate in (directory / "vocab.txt", directory.parent / "vocab.txt"):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        f"No vocab.txt next to {path}; pass --vocab PATH.")


def checkpoint_prefix(path, default_names):
    """Resolves a directory or a file prefix to a readable checkpoint."""
    path = GPath(path)
    if path.is_dir():
        latest = tf.train.latest_checkpoint(str(path))
        if latest:
            return GPath(latest)
        for name in default_names:
            if (path / f"{name}.index").is_file():
                return path / name
        indexes = sorted(path.glob("*.index"))
        if indexes:
            return indexes[0].with_suffix("")
        raise FileNotFoundError(f"No TensorFlow checkpoint (*.index) in "
                                f"{path}.")
    if path.suffix in (".index",) or ".data-" in path.name:
        path = path.with_suffix("") if path.suffix == ".index" else \
            path.parent / path.name.split(".data-")[0]
    if not GPath(str(path) + ".index").is_file():
        raise FileNotFoundError(f"TensorFlow checkpoint {path} does not exist "
                                f"(no {path}.index).")
    return path


def read_checkpoint(prefix):
    # The reader itself, not `tf.train.load_checkpoint`: that one asks
    # `isdir`, which `ram://` answers by key prefix (a prefix "ckpt-10"
    # looks like a directory there).
    if GPath(prefix).is_dir():
        prefix = tf.train.latest_checkpoint(str(prefix)) or prefix
    try:
        return tf.compat.v1.train.NewCheckpointReader(str(prefix))
    except (tf.errors.OpError, ValueError) as e:
        detail = getattr(e, "message", str(e))
        raise ValueError(f"Cannot read checkpoint {prefix}: {detail}") from None
