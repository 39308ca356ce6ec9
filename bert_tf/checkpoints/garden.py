"""Model Garden `BertEncoderV2` checkpoints, read by object path (no
tf_keras import), and our weights in a Garden encoder for parity."""

import tensorflow as tf

from bert_tf.formats.canonical import export_weights
from bert_tf.formats.files import (checkpoint_prefix, find_file,
                                       read_checkpoint)
from bert_tf.formats.json_config import encoder_config_from_json

def _garden_spec(num_layers):
    """(attribute path in BertEncoderV2, canonical name) for every weight.

    Garden's attention uses EinsumDense: q/k/v kernels [H, A, H/A], biases
    [A, H/A], output kernel [A, H/A, H]; the canonical ones are [H, H] / [H].
    """
    entries = [
        ("_embedding_layer/embeddings", "bert/embeddings/word_embeddings"),
        ("_position_embedding_layer/embeddings",
         "bert/embeddings/position_embeddings"),
        ("_type_embedding_layer/embeddings",
         "bert/embeddings/token_type_embeddings"),
        ("_embedding_norm_layer/gamma", "bert/embeddings/LayerNorm/gamma"),
        ("_embedding_norm_layer/beta", "bert/embeddings/LayerNorm/beta"),
        ("_pooler_layer/kernel", "bert/pooler/dense/kernel"),
        ("_pooler_layer/bias", "bert/pooler/dense/bias"),
    ]
    for i in range(num_layers):
        g, c = f"_transformer_layers/{i}/", f"bert/encoder/layer_{i}/"
        for name in ("query", "key", "value"):
            entries += [(g + f"_attention_layer/_{name}_dense/{part}",
                      c + f"attention/self/{name}/{part}")
                     for part in ("kernel", "bias")]
        entries += [
            (g + "_attention_layer/_output_dense/kernel",
             c + "attention/output/dense/kernel"),
            (g + "_attention_layer/_output_dense/bias",
             c + "attention/output/dense/bias"),
            (g + "_attention_layer_norm/gamma",
             c + "attention/output/LayerNorm/gamma"),
            (g + "_attention_layer_norm/beta",
             c + "attention/output/LayerNorm/beta"),
            (g + "_intermediate_dense/kernel", c + "intermediate/dense/kernel"),
            (g + "_intermediate_dense/bias", c + "intermediate/dense/bias"),
            (g + "_output_dense/kernel", c + "output/dense/kernel"),
            (g + "_output_dense/bias", c + "output/dense/bias"),
            (g + "_output_layer_norm/gamma", c + "output/LayerNorm/gamma"),
            (g + "_output_layer_norm/beta", c + "output/LayerNorm/beta"),
        ]
    return entries


_GARDEN_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"


def read_garden(path):
    """Reads a Model Garden `BertEncoderV2` checkpoint (saved as
    `tf.train.Checkpoint(encoder=...)`, possibly nested, e.g. a pretrainer's
    `model/encoder`), with its `bert_config.json` (or `config.json`) beside.

    No tf_keras import is needed: variables are read by their object paths.

    Returns:
        (EncoderConfig, canonical weights dict, list of ignored names).
    """
    prefix = checkpoint_prefix(path, ("bert_model.ckpt", "ckpt"))
    config = encoder_config_from_json(
        find_file(prefix.parent, ("bert_config.json", "config.json"),
                   "bert_config.json"), "tf1")
    reader = read_checkpoint(prefix)
    keys = reader.get_variable_to_shape_map()
    anchor = "_embedding_layer/embeddings" + _GARDEN_SUFFIX
    roots = sorted((k[:-len(anchor)] for k in keys if k.endswith(anchor)
                    and "_position" not in k and "_type" not in k), key=len)
    if not roots:
        raise ValueError(
            f"{prefix} has no Model Garden encoder variables (no "
            f"'*/{anchor}'): not a BertEncoderV2 checkpoint.")
    if any(k.startswith(roots[0] + "_embedding_projection") for k in keys):
        raise ValueError(
            f"{prefix} uses a factorized embedding (embedding_width != "
            "hidden_size), which the BERT architecture does not have.")
    weights, used = {}, set()
    hidden = config.hidden_size
    for attr, canonical in _garden_spec(config.num_layers):
        key = roots[0] + attr + _GARDEN_SUFFIX
        if key not in keys:
            raise ValueError(
                f"{prefix} has no variable {key!r}, which a "
                f"{config.num_layers}-layer encoder needs: the checkpoint and "
                "its config do not belong together.")
        value = reader.get_tensor(key)
        if value.ndim == 3:  # EinsumDense kernels, square once flattened.
            value = value.reshape(hidden, hidden)
        elif "_attention_layer/" in attr and attr.endswith("/bias"):
            value = value.reshape(-1)
        weights[canonical] = value
        used.add(key)
    ignored = sorted(k for k in keys if k not in used and k.startswith(
        roots[0]) and k.endswith(_GARDEN_SUFFIX))
    return config, weights, ignored


def to_garden_encoder(encoder):
    """A Model Garden `BertEncoderV2` (tf_keras) holding our weights.

    For parity tests and benchmarks side by side; needs the `garden` extra.
    """
    import tf_keras
    from official.nlp.modeling import networks

    cfg = encoder.config
    approximate = cfg.hidden_act == "gelu"
    garden = networks.BertEncoderV2(
        vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size,
        num_layers=cfg.num_layers, num_attention_heads=cfg.num_heads,
        max_sequence_length=cfg.max_position_embeddings,
        type_vocab_size=cfg.type_vocab_size, inner_dim=cfg.intermediate_size,
        inner_activation=(
            (lambda x: tf_keras.activations.gelu(x, approximate=approximate))
            if cfg.hidden_act != "relu" else "relu"),
        output_dropout=cfg.hidden_dropout,
        attention_dropout=cfg.attention_dropout,
        norm_first=False)
    ones = tf.ones((1, 2), tf.int32)
    garden(dict(input_word_ids=ones, input_mask=ones, input_type_ids=ones))
    weights = export_weights(encoder)
    for attr, canonical in _garden_spec(cfg.num_layers):
        *path, variable_name = attr.split("/")
        layer = garden
        for part in path:
            layer = layer[int(part)] if part.isdigit() else getattr(layer,
                                                                    part)
        # Checkpoint keys use the variable's name, not a Python attribute.
        target, = [w for w in layer.weights
                   if w.name.split(":")[0].endswith("/" + variable_name) or
                   w.name.split(":")[0] == variable_name]
        target.assign(weights[canonical].reshape(target.shape))
    if cfg.layer_norm_eps != 1e-12:
        raise ValueError("Model Garden's BertEncoderV2 fixes LayerNorm "
                         "epsilon at 1e-12.")
    return garden
