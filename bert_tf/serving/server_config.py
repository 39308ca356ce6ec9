"""The files TF Serving reads beside the exports: `models.config` (its
--model_config_file) and `batching_parameters.txt` (its
--batching_parameters_file)."""

import os

from bert_tf.storage import GPath, is_remote

# The first line of every file written here: what marks a models root as
# one an export may keep up to date without being told.
MARKER = "# Written by `bert-tf export`"


def _same_place(a, b):
    if is_remote(a) or is_remote(b):
        return str(a).rstrip("/") == str(b).rstrip("/")
    return os.path.realpath(str(a)) == os.path.realpath(str(b))


def models_root(out, server_config=None):
    """The models root whose `models.config` and `batching_parameters.txt`
    an export to `out` (`ROOT/NAME/VERSION`) keeps up to date, or None:
    an export writes inside `out` only, unless the user named the root
    (`server_config`: True, or the root's path) or the root already holds
    a `models.config` that an export wrote.

    Examples:
        >>> models_root(GPath("nowhere/m/1")) is None
        True
        >>> str(models_root(GPath("nowhere/m/1"), True))
        'nowhere'
    """
    root = GPath(out).parent.parent
    if server_config is None or server_config is False:
        config = root / "models.config"
        written = config.is_file() and \
            config.read_text()[:len(MARKER)] == MARKER
        return root if written else None
    if server_config is not True and not _same_place(server_config, root):
        raise ValueError(
            f"--server-config {server_config}: models.config lists the "
            f"models under its own folder, and {out} is not one of them; "
            f"name {root} (two folders above --out), or export under "
            f"{server_config}.")
    return root


def _quoted(name):
    """`name` as a protobuf text-format string: quotes, backslashes and
    control characters escaped, so a folder name cannot add entries.

    Examples:
        >>> print(_quoted('a"b'))
        "a\\"b"
    """
    escaped = "".join(
        "\\" + c if c in '"\\' else f"\\{ord(c):03o}"
        if ord(c) < 32 or ord(c) == 127 else c for c in name)
    return f'"{escaped}"'


def update_models_config(export_root):
    """Rewrites `export_root/models.config` (TF Serving's --model_config_file)
    to list every `NAME/VERSION` SavedModel under `export_root`, with base
    paths under /models (mount `export_root` there)."""
    export_root = GPath(export_root)
    names = sorted(
        d.name for d in export_root.iterdir() if d.is_dir() and any(
            v.is_dir() and v.name.isdigit() and
            (v / "saved_model.pb").is_file() for v in d.iterdir()))
    entries = "".join(
        "  config {\n"
        f"    name: {_quoted(name)}\n"
        f"    base_path: {_quoted('/models/' + name)}\n"
        "    model_platform: \"tensorflow\"\n"
        "  }\n" for name in names)
    path = export_root / "models.config"
    path.write_text(f"{MARKER}: one entry per exported "
                    "model.\n# docker run -p 8501:8501 -v $PWD/export:/models"
                    " tensorflow/serving:2.20.0 \\\n#   --model_config_file="
                    "/models/models.config\n"
                    f"model_config_list {{\n{entries}}}\n")
    return path


def write_batching_parameters(export_root, batch_sizes, threads=2,
                              timeout_micros=2000):
    """Writes `export_root/batching_parameters.txt`, TF Serving's
    `--batching_parameters_file`: requests are merged into batches of
    `batch_sizes` (the sizes the warm-up ran), waiting at most
    `timeout_micros` for a batch to fill. Each batch then runs at the
    length of its longest text, so short texts stay cheap."""
    path = GPath(export_root) / "batching_parameters.txt"
    path.write_text(
        f"{MARKER}. Serve with --enable_batching "
        "--batching_parameters_file=/models/batching_parameters.txt\n"
        f"max_batch_size {{ value: {max(batch_sizes)} }}\n"
        f"batch_timeout_micros {{ value: {timeout_micros} }}\n"
        "max_enqueued_batches { value: 100 }\n"
        f"num_batch_threads {{ value: {threads} }}\n"
        + "".join(f"allowed_batch_sizes: {size}\n" for size in batch_sizes))
    return path
