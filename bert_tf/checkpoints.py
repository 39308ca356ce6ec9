"""Weights in and out: HF (safetensors / PyTorch .bin), the original Google
TF1 checkpoints, Model Garden `BertEncoderV2` checkpoints, and our own.

Every foreign format is read into one canonical form: a dict from the
original TF1 BERT variable names (`bert/encoder/layer_0/attention/self/
query/kernel`, `cls/predictions/output_bias`, ...) to numpy arrays in the
TF1 layouts. One table (`_model_spec`) maps those names onto our layers,
in both directions.

Our own checkpoint directory (what `bert-tf convert` writes and fine-tuning
reads) holds `config.yaml`, `vocab.txt` and `model.ckpt.*` written by
`tf.train.Checkpoint(encoder=..., masked_lm=..., next_sentence=...)`.
"""

import collections
import dataclasses
import json
import pickle
import re
import zipfile
from pathlib import Path

import numpy as np
import tensorflow as tf

from bert_tf import config as config_lib
from bert_tf.config import EncoderConfig
from bert_tf.text.vocab import read_vocab

SOURCES = ("hf", "tf1", "garden")
CONFIG_FILE = "config.yaml"
VOCAB_FILE = "vocab.txt"
WEIGHTS_PREFIX = "model.ckpt"

# ---------------------------------------------------------------------------
# Canonical names <-> our layers
# ---------------------------------------------------------------------------

COPY, TRANSPOSE, QKV = "copy", "transpose", "qkv"


def _model_spec(encoder, masked_lm=None, next_sentence=None):
    """(canonical names, our variable, how they relate) for every weight."""
    emb = encoder.embeddings
    spec = [
        (["bert/embeddings/word_embeddings"], emb.word_embeddings.embeddings,
         COPY),
        (["bert/embeddings/token_type_embeddings"],
         emb.type_embeddings.embeddings, COPY),
        (["bert/embeddings/position_embeddings"],
         emb.position_embeddings.embeddings, COPY),
        (["bert/embeddings/LayerNorm/gamma"], emb.layer_norm.gamma, COPY),
        (["bert/embeddings/LayerNorm/beta"], emb.layer_norm.beta, COPY),
    ]
    for i, block in enumerate(encoder.transformer_layers):
        p = f"bert/encoder/layer_{i}/"
        attn = p + "attention/self/"
        spec += [
            ([attn + n + "/kernel" for n in ("query", "key", "value")],
             block.attention.qkv.kernel, QKV),
            ([attn + n + "/bias" for n in ("query", "key", "value")],
             block.attention.qkv.bias, QKV),
            ([p + "attention/output/dense/kernel"],
             block.attention.output_dense.kernel, COPY),
            ([p + "attention/output/dense/bias"],
             block.attention.output_dense.bias, COPY),
            ([p + "attention/output/LayerNorm/gamma"],
             block.attention_norm.gamma, COPY),
            ([p + "attention/output/LayerNorm/beta"],
             block.attention_norm.beta, COPY),
            ([p + "intermediate/dense/kernel"], block.intermediate.kernel,
             COPY),
            ([p + "intermediate/dense/bias"], block.intermediate.bias, COPY),
            ([p + "output/dense/kernel"], block.output_dense.kernel, COPY),
            ([p + "output/dense/bias"], block.output_dense.bias, COPY),
            ([p + "output/LayerNorm/gamma"], block.output_norm.gamma, COPY),
            ([p + "output/LayerNorm/beta"], block.output_norm.beta, COPY),
        ]
    spec += [
        (["bert/pooler/dense/kernel"], encoder.pooler.kernel, COPY),
        (["bert/pooler/dense/bias"], encoder.pooler.bias, COPY),
    ]
    if masked_lm is not None:
        spec += [
            (["cls/predictions/transform/dense/kernel"],
             masked_lm.transform.kernel, COPY),
            (["cls/predictions/transform/dense/bias"],
             masked_lm.transform.bias, COPY),
            (["cls/predictions/transform/LayerNorm/gamma"],
             masked_lm.layer_norm.gamma, COPY),
            (["cls/predictions/transform/LayerNorm/beta"],
             masked_lm.layer_norm.beta, COPY),
            (["cls/predictions/output_bias"], masked_lm.output_bias, COPY),
        ]
    if next_sentence is not None:
        # TF1 stores the NSP weights as [2, H] (used with transpose_b).
        spec += [
            (["cls/seq_relationship/output_weights"],
             next_sentence.dense.kernel, TRANSPOSE),
            (["cls/seq_relationship/output_bias"], next_sentence.dense.bias,
             COPY),
        ]
    return spec


