"""The typed config of a task kind: one dataclass per kind (its folder's
`config.py`), subclassing `TaskConfig`.

The same object is the `task:` section of a fine-tuning YAML, the spec a
run saves as `task.yaml` beside its best weights (with the fields the run
fills in, `RUN_FIELDS`, and what the data decided, such as the labels),
and what export reads. Unknown or mistyped keys fail when the config is
read, naming the key and the valid ones; deprecated keys are read with a
warning.
"""

import dataclasses
import typing

from bert_tf.config_io import check_values, from_dict, join_key


@dataclasses.dataclass
class TaskConfig:
    """What every kind's config has.

    Args:
        kind: the task kind: a folder of `bert_tf/tasks/`.
        name: the data, one of the kind's `names`.
        train_file, validation_file, test_file: local files.
        data_dir: TFDS data directory ("" : TFDS's default).
        seed: split seed of the sample tasks.
        seq_length, lower_case, dropout, encoder: filled in by the run (the
            fine-tuning config's `seq_length` and `head_dropout`, the
            vocab's case, the encoder config); a `task:` section does not
            set them.
    """

    # Spec files before the typed configs wrote the data name as `task`.
    RENAMED_KEYS: typing.ClassVar[dict] = {"task": "name"}
    RUN_FIELDS: typing.ClassVar[tuple] = ("seq_length", "lower_case",
                                          "dropout", "encoder")
    # The data the kind reads: help text, and accepted `name` values ("x/"
    # accepts any x/NAME).
    names: typing.ClassVar[str] = ""
    data_names: typing.ClassVar[tuple] = ()

    kind: str = ""
    name: str = ""
    train_file: str = ""
    validation_file: str = ""
    test_file: str = ""
    data_dir: str = ""
    seed: int = 0
    seq_length: int = 128
    lower_case: bool = True
    dropout: float = 0.1
    encoder: dict = dataclasses.field(default_factory=dict)

    def split_args(self):
        """Where every task's data loader finds its splits: keyword arguments
        `data_dir`, `seed`, `train`, `validation` and `test`."""
        return {"data_dir": self.data_dir or None, "seed": self.seed,
                "train": self.train_file,
                "validation": self.validation_file or None,
                "test": self.test_file or None}

    def validate(self, where="task", data=True):
        """Checks the kind's fields, and with `data` the data name (a saved
        spec is not read for its data); returns self."""
        check_values(self, where, ("seq_length",), "> 0")
        check_values(self, where, ("dropout",), "in [0, 1)")
        if not data:
            return self
        name = self.name
        if not any(name == known or (known.endswith("/") and
                                     name.startswith(known))
                   for known in self.data_names):
            raise ValueError(f"{join_key(where, 'name')} = {name!r}: use "
                             f"{self.names}.")
        if name == "local" and not self.train_file:
            raise ValueError(f"{join_key(where, 'train_file')} is required "
                             "for a local task.")
        return self


def read_task_config(cls, data, where="task", spec=False):
    """`cls` (a kind's config class) from a mapping, validated.

    Args:
        cls: the kind's `TaskConfig` subclass.
        data: the `task:` section, or a spec file's content.
        where: the mapping's place, for messages (a section or a file).
        spec: `data` is a saved spec, which may hold the run's fields.

    Examples:
        >>> @dataclasses.dataclass
        ... class Toy(TaskConfig):
        ...     data_names = ("local",)
        ...     size: int = 1
        >>> read_task_config(Toy, {"name": "local", "train_file": "t.tsv",
        ...                        "size": 2}).size
        2
        >>> read_task_config(Toy, {"name": "local", "sise": 2})
        ... # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: Unknown config key 'task.sise'; valid keys under 'task': ...
    """
    data = dict(data or {})
    if not spec:
        for key in cls.RUN_FIELDS:
            if key not in data:
                continue
            if key in ("seq_length", "dropout"):
                top = "head_dropout" if key == "dropout" else key
                raise ValueError(f"{join_key(where, key)}: the run writes it "
                                 f"from the fine-tuning config's {top}; set "
                                 f"{top} there instead.")
            raise ValueError(f"{join_key(where, key)}: the run writes it "
                             "(from the vocab and the encoder); a config "
                             "does not set it.")
    return from_dict(cls, data, where).validate(where, data=not spec)
