"""Import paths moved in 0.1 still work, warning once with the new path."""

import importlib
import subprocess
import sys

import pytest

from bert_tf._moved import MOVED


def test_every_old_path_names_a_module_that_exists():
    for new in filter(None, MOVED.values()):
        assert importlib.util.find_spec(new) is not None, new


def test_old_paths_warn_and_give_the_same_objects():
    """In a fresh process: `from OLD import NAME` works, is the object at
    the new path, and says where it moved."""
    code = """
import warnings
warnings.simplefilter("error", DeprecationWarning)
try:
    from bert_tf.training.precision import resolve
except DeprecationWarning as warning:
    print("warned:", warning)
warnings.simplefilter("ignore", DeprecationWarning)
from bert_tf.training.precision import resolve
from bert_tf.precision import resolve as new
from bert_tf.models.task_models import read_vocab
from bert_tf.text.vocab import read_vocab as cls
print(resolve is new, read_vocab is cls)
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True,
                            text=True, check=True, timeout=120)
    lines = result.stdout.splitlines()
    assert lines[0] == ("warned: bert_tf.training.precision moved to "
                        "bert_tf.precision; the old path goes away in the "
                        "next release.")
    assert lines[-1] == "True True"


def test_an_unknown_old_path_is_still_an_import_error():
    with pytest.raises(ImportError):
        importlib.import_module("bert_tf.training.no_such_module")


def test_renamed_names_warn_once_and_still_work():
    """The names 0.1 renamed (a kind's own export functions, the TFLite
    classifier, the classification-only data names) are found under their
    old names, warn once naming the new one, and do the same work."""
    import warnings

    import bert_tf
    from bert_tf import _moved
    from bert_tf.serving import export as export_lib
    from bert_tf.serving import tflite
    from bert_tf.tasks.classification import data

    _moved._warned.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert bert_tf.load_task is data.load_classification
        assert data.load_task is data.load_classification
        assert data.task_dataset is data.classification_dataset
        assert data.TaskData is data.ClassificationData
        assert tflite.TFLiteClassifier is tflite.TFLiteModel
        assert callable(export_lib.export_encoder)
    messages = [str(w.message) for w in caught
                if w.category is DeprecationWarning]
    assert len(messages) == 5, messages  # load_task warned once
    assert messages[0] == (
        "bert_tf.tasks.classification.data.load_task is now bert_tf.tasks."
        "classification.data.load_classification; the old name goes away "
        "in the next release.")
    assert "is now bert_tf.serving.export.export(..., kind='embeddings')" \
        in messages[-1]
    calls = []
    real = export_lib.export
    export_lib.export = lambda *args, **kwargs: calls.append((args, kwargs))
    try:
        export_lib.export_fill_mask("ckpt", "out/1", overwrite=True)
    finally:
        export_lib.export = real
    assert calls[0] == (("fill_mask", "ckpt", "out/1"), {"overwrite": True})
    with pytest.raises(AttributeError):
        export_lib.no_such_name
