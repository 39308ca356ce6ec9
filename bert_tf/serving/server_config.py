"""The files TF Serving reads beside the exports: `models.config` (its
--model_config_file) and `batching_parameters.txt` (its
--batching_parameters_file)."""

from bert_tf.storage import GPath


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
        f"    name: \"{name}\"\n"
        f"    base_path: \"/models/{name}\"\n"
        "    model_platform: \"tensorflow\"\n"
        "  }\n" for name in names)
    path = export_root / "models.config"
    path.write_text("# Written by `bert-tf export`: one entry per exported "
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
        "# Written by `bert-tf export`. Serve with --enable_batching "
        "--batching_parameters_file=/models/batching_parameters.txt\n"
        f"max_batch_size {{ value: {max(batch_sizes)} }}\n"
        f"batch_timeout_micros {{ value: {timeout_micros} }}\n"
        "max_enqueued_batches { value: 100 }\n"
        f"num_batch_threads {{ value: {threads} }}\n"
        + "".join(f"allowed_batch_sizes: {size}\n" for size in batch_sizes))
    return path