def export_weights(encoder, masked_lm=None, next_sentence=None):
    """Our weights as a canonical dict (original TF1 names and layouts).

    Example:
    >>> from bert_tf.models.encoder import BertEncoder
    >>> weights = export_weights(BertEncoder.from_preset("bert_tiny"))
    >>> weights["bert/encoder/layer_0/attention/self/query/kernel"].shape
    (128, 128)
    """
    weights = {}
    for names, variable, kind in _model_spec(encoder, masked_lm,
                                             next_sentence):
        value = np.asarray(variable.numpy())
        if kind == QKV:
            for name, part in zip(names, np.split(value, 3, axis=-1)):
                weights[name] = part
        elif kind == TRANSPOSE:
            weights[names[0]] = value.T
        else:
            weights[names[0]] = value
    return weights


def assign_weights(weights, encoder, masked_lm=None, next_sentence=None,
                   source="checkpoint"):
    """Loads a canonical weight dict into our layers, all-or-nothing.

    Every expected name must be present with the expected shape; otherwise a
    ValueError names the variable (and `source`) and nothing is assigned.
    """
    values = []
    for names, variable, kind in _model_spec(encoder, masked_lm,
                                             next_sentence):
        missing = [n for n in names if n not in weights]
        if missing:
            raise ValueError(
                f"{source} has no variable {missing[0]!r}, which a "
                f"{encoder.config.num_layers}-layer encoder"
                f"{' with its pre-training heads' if masked_lm else ''} "
                "needs: the checkpoint and its config do not belong "
                "together.")
        parts = [np.asarray(weights[n]) for n in names]
        if kind == QKV:
            value = np.concatenate(parts, axis=-1)
        elif kind == TRANSPOSE:
            value = parts[0].T
        else:
            value = parts[0]
        if tuple(value.shape) != tuple(variable.shape):
            got = " + ".join(str(tuple(p.shape)) for p in parts)
            raise ValueError(
                f"{source}: variable {names[0]!r} has shape {got}, but the "
                f"config asks for {tuple(variable.shape)} (as {kind}); the "
                "checkpoint and its config do not belong together.")
        values.append((variable, value))
    for variable, value in values:
        variable.assign(value.astype(variable.dtype))


# ---------------------------------------------------------------------------
# Configs from json
# ---------------------------------------------------------------------------

# HF spells the exact (erf) GELU "gelu"; the original TF1 code's "gelu" is
# the tanh approximation.
_HF_ACTIVATIONS = {"gelu": "gelu_exact", "gelu_new": "gelu",
                   "gelu_pytorch_tanh": "gelu", "gelu_fast": "gelu",
                   "relu": "relu"}
_TF1_ACTIVATIONS = {"gelu": "gelu", "gelu_exact": "gelu_exact",
                    "relu": "relu"}


