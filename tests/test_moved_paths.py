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
