"""Import paths and names that moved in 0.1 keep working for one release:
importing one gives the module it moved to, and a renamed function or
class is still found under its old name (a module's `__getattr__` asks
`renamed`), each with a `DeprecationWarning` (once per path or name) that
names the new one. Installed by `bert_tf/__init__.py`."""

import importlib
import importlib.abc
import importlib.util
import sys
import types
import warnings

# old path -> new path. None: the old module's names now live in several
# modules; they resolve through the public API (`import bert_tf`).
MOVED = {
    "bert_tf.data.samples": "bert_tf.samples",
    "bert_tf.data.sample_texts": "bert_tf.samples.readers",
    "bert_tf.data.batching": "bert_tf.tasks.batching",
    "bert_tf.data.readers": "bert_tf.tasks.classification.data",
    "bert_tf.data.tasks": "bert_tf.tasks.classification.data",
    "bert_tf.training.precision": "bert_tf.precision",
    "bert_tf.training.keras_compat": "bert_tf.keras_compat",
    "bert_tf.training.checkpoint_io": "bert_tf.checkpoints.run_files",
    "bert_tf.models.checkpoint_layout": "bert_tf.checkpoints.layout",
    "bert_tf.models.tasks": None,
    "bert_tf.models.task_models": None,
    "bert_tf.serving.precision": "bert_tf.serving.quantize",
    "bert_tf.tasks.features": "bert_tf.tasks.embeddings.extract",
    "bert_tf.tasks.span_decoding": "bert_tf.tasks.span_qa.decoding",
    "bert_tf.tasks.squad_metrics": "bert_tf.tasks.span_qa.metrics",
    "bert_tf.tasks.tagging_decoding": "bert_tf.tasks.tagging.decoding",
    "bert_tf.text.qa_preprocessor": "bert_tf.tasks.span_qa.features",
    "bert_tf.text.tagging_preprocessor": "bert_tf.tasks.tagging.preprocessor",
    "bert_tf.checkpoints.canonical": "bert_tf.formats.canonical",
    "bert_tf.checkpoints.files": "bert_tf.formats.files",
    "bert_tf.checkpoints.hf": "bert_tf.formats.hf",
    "bert_tf.checkpoints.json_config": "bert_tf.formats.json_config",
    "bert_tf.checkpoints.tf1": "bert_tf.formats.tf1",
    "bert_tf.checkpoints.torch_zip": "bert_tf.formats.torch_zip",
    # "hub" is the TF Hub format (`bert_tf.serving.hub`); the Hugging Face
    # Hub's module says so.
    "bert_tf.hub": "bert_tf.hf_hub",
}


# (module, old name) -> (module, new name, the kind it fixed, if any:
# the new function takes it as `kind`, the first argument of `export`).
RENAMED = {
    ("bert_tf.serving.export", "export_encoder"):
        ("bert_tf.serving.export", "export", "embeddings"),
    ("bert_tf.serving.export", "export_fill_mask"):
        ("bert_tf.serving.export", "export", "fill_mask"),
    ("bert_tf.serving.tflite", "export_tflite_embeddings"):
        ("bert_tf.serving.tflite", "export_tflite", "embeddings"),
    ("bert_tf.serving.tflite", "TFLiteClassifier"):
        ("bert_tf.serving.tflite", "TFLiteModel", None),
    ("bert_tf.tasks.classification.data", "TaskData"):
        ("bert_tf.tasks.classification.data", "ClassificationData", None),
    ("bert_tf.tasks.classification.data", "load_task"):
        ("bert_tf.tasks.classification.data", "load_classification", None),
    ("bert_tf.text.word_windows", "TaggingPreprocessor"):
        ("bert_tf.tasks.tagging.preprocessor", "TaggingPreprocessor", None),
    ("bert_tf.text.word_windows", "bert_words"):
        ("bert_tf.text.windows", "bert_words", None),
    ("bert_tf.text.dense", "char_offsets"):
        ("bert_tf.text.windows", "char_offsets", None),
    ("bert_tf.text.tokenizer", "byte_to_char_offsets"):
        ("bert_tf.text.windows", "char_offsets", None),
    ("bert_tf.text.dense", "dense_windows"):
        ("bert_tf.text.windows", "dense_windows", None),
    ("bert_tf.text.dense", "max_context"):
        ("bert_tf.text.windows", "max_context", None),
    ("bert_tf.text.dense", "capped"):
        ("bert_tf.text.windows", "capped", None),
    ("bert_tf.text.dense", "MAX_PIECES"):
        ("bert_tf.text.windows", "MAX_PIECES", None),
    ("bert_tf.text.word_windows", "word_windows"):
        ("bert_tf.text.windows", "word_windows", None),
    ("bert_tf.tasks.base", "ExportKind"):
        ("bert_tf.tasks.base", "ExportOnlyKind", None),
    ("bert_tf.tasks.classification.data", "task_dataset"):
        ("bert_tf.tasks.classification.data", "classification_dataset",
         None),
}
_warned = set()


def renamed(module, name):
    """The object `module`'s old `name` now is (a module's `__getattr__`
    calls this), warning once; AttributeError for a name never renamed.

    Examples:
        >>> import warnings
        >>> _warned.clear()  # once per process: as if never asked
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     old = renamed("bert_tf.tasks.classification.data", "load_task")
        >>> old.__name__, caught[0].category.__name__
        ('load_classification', 'DeprecationWarning')
    """
    if (module, name) not in RENAMED:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    new_module, new_name, kind = RENAMED[module, name]
    target = getattr(importlib.import_module(new_module), new_name)
    if (module, name) not in _warned:
        _warned.add((module, name))
        fixed = f"(..., kind={kind!r})" if kind else ""
        warnings.warn(f"{module}.{name} is now {new_module}.{new_name}"
                      f"{fixed}; the old name goes away in the next "
                      "release.", DeprecationWarning, stacklevel=3)
    if kind is None:
        return target
    if new_name == "export":  # export(kind, checkpoint, out, ...)
        return lambda *args, **kwargs: target(kind, *args, **kwargs)
    return lambda *args, **kwargs: target(*args, kind=kind, **kwargs)


class _Forward(types.ModuleType):
    """The old path: every name is looked up where it lives now (the new
    module, or the public API for the modules that were split)."""

    def __init__(self, name, target):
        super().__init__(name)
        self._target = target

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        module = importlib.import_module(self._target or "bert_tf")
        return getattr(module, name)

    def __dir__(self):
        return dir(importlib.import_module(self._target or "bert_tf"))


class _MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        if name not in MOVED:
            return None
        return importlib.util.spec_from_loader(name, self)

    def create_module(self, spec):
        new = MOVED[spec.name]
        warnings.warn(
            f"{spec.name} moved to {new or 'bert_tf (the public API)'}; the "
            "old path goes away in the next release.", DeprecationWarning,
            stacklevel=3)
        if new is not None:
            importlib.import_module(new)  # a typo here fails at once
        return _Forward(spec.name, new)

    def exec_module(self, module):
        pass


def install():
    """Puts the finder on `sys.meta_path` (once)."""
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.append(_MovedFinder())