def encoder_config_from_json(path, flavor):
    """Reads an HF `config.json` or TF1 `bert_config.json` into an
    `EncoderConfig`.

    Args:
        path: the json file.
        flavor: `hf` or `tf1` (decides what `gelu` means).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Config file {path} does not exist.")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"Config file {path} is not valid JSON: {e}") from e
    activations = _HF_ACTIVATIONS if flavor == "hf" else _TF1_ACTIVATIONS
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
        layer_norm_eps=data.get("layer_norm_eps", 1e-12))
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


# ---------------------------------------------------------------------------
# HF transformers: safetensors or PyTorch .bin
# ---------------------------------------------------------------------------

_HF_RULES = [(re.compile(pattern), target, transpose) for pattern, target,
             transpose in [
    (r"embeddings\.word_embeddings\.weight", "embeddings/word_embeddings",
     False),
    (r"embeddings\.position_embeddings\.weight",
     "embeddings/position_embeddings", False),
    (r"embeddings\.token_type_embeddings\.weight",
     "embeddings/token_type_embeddings", False),
    (r"(embeddings|encoder\.layer\.\d+\.attention\.output|"
     r"encoder\.layer\.\d+\.output|cls\.predictions\.transform)"
     r"\.LayerNorm\.(weight|gamma)", r"\1/LayerNorm/gamma", False),
    (r"(embeddings|encoder\.layer\.\d+\.attention\.output|"
     r"encoder\.layer\.\d+\.output|cls\.predictions\.transform)"
     r"\.LayerNorm\.(bias|beta)", r"\1/LayerNorm/beta", False),
    (r"encoder\.layer\.(\d+)\.attention\.self\.(query|key|value)\.weight",
     r"encoder/layer_\1/attention/self/\2/kernel", True),
    (r"encoder\.layer\.(\d+)\.attention\.self\.(query|key|value)\.bias",
     r"encoder/layer_\1/attention/self/\2/bias", False),
    (r"encoder\.layer\.(\d+)\.(attention\.output|intermediate|output)"
     r"\.dense\.weight", r"encoder/layer_\1/\2/dense/kernel", True),
    (r"encoder\.layer\.(\d+)\.(attention\.output|intermediate|output)"
     r"\.dense\.bias", r"encoder/layer_\1/\2/dense/bias", False),
    (r"pooler\.dense\.weight", "pooler/dense/kernel", True),
    (r"pooler\.dense\.bias", "pooler/dense/bias", False),
    (r"cls\.predictions\.transform\.dense\.weight",
     "cls/predictions/transform/dense/kernel", True),
    (r"cls\.predictions\.transform\.dense\.bias",
     "cls/predictions/transform/dense/bias", False),
    (r"cls\.predictions\.bias", "cls/predictions/output_bias", False),
    (r"cls\.seq_relationship\.weight", "cls/seq_relationship/output_weights",
     False),
    (r"cls\.seq_relationship\.bias", "cls/seq_relationship/output_bias",
     False),
]]
# Present in HF files but carrying nothing new (buffers, tied copies).
_HF_REDUNDANT = re.compile(
    r"(embeddings\.position_ids|cls\.predictions\.decoder\.(weight|bias))$")


def hf_name_to_canonical(name):
    """HF parameter name -> (canonical name, transpose?) or None.

    Example:
    >>> hf_name_to_canonical("bert.encoder.layer.3.output.dense.weight")
    ('bert/encoder/layer_3/output/dense/kernel', True)
    """
    short = name[len("bert."):] if name.startswith("bert.") else name
    for pattern, target, transpose in _HF_RULES:
        if pattern.fullmatch(short):
            canonical = pattern.sub(target, short).replace(".", "/")
            canonical = re.sub(r"layer/(\d+)/", r"layer_\1/", canonical)
            if not canonical.startswith("cls/"):
                canonical = "bert/" + canonical
            return canonical, transpose
    return None


_TORCH_DTYPES = {"FloatStorage": np.float32, "HalfStorage": np.float16,
                 "DoubleStorage": np.float64, "LongStorage": np.int64,
                 "IntStorage": np.int32, "BFloat16Storage": "bfloat16",
                 "ByteStorage": np.uint8, "BoolStorage": np.bool_}


def read_torch_state_dict(path):
    """Reads a PyTorch zip checkpoint (`pytorch_model.bin`) without torch.

    A restricted unpickler: only tensors, storages and ordered dicts are
    rebuilt, so a malicious pickle cannot run code.
    """
    path = Path(path)
    if not zipfile.is_zipfile(path):
        raise ValueError(
            f"{path} is not a PyTorch zip checkpoint (torch >= 1.6 format); "
            "convert it to safetensors first.")
    with zipfile.ZipFile(path) as archive:
        pickles = [n for n in archive.namelist() if n.endswith("/data.pkl")]
        if not pickles:
            raise ValueError(f"{path} holds no data.pkl: not a PyTorch "
                             "checkpoint.")
        root = pickles[0][:-len("data.pkl")]

        def load_storage(storage_type, key):
            dtype = _TORCH_DTYPES[storage_type]
            raw = archive.read(f"{root}data/{key}")
            if dtype == "bfloat16":
                bits = np.frombuffer(raw, np.uint16).astype(np.uint32) << 16
                return bits.view(np.float32)
            return np.frombuffer(raw, dtype)

        def rebuild_tensor(storage, offset, size, stride, *unused):
            if not size:
                return storage[offset].copy()
            item = storage.itemsize
            return np.lib.stride_tricks.as_strided(
                storage[offset:], shape=tuple(size),
                strides=tuple(s * item for s in stride)).copy()

        class Unpickler(pickle.Unpickler):
            def find_class(self, module, name):
                if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
                    return rebuild_tensor
                if (module, name) == ("torch._utils", "_rebuild_parameter"):
                    return lambda data, *unused: data
                if (module, name) == ("collections", "OrderedDict"):
                    return collections.OrderedDict
                if module == "torch" and name in _TORCH_DTYPES:
                    return name
                raise pickle.UnpicklingError(
                    f"{path}: refusing to load {module}.{name} (only tensors "
                    "are read from PyTorch checkpoints).")

            def persistent_load(self, pid):
                _, storage_type, key, _location, _numel = pid
                return load_storage(storage_type, key)

        with archive.open(pickles[0]) as f:
            state = Unpickler(f).load()
    if not isinstance(state, dict):
        raise ValueError(f"{path} does not hold a state dict of tensors.")
    return state


def _find_file(directory, names, what):
    for name in names:
        if (directory / name).is_file():
            return directory / name
    raise FileNotFoundError(
        f"No {what} in {directory} (looked for {', '.join(names)}).")


def read_hf(path):
    """Reads HF BERT weights (`BertModel`, `BertForPreTraining`,
    `BertForMaskedLM`, or any model with a `bert.` trunk).

    Args:
        path: a directory with `config.json` and `model.safetensors` or
            `pytorch_model.bin`, or one of those weight files.

    Returns:
        (EncoderConfig, canonical weights dict, list of ignored names).
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"HF checkpoint {path} does not exist.")
    directory = path if path.is_dir() else path.parent
    weights_file = path if path.is_file() else _find_file(
        directory, ("model.safetensors", "pytorch_model.bin"),
        "HF weights file")
    config = encoder_config_from_json(
        _find_file(directory, ("config.json",), "HF config.json"), "hf")
    if weights_file.suffix == ".safetensors":
        from safetensors.numpy import load_file
        try:
            tensors = load_file(str(weights_file))
        except Exception as e:  # safetensors raises its own error types.
            raise ValueError(
                f"{weights_file} is not a readable safetensors file: {e}"
            ) from None
    else:
        tensors = read_torch_state_dict(weights_file)
    weights, ignored = {}, []
    for name, value in tensors.items():
        mapped = hf_name_to_canonical(name)
        if mapped is None:
            if not _HF_REDUNDANT.search(name):
                ignored.append(name)
            continue
        canonical, transpose = mapped
        value = np.asarray(value, dtype=np.float32)
        weights[canonical] = value.T if transpose else value
    return config, weights, ignored


