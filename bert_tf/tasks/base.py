"""The task protocol: what fine-tuning, export, the CLI and the demo ask of
a task kind, what they share, and the one registry of kinds.

A task kind is one folder, `bert_tf/tasks/<kind>/`, whose `__init__`
imports its `Task` subclass, registered with `@register`; an export-only
kind (a pre-trained encoder's `embeddings`, `fill_mask`) registers its
`ExportOnlyKind` the same way. The registry finds a kind by importing the
folder of that name, so adding a kind touches nothing outside its folder;
a package outside bert_tf adds one through the `bert_tf.kinds` entry
points (`PLUGIN_GROUP`).
A `Task` subclass answers: how
to read its data (`load_data`), how examples become model features in
`tf.data` (`train_dataset`, with the same Keras layers as the exported
graph), which model to build (`build_model`) and compile (`compile`), how
outputs become answers and the official metric (`evaluate`, through the
same post-processing as serving) and what the serving signature takes and
returns (`serving_module`). Everything it must remember for export lives in
its spec (`task.yaml` beside the best weights).
"""

import dataclasses
import importlib
import os
import pkgutil
import warnings

import yaml

from bert_tf import checkpoints
from bert_tf import config as config_lib
from bert_tf.config_io import join_key
from bert_tf.models.encoder import BertEncoder
from bert_tf.storage import GPath
from bert_tf.tasks.distillation import TransferHooks
from bert_tf.tasks.parts import (CommandLine, RunServing, Serving,
                                 Training)
from bert_tf.tasks.serving_module import (  # noqa: F401 (the kinds' base)
    TaskModule, command_line_texts, same_batch, served_text_batches,
    string_batch)
from bert_tf.tasks.task_config import read_task_config
from bert_tf.text.vocab import read_vocab

SPEC_FILE = "task.yaml"
# The kind of a spec or an export that names none: written before there
# were other kinds.
DEFAULT_KIND = "classification"
LEGACY_SPEC_FILES = {"classifier.yaml": DEFAULT_KIND}


_REGISTRY = {}
_CONFIGS = {}


def register(cls):
    """Class decorator: registers a `Task` or `ExportOnlyKind` subclass under
    its `kind` (the name of its folder)."""
    if not cls.kind:
        raise ValueError(f"{cls.__name__} has no `kind` to register under.")
    _REGISTRY[cls.kind] = cls
    return cls


def register_config(cls):
    """Class decorator: registers a kind's `TaskConfig` subclass under the
    default of its `kind` field."""
    _CONFIGS[cls.__dataclass_fields__["kind"].default] = cls
    return cls


def get_config_class(kind):
    """The typed config class of task kind `kind`.

    Examples:
        >>> get_config_class("span_qa").__name__
        'SpanQAConfig'
    """
    get_kind(kind)
    if kind not in _CONFIGS:
        raise ValueError(f"kind {kind!r} has no task config: it is not "
                         "fine-tuned.")
    return _CONFIGS[kind]


def task_config_of(data, where="task", spec=False):
    """The typed config of a `task:` section or a spec (a mapping), by its
    `kind` (default `classification`), validated; see
    `task_config.read_task_config`."""
    data = dict(data or {})
    kind = data.setdefault("kind", DEFAULT_KIND)
    if not isinstance(kind, str) or kind not in fine_tuned_kinds():
        raise ValueError(f"{join_key(where, 'kind')} = {kind!r}: use one of "
                         f"{', '.join(fine_tuned_kinds())} (the kinds "
                         "that are fine-tuned).")
    return read_task_config(get_config_class(kind), data, where, spec)


# Packages outside bert_tf that add kinds name their module in this entry
# point group (e.g. in pyproject.toml: [project.entry-points."bert_tf.kinds"]
# my_kind = "my_package.my_kind"); importing it registers the kind.
PLUGIN_GROUP = "bert_tf.kinds"
_plugins_loaded = []


def _load_plugins():
    if _plugins_loaded:
        return
    _plugins_loaded.append(True)
    from importlib.metadata import entry_points

    for entry in entry_points(group=PLUGIN_GROUP):
        try:
            entry.load()
        except Exception as error:  # noqa: BLE001 - one broken plugin
            warnings.warn(f"the kind plugin {entry.name} ({entry.value}) "
                          f"did not load: {error}", RuntimeWarning,
                          stacklevel=3)


