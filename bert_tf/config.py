"""Configs: plain dataclasses, YAML loading, dotted overrides and validation.
The model's (`bert_tf.config_model`) and the runs' (`bert_tf.config_runs`)
are importable from here, the one config API.

Every config file is read with `yaml.safe_load`, turned into dataclasses by
`from_dict` (an unknown key is an error that lists the valid ones), then
checked by each dataclass's `validate()`. Overrides use dotted paths, as on
the command line: `--set encoder.num_layers=4`.
"""

# Re-exported: bert_tf.config is the API.
from bert_tf.config_io import (  # noqa: F401
    apply_overrides, from_dict, read_yaml, save_config, to_dict)
from bert_tf.config_model import (  # noqa: F401
    ATTENTION_KINDS, ENCODER_CEILINGS, FAMILIES, HIDDEN_ACTIVATIONS,
    MAX_PARAMETERS, EncoderConfig, ModelConfig, WeightsConfig, load_config,
    load_model_preset, load_preset)
from bert_tf.config_runs import (  # noqa: F401
    OPTIMIZERS, PRECISIONS, STRATEGIES, DataConfig, FinetuneConfig,
    OptimizerConfig, PretrainConfig, TrainerConfig)