# ---------------------------------------------------------------------------
# Original Google TF1 checkpoints
# ---------------------------------------------------------------------------

def checkpoint_prefix(path, default_names):
    """Resolves a directory or a file prefix to a readable checkpoint."""
    path = Path(path)
    if path.is_dir():
        latest = tf.train.latest_checkpoint(str(path))
        if latest:
            return Path(latest)
        for name in default_names:
            if (path / f"{name}.index").is_file():
                return path / name
        indexes = sorted(path.glob("*.index"))
        if indexes:
            return indexes[0].with_suffix("")
        raise FileNotFoundError(f"No TensorFlow checkpoint (*.index) in "
                                f"{path}.")
    if path.suffix in (".index",) or ".data-" in path.name:
        path = path.with_suffix("") if path.suffix == ".index" else \
            path.parent / path.name.split(".data-")[0]
    if not Path(str(path) + ".index").is_file():
        raise FileNotFoundError(f"TensorFlow checkpoint {path} does not exist "
                                f"(no {path}.index).")
    return path


def _read_checkpoint(prefix):
    try:
        return tf.train.load_checkpoint(str(prefix))
    except (tf.errors.OpError, ValueError) as e:
        detail = getattr(e, "message", str(e))
        raise ValueError(f"Cannot read checkpoint {prefix}: {detail}") from None


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
        _find_file(prefix.parent, ("bert_config.json", "config.json"),
                   "bert_config.json"), "tf1")
    reader = _read_checkpoint(prefix)
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
    directory = Path(directory)
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