def available_kinds():
    """The kinds: the folders under `bert_tf/tasks/` and the kinds that
    packages add through the `bert_tf.kinds` entry points, sorted.

    Examples:
        >>> available_kinds()[:2]
        ['classification', 'embeddings']
    """
    _load_plugins()
    folder = os.path.dirname(os.path.abspath(__file__))
    return sorted({info.name for info in pkgutil.iter_modules([folder])
                   if info.ispkg} | set(_REGISTRY))


def get_kind(kind):
    """The registered class of `kind` (its folder is imported on first use).

    Examples:
        >>> get_kind("span_qa").__name__
        'SpanQA'
    """
    _load_plugins()
    if kind not in _REGISTRY and kind in available_kinds():
        importlib.import_module(f"bert_tf.tasks.{kind}")
    if kind not in _REGISTRY:
        raise ValueError(f"kind {kind!r}: use one of "
                         f"{', '.join(available_kinds())}.")
    return _REGISTRY[kind]


def fine_tuned_kinds():
    """The kinds that `bert-tf finetune` trains (`Task` subclasses)."""
    return [k for k in available_kinds() if issubclass(get_kind(k), Task)]


def kind_of_model(model):
    """The kind whose `model_class` `model` is.

    Examples:
        >>> from bert_tf.models.encoder import BertEncoder
        >>> from bert_tf.tasks.tagging.model import BertTokenClassifier
        >>> kind_of_model(BertTokenClassifier(BertEncoder.from_preset(
        ...     "bert_tiny"), 3))
        'tagging'
    """
    for kind in fine_tuned_kinds():
        model_class = get_kind(kind).model_class
        if model_class is not None and isinstance(model, model_class):
            return kind
    raise ValueError(f"{type(model).__name__} is not the model of a task "
                     f"kind ({', '.join(fine_tuned_kinds())}): name its "
                     "kind.")


class ExportOnlyKind(Serving, CommandLine):
    """An export-only kind: built from a pre-trained checkpoint, not a
    fine-tuning run (`embeddings`, `fill_mask`). Subclasses set `kind` and
    implement `build_export` and `print_predictions` (the parts:
    `bert_tf.tasks.parts`)."""

    kind = ""


class Task(Training, RunServing, CommandLine, TransferHooks):
    """One fine-tuned task kind (see the module docstring): its parts
    (`bert_tf.tasks.parts`) and the implementations they share.
    Instances hold a spec.

    Class attributes:
        kind: the `task.kind` config value.
        hf_head: the kind's `hf_head.py` module (`parts.HFHead`), or None.
    """

    kind = ""
    hf_head = None

    def __init__(self, spec):
        """`spec`: the kind's typed config (`get_config_class(kind)`), or a
        mapping of its fields."""
        if not dataclasses.is_dataclass(spec):
            spec = config_lib.from_dict(get_config_class(self.kind),
                                        {**dict(spec), "kind": self.kind},
                                        "spec")
        self.spec = spec
        self._eval_datasets = {}  # (split, settings) -> (data, vocab, batches)

    # --- configuration and data ---------------------------------------------

    @classmethod
    def make_spec(cls, cfg, spec, data, encoder_config, vocab):
        return run_spec(cfg, spec, data, encoder_config, vocab)

    def eval_dataset(self, data, split, vocab, build, *settings):
        key = (split, *settings)
        held = self._eval_datasets.get(key)
        if held is None or held[0] is not data or held[1] is not vocab:
            held = self._eval_datasets[key] = (data, vocab, build())
        return held[2]

    # --- serving --------------------------------------------------------------

    @classmethod
    def build_export(cls, checkpoint, fixed_length=False, dtype=None):
        """`Serving.build_export` of a fine-tuning run of this kind."""
        best, spec = read_spec(checkpoint)
        if spec.kind != cls.kind:
            raise ValueError(f"{checkpoint} is a {spec.kind} run, not "
                             f"{cls.kind}.")
        task = cls(spec)
        model, vocab = restore_finetuned(task, best, dtype=dtype)
        return task.spec, vocab, model, (
            lambda served, saved: task.serving_module(served, saved,
                                                      fixed_length))

    @classmethod
    def build_tflite(cls, checkpoint):
        best, spec = read_spec(checkpoint)
        if spec.kind != cls.kind:
            raise ValueError(f"{checkpoint} is a {spec.kind} run, not "
                             f"{cls.kind}.")
        if not cls.has_tflite():
            return Serving.build_tflite.__func__(cls, checkpoint)
        task = cls(spec)
        model, vocab = restore_finetuned(task, best)
        return task.tflite_module(model, vocab), (
            f"{model.count_params():,} parameters; {task.describe_model()}; "
            f"seq_length {spec.seq_length}")

