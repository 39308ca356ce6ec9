"""Our own checkpoint directories: `config.yaml`, `vocab.txt` and
`model.ckpt.*` in the layout of `checkpoints/layout.py`; reading
them back with checks that name what does not fit."""

import dataclasses

import tensorflow as tf

from bert_tf import config as config_lib
from bert_tf.formats.files import checkpoint_prefix, read_checkpoint
from bert_tf.config import EncoderConfig
from bert_tf.config_io import CONFIG_FILE, VOCAB_FILE, WEIGHTS_PREFIX
from bert_tf.checkpoints.layout import (ENCODER_ROOT, STATE_ROOTS,
                                              model_checkpoint)
from bert_tf.models.encoder import BertEncoder
from bert_tf.models.pretrainer import BertPretrainer
from bert_tf.storage import GPath
from bert_tf.text.vocab import read_vocab

MASKED_LM_ROOT, NEXT_SENTENCE_ROOT = BertPretrainer.CHECKPOINT_ROOTS


def _variable_keys(prefix):
    """{model path: checkpoint key} for the model variables of a checkpoint.

    Paths follow the object graph (e.g. `encoder/transformer_layer_0/
    attention/qkv/kernel`, Keras's leading underscores dropped), whatever
    key TF gave each variable: in a trainer checkpoint that is often a
    path through the optimizer, which also references every variable.
    """
    from tensorflow.core.protobuf import trackable_object_graph_pb2

    reader = read_checkpoint(prefix)
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
    keys = {}
    stack = [(child.node_id, (child.local_name,))
             for child in graph.nodes[0].children
             if child.local_name not in STATE_ROOTS]
    while stack:
        node_id, path = stack.pop()
        node = graph.nodes[node_id]
        for attribute in node.attributes:
            if attribute.name == "VARIABLE_VALUE":
                keys["/".join(p.lstrip("_") for p in path)] = \
                    attribute.checkpoint_key
        if len(path) < 12:
            stack.extend((child.node_id, path + (child.local_name,))
                         for child in node.children)
    return keys, reader


def read_model_variables(prefix):
    """{model path: numpy array} of a bert_tf checkpoint's model variables.

    Examples:
        >>> import tempfile
        >>> encoder = BertEncoder.from_preset("bert_tiny")
        >>> prefix = model_checkpoint(encoder).write(tempfile.mkdtemp() + "/ckpt")
        >>> read_model_variables(prefix)["encoder/pooler/kernel"].shape
        (128, 128)
    """
    prefix = checkpoint_prefix(prefix, (WEIGHTS_PREFIX,))
    keys, reader = _variable_keys(prefix)
    return {path: reader.get_tensor(key) for path, key in keys.items()}


def _normalized_keys(prefix):
    """{model path: shape} of a checkpoint's model variables."""
    keys, reader = _variable_keys(prefix)
    shapes = reader.get_variable_to_shape_map()
    return {path: tuple(shapes[key]) for path, key in keys.items()}


def _expected_keys(encoder, heads):
    expected = {}
    for name, layer in encoder.checkpoint_items().items():
        for w in layer.weights:
            expected[f"{ENCODER_ROOT}/{name}/{w.path.split('/', 1)[1]}"] = w
    for root, head in heads.items():
        if head is not None:
            for w in head.weights:
                expected[f"{root}/{w.path.split('/', 1)[1]}"] = w
    return expected


