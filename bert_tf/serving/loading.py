"""Exports read back: `load_exported` (the runtime settings a serving-only
process wants, then the SavedModel, checked), the kind an export answers
as, and `bert-tf predict` on one."""

import json

import tensorflow as tf

from bert_tf import precision as precision_lib
from bert_tf import tasks
import bert_tf.serving.limits as limits_lib
from bert_tf.serving.integrity import (broken_export_error,
                                       check_export_files)
from bert_tf.serving.quantize import check_attention_runs_here
from bert_tf.serving.runtime import native_logs_quiet, serving_only_process
from bert_tf.storage import GPath


def load_exported(path, serving_only=False):
    """Loads an export (imports tensorflow_text first, which it needs).
    `serving_only`: nothing in this process trains (as in `bert-tf
    predict`), so a bf16 export's matmuls may keep their reordered weights
    (`bert_tf.serving.runtime`)."""
    import tensorflow_text  # noqa: F401 (registers the tf-text ops)

    path = check_saved_model(path)
    check_export_files(path)
    info = GPath(path) / "assets.extra" / "bert_tf.json"
    info = json.loads(info.read_text()) if info.is_file() else {}
    precision = precision_lib.Precision.parse(info.get("precision", "fp32"))
    check_attention_runs_here(info.get("int8"), path)
    if serving_only:
        serving_only_process(info)
    try:
        loaded = tf.saved_model.load(str(path))
    except Exception as error:  # noqa: BLE001 (any damage, any file)
        raise broken_export_error(path, error) from None
    precision.warn_if_emulated(path)
    return loaded


def print_export_predictions(path, args, serving_only=False):
    """`bert-tf predict` on an export: its kind prints the answers to
    `args`; a request the export refuses (over its limits, a malformed
    input) is a ValueError of the export's one line."""
    loaded = load_exported(path, serving_only)
    with limits_lib.refused_as_value_error(), native_logs_quiet():
        tasks.get_export_class(exported_kind(path)).print_predictions(
            loaded, args)


def check_saved_model(path):
    path = GPath(path)
    if not (path / "saved_model.pb").is_file():
        raise FileNotFoundError(f"{path} is not a SavedModel (no "
                                "saved_model.pb); pass export/NAME/VERSION.")
    return path


def exported_kind(path):
    """The task kind of an export (`assets.extra/bert_tf.json`)."""
    info = check_saved_model(path) / "assets.extra" / "bert_tf.json"
    if not info.is_file():
        raise FileNotFoundError(f"{path} has no assets.extra/bert_tf.json: "
                                "it was not written by `bert-tf export`.")
    return json.loads(info.read_text()).get("kind", tasks.DEFAULT_KIND)


def predict_texts(loaded, texts, texts_b=None):
    """Runs `serving_default` on Python strings; returns NumPy outputs."""
    function = loaded.signatures["serving_default"]
    inputs = {"text": tf.constant(list(texts), tf.string)}
    if texts_b is not None:
        inputs["text_b"] = tf.constant(list(texts_b), tf.string)
    return {k: v.numpy() for k, v in function(**inputs).items()}