# ---------------------------------------------------------------------------
# Model Garden BertEncoderV2
# ---------------------------------------------------------------------------

def _garden_spec(num_layers):
    """(attribute path in BertEncoderV2, canonical name) for every weight.

    Garden's attention uses EinsumDense: q/k/v kernels [H, A, H/A], biases
    [A, H/A], output kernel [A, H/A, H]; the canonical ones are [H, H] / [H].
    """
    spec = [
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
            spec += [(g + f"_attention_layer/_{name}_dense/{kind}",
                      c + f"attention/self/{name}/{kind}")
                     for kind in ("kernel", "bias")]
        spec += [
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
    return spec


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
        _find_file(prefix.parent, ("bert_config.json", "config.json"),
                   "bert_config.json"), "tf1")
    reader = _read_checkpoint(prefix)
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


# ---------------------------------------------------------------------------
# Our checkpoint directories
# ---------------------------------------------------------------------------

def model_checkpoint(encoder, masked_lm=None, next_sentence=None, **extra):
    """The `tf.train.Checkpoint` layout every bert_tf checkpoint uses.

    Keys read like `encoder/transformer_layer_0/attention/qkv/kernel`, so an
    encoder can be restored from a pre-training checkpoint alone.
    """
    items = {"encoder": tf.train.Checkpoint(**encoder.checkpoint_items())}
    if masked_lm is not None:
        items["masked_lm"] = masked_lm
    if next_sentence is not None:
        items["next_sentence"] = next_sentence
    return tf.train.Checkpoint(**items, **extra)


_MODEL_ROOTS = ("encoder", "masked_lm", "next_sentence", "classifier",
                "span_labeler", "token_classifier")


def _variable_keys(prefix):
    """{model path: checkpoint key} for the model variables of a checkpoint.

    Paths follow the object graph (e.g. `encoder/transformer_layer_0/
    attention/qkv/kernel`, Keras's leading underscores dropped), whatever
    key TF gave each variable: in a trainer checkpoint that is often a
    path through the optimizer, which also references every variable.
    """
    from tensorflow.core.protobuf import trackable_object_graph_pb2

    reader = _read_checkpoint(prefix)
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
    keys = {}
    stack = [(child.node_id, (child.local_name,))
             for child in graph.nodes[0].children
             if child.local_name in _MODEL_ROOTS]
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

    Example:
    >>> variables = read_model_variables("runs/x/checkpoints/ckpt-30")  # doctest: +SKIP
    >>> variables["encoder/pooler/kernel"].shape                        # doctest: +SKIP
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
            expected[f"encoder/{name}/{w.path.split('/', 1)[1]}"] = w
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
    found = _normalized_keys(prefix)
    heads = dict(masked_lm=masked_lm, next_sentence=next_sentence, **heads)
    for key, variable in _expected_keys(encoder, heads).items():
        if key not in found:
            raise ValueError(
                f"Checkpoint {prefix} has no variable {key!r}: it was written "
                "for another architecture than this config describes.")
        if found[key] != tuple(variable.shape):
            raise ValueError(
                f"Checkpoint {prefix}: variable {key!r} has shape "
                f"{found[key]}, the config asks for {tuple(variable.shape)}: "
                "the checkpoint and the config do not belong together.")
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
    directory: Path = None


def has_heads(prefix):
    """Which pre-training heads a checkpoint of ours contains."""
    keys = _normalized_keys(prefix)
    return (any(k.startswith("masked_lm/") for k in keys),
            any(k.startswith("next_sentence/") for k in keys))


def save_pretrained(directory, encoder, vocab, pretrainer=None):
    """Writes config.yaml, vocab.txt and model.ckpt.* into `directory`.

    Returns:
        the list of paths written.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    config_path = config_lib.save_config(
        config_lib.ModelConfig(encoder=encoder.config),
        directory / CONFIG_FILE)
    vocab_path = vocab.save(directory / VOCAB_FILE)
    heads = {}
    if pretrainer is not None:
        heads["masked_lm"] = pretrainer.masked_lm
        if pretrainer.next_sentence is not None:
            heads["next_sentence"] = pretrainer.next_sentence
    prefix = model_checkpoint(encoder, **heads).write(
        str(directory / WEIGHTS_PREFIX))
    return [Path(config_path), vocab_path, Path(prefix + ".index")]


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
    from bert_tf.models.encoder import BertEncoder
    from bert_tf.models.pretrainer import BertPretrainer

    directory = Path(directory)
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


# ---------------------------------------------------------------------------
# Conversion
# ---------------------------------------------------------------------------

READERS = {"hf": read_hf, "tf1": read_tf1, "garden": read_garden}


def find_vocab(path):
    path = Path(path)
    directory = path if path.is_dir() else path.parent
    for candidate in (directory / VOCAB_FILE, directory.parent / VOCAB_FILE):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        f"No vocab.txt next to {path}; pass --vocab PATH.")


def convert(source, input_path, output_dir, vocab_path=None, log=print):
    """Converts a foreign checkpoint into a bert_tf checkpoint directory.

    Args:
        source: `hf`, `tf1` or `garden`.
        input_path: the checkpoint (see `read_hf`, `read_tf1`,
            `read_garden`).
        output_dir: where config.yaml, vocab.txt and model.ckpt.* go.
        vocab_path: vocab.txt (default: found next to the input).
        log: where progress lines go.

    Returns:
        a `Pretrained` with the converted models.
    """
    from bert_tf.models.encoder import BertEncoder
    from bert_tf.models.pretrainer import BertPretrainer

    if source not in READERS:
        raise ValueError(f"Unknown checkpoint source {source!r}; choose one "
                         f"of {', '.join(SOURCES)}.")
    config, weights, ignored = READERS[source](input_path)
    vocab_path = Path(vocab_path) if vocab_path else find_vocab(input_path)
    vocab = read_vocab(vocab_path)
    check_vocab_size(vocab, config, vocab_path)
    encoder = BertEncoder.from_config_object(config)
    pretrainer = None
    if "cls/predictions/output_bias" in weights:
        pretrainer = BertPretrainer(
            encoder, nsp="cls/seq_relationship/output_bias" in weights)
        assign_weights(weights, encoder, pretrainer.masked_lm,
                       pretrainer.next_sentence, source=str(input_path))
    else:
        assign_weights(weights, encoder, source=str(input_path))
    if ignored:
        log(f"Ignored {len(ignored)} variable(s) that are not part of BERT: "
            f"{', '.join(ignored[:8])}{' ...' if len(ignored) > 8 else ''}")
    written = save_pretrained(output_dir, encoder, vocab, pretrainer)
    heads = ("encoder + masked-LM head" +
             (" + NSP head" if pretrainer and pretrainer.nsp else "")
             if pretrainer else "encoder")
    log(f"Converted {source} checkpoint {input_path} ({heads}, "
        f"L={config.num_layers} H={config.hidden_size} A={config.num_heads}, "
        f"{encoder.count_params():,} encoder parameters)")
    for path in written:
        log(f"  wrote {path}")
    return Pretrained(config, vocab, encoder, pretrainer, Path(output_dir))