def restore_model(prefix, encoder, masked_lm=None, next_sentence=None,
                  **heads):
    """Restores our checkpoint into (encoder, heads), checking first.

    Args:
        prefix: checkpoint prefix or directory.
        encoder: a `BertEncoder`.
        masked_lm, next_sentence: pre-training heads to restore too.
        **heads: other heads by checkpoint root (`classifier=...`).

    A variable missing from the checkpoint or with another shape raises a
    ValueError that names it; nothing is restored in that case.
    """
    prefix = checkpoint_prefix(prefix, (WEIGHTS_PREFIX,))
    keys, reader = _variable_keys(prefix)
    shapes = reader.get_variable_to_shape_map()
    found = {path: tuple(shapes[key]) for path, key in keys.items()}
    heads = dict(masked_lm=masked_lm, next_sentence=next_sentence, **heads)
    expected = _expected_keys(encoder, heads)
    for key, variable in expected.items():
        if key not in found:
            raise ValueError(
                f"Checkpoint {prefix} has no variable {key!r}: it was written "
                "for another architecture than this config describes.")
        if found[key] != tuple(variable.shape):
            raise ValueError(
                f"Checkpoint {prefix}: variable {key!r} has shape "
                f"{found[key]}, the config asks for {tuple(variable.shape)}: "
                "the checkpoint and the config do not belong together.")
    dtypes = reader.get_variable_to_dtype_map()
    if any(variable.dtype != dtypes[keys[key]].name
           for key, variable in expected.items()):
        # Another precision (a bf16 export of fp32 weights): TF's restore
        # does not cast, so each value is read and cast here.
        for key, variable in expected.items():
            variable.assign(tf.cast(reader.get_tensor(keys[key]),
                                    variable.dtype))
        return prefix
    status = model_checkpoint(encoder, **heads).read(str(prefix))
    status.expect_partial()
    return prefix


@dataclasses.dataclass
class Pretrained:
    """What a checkpoint directory holds once loaded."""

    config: EncoderConfig
    vocab: object
    encoder: object
    pretrainer: object = None
    directory: GPath = None


def has_heads(prefix):
    """Which pre-training heads a checkpoint of ours contains."""
    keys = _normalized_keys(prefix)
    return (any(k.startswith(MASKED_LM_ROOT + "/") for k in keys),
            any(k.startswith(NEXT_SENTENCE_ROOT + "/") for k in keys))


def save_pretrained(directory, encoder, vocab, pretrainer=None):
    """Writes config.yaml, vocab.txt and model.ckpt.* into `directory`.

    Returns:
        the list of paths written.
    """
    directory = GPath(directory)
    directory.mkdir(parents=True, exist_ok=True)
    config_path = config_lib.save_config(
        {"encoder": config_lib.to_dict(encoder.config)},
        directory / CONFIG_FILE)
    vocab_path = vocab.save(directory / VOCAB_FILE)
    heads = pretrainer.checkpoint_heads() if pretrainer is not None else {}
    prefix = model_checkpoint(encoder, **heads).write(
        str(directory / WEIGHTS_PREFIX))
    return [GPath(config_path), vocab_path, GPath(prefix + ".index")]


def load_pretrained(directory, with_heads=True, dtype=None):
    """Loads a directory written by `save_pretrained` / `bert-tf convert`.

    Args:
        directory: holds config.yaml, vocab.txt, model.ckpt.*.
        with_heads: also build a `BertPretrainer` when the checkpoint has
            the masked-LM head.
        dtype: dtype policy for the built models.

    Returns:
        a `Pretrained` (config, vocab, encoder, pretrainer or None).
    """
    directory = GPath(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"Checkpoint directory {directory} does not "
                                "exist.")
    config = config_lib.load_config(directory / CONFIG_FILE).encoder
    vocab = read_vocab(directory / VOCAB_FILE)
    check_vocab_size(vocab, config, directory / VOCAB_FILE)
    prefix = checkpoint_prefix(directory, (WEIGHTS_PREFIX,))
    encoder = BertEncoder.from_config_object(config, dtype=dtype)
    mlm, nsp = has_heads(prefix)
    pretrainer = None
    if with_heads and mlm:
        pretrainer = BertPretrainer(encoder, nsp=nsp, dtype=dtype)
        restore_model(prefix, encoder, pretrainer.masked_lm,
                      pretrainer.next_sentence)
    else:
        restore_model(prefix, encoder)
    return Pretrained(config, vocab, encoder, pretrainer, directory)


def check_vocab_size(vocab, config, path):
    if vocab.size != config.vocab_size:
        raise ValueError(
            f"Vocab file {path} has {vocab.size} tokens but the model's token "
            f"embedding has {config.vocab_size} rows: this vocab does not "
            "belong to this checkpoint.")
