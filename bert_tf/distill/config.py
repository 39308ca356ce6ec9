"""The distillation config: a fine-tuning config of the student plus the
teacher and the recipe."""

import dataclasses

from bert_tf import config as config_lib


@dataclasses.dataclass
class DistillConfig(config_lib.FinetuneConfig):
    """A distillation run (`configs/distill/*.yaml`): every key of a
    fine-tuning config, for the student, plus:

    Args:
        teacher: the teacher's fine-tuning run directory (or its best/),
            or a SavedModel written by `bert-tf export`.
        layers: the blocks of the `init` encoder the student keeps, e.g.
            `[0, 2, 4]` (empty: all); `init: teacher` starts from the
            teacher's own fine-tuned encoder.
        temperature: T of the softened distributions.
        alpha: weight of the hard-label loss (1 - alpha: the soft loss).
        unlabeled: corpus specs (as `bert-tf pairs` reads, e.g.
            `sample:wikipedia`) whose sentences join the transfer set
            without labels.
        unlabeled_max: at most this many unlabeled sentences.
        augment: copies of each training text with words replaced (by
            `[MASK]` or a random whole word of the vocab), added to the
            transfer set without labels (0: none).
        augment_rate: the share of words each copy replaces.
        hidden_weight: weight of the hidden-state loss of matched blocks
            (0: intermediate hidden states are not matched).
        attention_weight: weight of the attention-distribution loss of
            matched blocks (0: not matched; needs equal head counts).
        layer_map: the teacher block each student block matches (empty:
            spread evenly, ending at the last).
    """

    teacher: str = ""
    layers: list = dataclasses.field(default_factory=list)
    temperature: float = 2.0
    alpha: float = 0.5
    unlabeled: list = dataclasses.field(default_factory=list)
    unlabeled_max: int = 20_000
    augment: int = 0
    augment_rate: float = 0.15
    hidden_weight: float = 0.0
    attention_weight: float = 0.0
    layer_map: list = dataclasses.field(default_factory=list)

    def validate(self, where=""):
        if not self.teacher:
            raise ValueError("teacher: name the teacher's fine-tuning run "
                             "directory or export.")
        if not self.temperature > 0:
            raise ValueError(f"temperature = {self.temperature}: must be "
                             "> 0.")
        if not 0.0 <= self.alpha <= 1.0:
            raise ValueError(f"alpha = {self.alpha}: must be in [0, 1].")
        for name in ("layers", "layer_map"):
            value = getattr(self, name)
            if any(not isinstance(i, int) or i < 0 for i in value):
                raise ValueError(f"{name} = {value}: block indices >= 0.")
        if len(set(self.layers)) != len(self.layers):
            raise ValueError(f"layers = {self.layers}: each block once.")
        if self.augment < 0:
            raise ValueError(f"augment = {self.augment}: must be >= 0.")
        if not 0.0 < self.augment_rate <= 1.0:
            raise ValueError(f"augment_rate = {self.augment_rate}: must be "
                             "in (0, 1].")
        if self.hidden_weight < 0 or self.attention_weight < 0:
            raise ValueError("hidden_weight and attention_weight must be "
                             ">= 0.")
        return super().validate(where)

    @property
    def matches_layers(self):
        return self.hidden_weight > 0 or self.attention_weight > 0


def load(path, overrides=()):
    """A validated `DistillConfig` from YAML plus `key=value` overrides."""
    return config_lib.load_config(path, DistillConfig, overrides)


def load_dict(data):
    """A validated `DistillConfig` from a mapping (a notebook's config)."""
    return config_lib.from_dict(DistillConfig, data).validate()
