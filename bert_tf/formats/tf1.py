"""The original Google BERT (TF1) checkpoints: `bert_config.json` +
`bert_model.ckpt`."""

import json

import tensorflow as tf

from bert_tf.formats.files import (checkpoint_prefix, find_file,
                                       read_checkpoint)
from bert_tf.formats.json_config import (encoder_config_from_json,
                                             encoder_config_to_tf1_json)
from bert_tf.storage import GPath

def read_tf1(path):
    """Reads an original BERT checkpoint (`bert_config.json` +
    `bert_model.ckpt`).

    Args:
        path: the directory holding both, or the checkpoint prefix (with
            bert_config.json in the same directory).

    Returns:
        (EncoderConfig, canonical weights dict, list of ignored names).
    """
    prefix = checkpoint_prefix(path, ("bert_model.ckpt",))
    config = encoder_config_from_json(
        find_file(prefix.parent, ("bert_config.json", "config.json"),
                   "bert_config.json"), "tf1")
    reader = read_checkpoint(prefix)
    weights, ignored = {}, []
    for name in reader.get_variable_to_shape_map():
        if name.startswith(("bert/", "cls/predictions/",
                            "cls/seq_relationship/")) and not name.endswith(
                                ("/adam_m", "/adam_v")):
            weights[name] = reader.get_tensor(name)
        elif name != "global_step":
            ignored.append(name)
    return config, weights, sorted(ignored)


def save_tf1_checkpoint(weights, config, directory):
    """Writes canonical weights as an original-format BERT checkpoint.

    Uses `tf.compat.v1` variables and `Saver`, as the original code did, so
    the result loads in google-research/bert. Writes `bert_config.json`
    and `bert_model.ckpt.*`; returns the checkpoint prefix.
    """
    directory = GPath(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "bert_config.json").write_text(
        json.dumps(encoder_config_to_tf1_json(config), indent=2) + "\n")
    prefix = directory / "bert_model.ckpt"
    with tf.Graph().as_default():
        variables = [tf.compat.v1.Variable(value, name=name)
                     for name, value in sorted(weights.items())]
        saver = tf.compat.v1.train.Saver(variables)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            saver.save(session, str(prefix), write_meta_graph=False)
    return prefix