def run_spec(cfg, spec, data, encoder_config, vocab, **fields):
    """`spec` with the fields a run fills in (`RUN_FIELDS`, the
    data's name) and the kind's `fields` decided by the data."""
    return dataclasses.replace(
        spec, name=data.name, seq_length=cfg.seq_length,
        lower_case=not vocab.is_cased, dropout=cfg.head_dropout,
        encoder=dataclasses.asdict(encoder_config), **fields)


def find_spec_file(directory):
    """(directory holding the spec, spec path, kind if legacy) of a
    fine-tuning run's `best/` directory (or the run directory)."""
    directory = GPath(directory)
    for candidate in (directory / "best", directory):
        if (candidate / SPEC_FILE).is_file():
            return candidate, candidate / SPEC_FILE
        for name in LEGACY_SPEC_FILES:
            if (candidate / name).is_file():
                return candidate, candidate / name
    if directory.suffix == ".tflite" or (directory / "saved_model.pb"
                                          ).exists():
        raise FileNotFoundError(
            f"{directory} is an export, not a fine-tuning run: export and "
            "TFLite conversion read the run (`bert-tf finetune`'s model_dir"
            "); an export itself answers with `bert-tf predict --model "
            f"{directory}`.")
    if (directory / "config.json").is_file():
        raise FileNotFoundError(
            f"{directory} is an HF checkpoint, not a run: convert it first "
            f"(`bert-tf convert --input {directory} --output RUN`), then "
            "use RUN.")
    raise FileNotFoundError(
        f"{directory} holds no {SPEC_FILE}: pass a `bert-tf finetune` "
        "model_dir (or its best/ directory).")


def read_spec(directory):
    """(best directory, typed spec) of a fine-tuning run. Spec files of
    older versions load too (with a warning for each renamed key)."""
    best, path = find_spec_file(directory)
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of spec keys.")
    data.setdefault("kind", LEGACY_SPEC_FILES.get(path.name, DEFAULT_KIND))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", FutureWarning)
        try:
            spec = task_config_of(data, "", spec=True)
        except ValueError as error:
            raise ValueError(f"{path}: {error}") from None
    for warning in caught:
        warnings.warn(f"{path}: {warning.message}", FutureWarning,
                      stacklevel=2)
    return best, spec


def write_spec(directory, spec):
    """Writes the typed `spec` as `directory/task.yaml`."""
    (GPath(directory) / SPEC_FILE).write_text(yaml.safe_dump(
        config_lib.to_dict(spec), sort_keys=False))


def build_encoder(spec, dtype=None):
    encoder_config = config_lib.from_dict(config_lib.EncoderConfig,
                                          spec.encoder, "encoder")
    return BertEncoder.from_config_object(encoder_config, dtype=dtype)


def restore_finetuned(task, directory, dtype=None):
    """(model, vocab): `task`'s model with the weights in `directory`."""
    vocab = read_vocab(GPath(directory) / checkpoints.VOCAB_FILE)
    model = task.build_model(build_encoder(task.spec, dtype=dtype))
    checkpoints.check_vocab_size(vocab, model.encoder.config,
                                 GPath(directory) / checkpoints.VOCAB_FILE)
    checkpoints.restore_model(GPath(directory) / checkpoints.WEIGHTS_PREFIX,
                              model.encoder, **model.checkpoint_heads())
    return model, vocab


def check_lengths(encoder_config, **lengths):
    """Raises a ValueError naming the first length outside [3, the
    encoder's max_position_embeddings]."""
    limit = encoder_config.max_position_embeddings
    for name, length in lengths.items():
        if not 3 <= length <= limit:
            raise ValueError(f"{name} = {length}: must be in [3, {limit}] "
                             "(the encoder's max_position_embeddings).")


def __getattr__(name):
    from bert_tf import _moved

    return _moved.renamed(__name__, name)
