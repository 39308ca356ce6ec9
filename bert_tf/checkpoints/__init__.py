"""Weights in and out: HF (safetensors / PyTorch .bin), the original Google
TF1 checkpoints, Model Garden `BertEncoderV2` checkpoints, and our own.

Every foreign format is read into one canonical form (`canonical.py`:
original TF1 variable names and layouts), which one table maps onto our
layers. One module per format:

- `native.py`: our checkpoint directories (`config.yaml`, `vocab.txt`,
  `model.ckpt.*` in the layout of `checkpoints/layout.py`);
- `hf.py` (with `torch_zip.py` for `pytorch_model.bin` without torch);
- `tf1.py`: the original `bert_model.ckpt` + `bert_config.json`;
- `garden.py`: Model Garden `BertEncoderV2`;
- `convert.py`: `bert-tf convert`, any of the foreign formats into ours.
"""

# === Canonical names and foreign formats ===
from bert_tf.formats.canonical import assign_weights, export_weights
# === Conversion ===
from bert_tf.checkpoints.convert import (READERS, SOURCES, checkpoint_files,
                                         convert, find_vocab, load_encoder)
from bert_tf.formats.files import checkpoint_prefix
from bert_tf.checkpoints.garden import read_garden, to_garden_encoder
from bert_tf.formats.hf import hf_name_to_canonical, read_hf
from bert_tf.formats.json_config import (encoder_config_from_json,
                                             encoder_config_to_tf1_json)
# === Our checkpoint directories ===
from bert_tf.checkpoints.native import (Pretrained, check_vocab_size,
                                        has_heads, load_pretrained,
                                        read_model_variables, restore_model,
                                        save_pretrained)
from bert_tf.formats.tf1 import read_tf1, save_tf1_checkpoint
from bert_tf.formats.torch_zip import read_torch_state_dict
from bert_tf.config_io import CONFIG_FILE, VOCAB_FILE, WEIGHTS_PREFIX
from bert_tf.checkpoints.layout import model_checkpoint

__all__ = [
    "CONFIG_FILE", "Pretrained", "READERS", "SOURCES",
    "VOCAB_FILE", "WEIGHTS_PREFIX", "assign_weights", "check_vocab_size",
    "checkpoint_files",
    "checkpoint_prefix", "convert", "encoder_config_from_json",
    "encoder_config_to_tf1_json", "export_weights", "find_vocab",
    "has_heads", "hf_name_to_canonical", "load_encoder", "load_pretrained",
    "model_checkpoint", "read_garden", "read_hf", "read_model_variables",
    "read_tf1", "read_torch_state_dict", "restore_model", "save_pretrained",
    "save_tf1_checkpoint", "to_garden_encoder",
]
