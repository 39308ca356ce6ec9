"""Encoder configs from and to the json files of HF (BERT, ELECTRA,
DistilBERT) and the original TF1 code."""

import json

from bert_tf.config import EncoderConfig
from bert_tf.config_io import parse_config_file

# HF spells the exact (erf) GELU "gelu"; the original TF1 code's "gelu" is
# the tanh approximation.
_HF_ACTIVATIONS = {"gelu": "gelu_exact", "gelu_new": "gelu",
                   "gelu_pytorch_tanh": "gelu", "gelu_fast": "gelu",
                   "relu": "relu"}
_TF1_ACTIVATIONS = {"gelu": "gelu", "gelu_exact": "gelu_exact",
                    "relu": "relu"}


# DistilBERT's config keys in BERT's spelling; it has no segment embedding
# and a fixed LayerNorm epsilon.
_DISTILBERT_KEYS = {"dim": "hidden_size", "n_layers": "num_hidden_layers",
                    "n_heads": "num_attention_heads",
                    "hidden_dim": "intermediate_size",
                    "activation": "hidden_act",
                    "dropout": "hidden_dropout_prob",
                    "attention_dropout": "attention_probs_dropout_prob"}


FAMILY = ("bert", "electra", "distilbert")


def bert_keys(data, path="config.json"):
    """An HF config dict of the BERT family with BERT's keys."""
    family = data.get("model_type", "bert")
    if family not in FAMILY:
        raise ValueError(
            f"Config file {path}: {family} is not a BERT-family model "
            f"(model_type = {family!r}; read here: {', '.join(FAMILY)}; "
            "others differ in more than names, e.g. RoBERTa's position "
            "offset).")
    if family == "distilbert":
        data = {_DISTILBERT_KEYS.get(k, k): v for k, v in data.items()}
        data.update(type_vocab_size=0, layer_norm_eps=1e-12)
    return data


def encoder_config_from_json(path, flavor):
    """Reads an HF `config.json` or TF1 `bert_config.json` into an
    `EncoderConfig`.

    Args:
        path: the json file.
        flavor: `hf` or `tf1` (decides what `gelu` means).
    """
    data = parse_config_file(path, json.loads, (json.JSONDecodeError,),
                             "JSON")
    return encoder_config_from_dict(data, path, flavor)


def encoder_config_from_dict(data, path, flavor):
    """`encoder_config_from_json` of the parsed json `data` (of `path`):
    the family, keys, types and sizes checked (`EncoderConfig.validate`)
    before anything is read or built."""
    if not isinstance(data, dict):
        raise ValueError(f"Config file {path} does not hold a JSON object.")
    activations = _HF_ACTIVATIONS if flavor == "hf" else _TF1_ACTIVATIONS
    data = bert_keys(data, path)
    required = ("vocab_size", "hidden_size", "num_hidden_layers",
                "num_attention_heads", "intermediate_size")
    missing = [k for k in required if k not in data]
    if missing:
        raise ValueError(
            f"Config file {path} lacks {', '.join(missing)}: it is not a BERT "
            "config.json / bert_config.json.")
    if data.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError(
            f"Config file {path}: position_embedding_type = "
            f"{data['position_embedding_type']!r}; only 'absolute' (BERT's "
            "learned positions) is supported.")
    act = data.get("hidden_act", "gelu")
    if act not in activations:
        raise ValueError(
            f"Config file {path}: hidden_act = {act!r} is not supported; "
            f"known: {', '.join(activations)}.")
    config = EncoderConfig(
        vocab_size=data["vocab_size"], hidden_size=data["hidden_size"],
        num_layers=data["num_hidden_layers"],
        num_heads=data["num_attention_heads"],
        intermediate_size=data["intermediate_size"],
        max_position_embeddings=data.get("max_position_embeddings", 512),
        type_vocab_size=data.get("type_vocab_size", 2),
        hidden_act=activations[act],
        hidden_dropout=data.get("hidden_dropout_prob", 0.1),
        attention_dropout=data.get("attention_probs_dropout_prob", 0.1),
        initializer_range=data.get("initializer_range", 0.02),
        layer_norm_eps=data.get("layer_norm_eps", 1e-12),
        embedding_size=(0 if data.get("embedding_size") in (
            None, data["hidden_size"]) else data["embedding_size"]))
    try:
        return config.validate()
    except ValueError as e:
        raise ValueError(f"Config file {path}: {e}") from None


def encoder_config_to_tf1_json(config):
    """An `EncoderConfig` as the original bert_config.json dict."""
    return {
        "attention_probs_dropout_prob": config.attention_dropout,
        "hidden_act": config.hidden_act,
        "hidden_dropout_prob": config.hidden_dropout,
        "hidden_size": config.hidden_size,
        "initializer_range": config.initializer_range,
        "intermediate_size": config.intermediate_size,
        "max_position_embeddings": config.max_position_embeddings,
        "num_attention_heads": config.num_heads,
        "num_hidden_layers": config.num_layers,
        "type_vocab_size": config.type_vocab_size,
        "vocab_size": config.vocab_size,
        "layer_norm_eps": config.layer_norm_eps,
    }
