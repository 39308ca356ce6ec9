"""Weights in the formats of others, read into one canonical form
(`canonical.py`: the original TF1 variable names and layouts), which one
table maps onto our layers. No model class is imported here, so the models
themselves load weights by name (`BertEncoder.from_preset`).

- `hf.py` (with `torch_zip.py` for `pytorch_model.bin` without torch):
  BERT, ELECTRA and DistilBERT in HF's layout;
- `tf1.py`: the original `bert_model.ckpt` + `bert_config.json`;
- `json_config.py`: their config files;
- `files.py`: finding a checkpoint's files.

Our own checkpoint directories and `bert-tf convert` are in
`bert_tf.checkpoints`.
"""

from bert_tf import sources
from bert_tf.formats.files import find_vocab
from bert_tf.formats.hf import read_hf
from bert_tf.formats.tf1 import read_tf1
from bert_tf.storage import GPath

NAMED_READERS = {"hf": read_hf, "tf1": read_tf1}


def read_named(spec, log=print):
    """(EncoderConfig, canonical weights, vocab path) of a checkpoint name
    (`hf://ORG/NAME`, a preset with weights, `sample:NAME`) or an `hf:PATH`
    / `tf1:PATH`; a bare directory is read as HF's layout.

    Raises:
        ValueError: `spec` is none of those (one line that says what is).
    """
    resolved = sources.resolve(spec, log)
    layout, _, path = str(resolved).partition(":")
    if layout not in NAMED_READERS or not path:
        if not (GPath(resolved).expanduser() / "config.json").is_file():
            raise ValueError(
                f"{spec}: not a checkpoint name (hf://ORG/NAME, a preset "
                "with weights, sample:NAME) nor an hf:PATH / tf1:PATH / "
                "directory with config.json; bert_tf checkpoint "
                "directories load with bert_tf.load_encoder.")
        layout, path = "hf", str(GPath(resolved).expanduser())
    config, weights, _ = NAMED_READERS[layout](path)
    return config, weights, find_vocab(path)


__all__ = ["NAMED_READERS", "find_vocab", "read_hf", "read_named",
           "read_tf1"]
