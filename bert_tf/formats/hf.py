"""HF transformers weights of the BERT family: safetensors or PyTorch .bin.

BERT (`bert.`), ELECTRA (`electra.`, with its discriminator head) and
DistilBERT (`distilbert.`) share our encoder; DistilBERT's and ELECTRA's
names are first spelled as BERT's (`_BERT_SPELLING`), then one table maps
them onto the canonical names. The family prefix is optional: a base
model's `save_pretrained` (`BertModel`, `DistilBertModel`, ...) writes
none. A task head's weights (`classifier.`, `qa_outputs.`, ...) are read
by the task kind that takes the head (`bert_tf.tasks.hf_runs`), from
`read_hf_files`.
"""

import json
import re

import numpy as np

from bert_tf.formats.files import find_file
from bert_tf.formats.canonical import check_sizes
from bert_tf.formats.json_config import (encoder_config_from_dict,
                                        encoder_config_from_json)
from bert_tf.formats.torch_zip import read_torch_state_dict
from bert_tf.storage import GPath, is_remote

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
    (r"embeddings_project\.weight", "embeddings_project/kernel", True),
    (r"embeddings_project\.bias", "embeddings_project/bias", False),
    (r"discriminator_predictions\.(dense|dense_prediction)\.weight",
     r"discriminator_predictions/\1/kernel", True),
    (r"discriminator_predictions\.(dense|dense_prediction)\.bias",
     r"discriminator_predictions/\1/bias", False),
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
# DistilBERT's and ELECTRA's names in BERT's spelling.
_LAYER = r"^(?:distilbert\.)?transformer\.layer\.(\d+)\."
_BERT_SPELLING = [(re.compile(pattern), target) for pattern, target in [
    (_LAYER + r"attention\.q_lin\.", r"bert.encoder.layer.\1.attention.self.query."),
    (_LAYER + r"attention\.k_lin\.", r"bert.encoder.layer.\1.attention.self.key."),
    (_LAYER + r"attention\.v_lin\.", r"bert.encoder.layer.\1.attention.self.value."),
    (_LAYER + r"attention\.out_lin\.",
     r"bert.encoder.layer.\1.attention.output.dense."),
    (_LAYER + r"sa_layer_norm\.",
     r"bert.encoder.layer.\1.attention.output.LayerNorm."),
    (_LAYER + r"ffn\.lin1\.", r"bert.encoder.layer.\1.intermediate.dense."),
    (_LAYER + r"ffn\.lin2\.", r"bert.encoder.layer.\1.output.dense."),
    (_LAYER + r"output_layer_norm\.", r"bert.encoder.layer.\1.output.LayerNorm."),
    (r"^(?:distilbert\.)?embeddings\.", "bert.embeddings."),
    (r"^vocab_transform\.", "cls.predictions.transform.dense."),
    (r"^vocab_layer_norm\.", "cls.predictions.transform.LayerNorm."),
    (r"^vocab_projector\.bias$", "cls.predictions.bias"),
    (r"^vocab_projector\.weight$", "cls.predictions.decoder.weight"),
    (r"^electra\.", "bert."),
]]
# Present in HF files but carrying nothing new (buffers, tied copies).
_HF_REDUNDANT = re.compile(
    r"(embeddings\.position_ids|cls\.predictions\.decoder\.(weight|bias))$")


def hf_name_to_canonical(name):
    """HF parameter name -> (canonical name, transpose?) or None.

    Examples:
        >>> hf_name_to_canonical("bert.encoder.layer.3.output.dense.weight")
        ('bert/encoder/layer_3/output/dense/kernel', True)
    """
    name = bert_spelling(name)
    short = name[len("bert."):] if name.startswith("bert.") else name
    for pattern, target, transpose in _HF_RULES:
        if pattern.fullmatch(short):
            canonical = pattern.sub(target, short).replace(".", "/")
            canonical = re.sub(r"layer/(\d+)/", r"layer_\1/", canonical)
            if not canonical.startswith(("cls/", "discriminator_")):
                canonical = "bert/" + canonical
            return canonical, transpose
    return None


def bert_spelling(name):
    """An HF parameter name of DistilBERT or ELECTRA as BERT spells it.

    Examples:
        >>> bert_spelling("distilbert.transformer.layer.0.ffn.lin1.weight")
        'bert.encoder.layer.0.intermediate.dense.weight'
    """
    for pattern, target in _BERT_SPELLING:
        name, count = pattern.subn(target, name)
        if count:
            break
    return name


# In the order they are preferred; `tf_model.h5` is what HF's TensorFlow
# classes (`TFBertForSequenceClassification`, ...) saved.
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "tf_model.h5")


def read_tf_h5(path):
    """{PyTorch-style name: array} of an HF TensorFlow `tf_model.h5`: its
    names (`bert/tf_bert_for_sequence_classification/bert/encoder/
    layer_._0/attention/self/query/kernel:0`) as PyTorch spells them
    (`bert.encoder.layer.0.attention.self.query.weight`, the kernel
    transposed), so that one table maps both.

    Examples:
        >>> _torch_name("classifier/tf_bert_for_sequence_classification/"
        ...             "classifier/kernel:0")
        ('classifier.weight', True)
    """
    import h5py

    tensors = {}
    try:
        with h5py.File(str(path), "r") as weights:
            def keep(name, item):
                if isinstance(item, h5py.Dataset):
                    check_h5_dataset(path, name, item)
                    torch_name, transpose = _torch_name(name)
                    value = np.asarray(item)
                    tensors[torch_name] = value.T if transpose else value
            weights.visititems(keep)
    except OSError as e:
        raise ValueError(f"{path} is not a readable HDF5 weights file: "
                         f"{e}") from None
    return tensors


# A compressed dataset may inflate this many times its stored bytes (HF
# writes weights uncompressed; random floats barely compress).
_MAX_H5_RATIO = 100


def check_h5_dataset(path, name, dataset):
    """Raises a ValueError naming the file, the dataset and the rule unless
    `dataset` (h5py) is numbers stored in this file: no external or
    virtual storage (which reads other files on this machine), and no
    compressed data that inflates past `_MAX_H5_RATIO` times its bytes."""
    where = f"{path}: dataset {name}"
    if dataset.external or dataset.is_virtual:
        raise ValueError(f"{where} keeps its data in another file: weights "
                         "must be stored inside the file read.")
    if dataset.dtype.kind not in "fiub":
        raise ValueError(f"{where} holds {dataset.dtype}, not numbers.")
    stored = dataset.id.get_storage_size()
    if dataset.compression or dataset.chunks:
        if dataset.nbytes > max(stored, 1 << 20) * _MAX_H5_RATIO:
            raise ValueError(
                f"{where} inflates from {stored:,} to {dataset.nbytes:,} "
                "bytes: a decompression bomb, not weights.")
    elif stored != dataset.nbytes:
        raise ValueError(f"{where} stores {stored:,} bytes for a shape of "
                         f"{dataset.nbytes:,}: the file is damaged.")


def _torch_name(h5_name):
    """(PyTorch-style name, transpose?) of a `tf_model.h5` dataset."""
    parts = h5_name.split(":")[0].split("/")[2:]  # after layer and scope
    name = re.sub(r"layer_\._(\d+)", r"layer.\1", ".".join(parts))
    if name.endswith(".kernel"):
        return name[:-len("kernel")] + "weight", True
    return re.sub(r"(position|token_type)_embeddings\.embeddings$",
                  r"\1_embeddings.weight", name), False


def read_hf_files(path):
    """(directory, config.json as a dict, {name: numpy array}) of an HF
    checkpoint: a directory with `config.json` and `model.safetensors` or
    `pytorch_model.bin`, or one of those weight files."""
    path = GPath(path)
    if not path.exists():
        raise FileNotFoundError(f"HF checkpoint {path} does not exist.")
    directory = path if path.is_dir() else path.parent
    config_file = find_file(directory, ("config.json",), "HF config.json")
    try:
        raw_config = json.loads(config_file.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"Config file {config_file} is not valid JSON: "
                         f"{e}") from None
    # The family, types and sizes, before a byte of weights is read.
    encoder_config_from_dict(raw_config, config_file, "hf")
    weights_file = path if path.is_file() else find_file(
        directory, WEIGHT_FILES, "HF weights file")
    if weights_file.suffix == ".h5":
        tensors = read_tf_h5(weights_file)
    elif weights_file.suffix == ".safetensors":
        from safetensors.numpy import load, load_file
        try:
            tensors = (load(weights_file.read_bytes())
                       if is_remote(weights_file) else
                       load_file(str(weights_file)))
        except Exception as e:  # safetensors raises its own error types.
            raise ValueError(
                f"{weights_file} is not a readable safetensors file: {e}"
            ) from None
    else:
        tensors = read_torch_state_dict(weights_file)
    return directory, raw_config, tensors


def hf_labels(hf_config):
    """The class names of an HF task config in id order, from `id2label`
    (keys "0", "1", ...; `LABEL_i` where one is missing).

    Examples:
        >>> hf_labels({"id2label": {"1": "pos", "0": "neg"}, "num_labels": 2})
        ['neg', 'pos']
    """
    id2label = hf_config.get("id2label") or {}
    count = int(hf_config.get("num_labels", len(id2label) or 2))
    return [str(id2label.get(str(i), id2label.get(i, f"LABEL_{i}")))
            for i in range(count)]


# The pooling of each family's sequence-classification and multiple-choice
# head, as our heads spell it: BERT's pooler, DistilBERT's dense + ReLU,
# ELECTRA's dense + GELU on the first token.
HEAD_POOLING = {"bert": "cls", "distilbert": "cls_relu",
                "electra": "cls_gelu"}


def linear(tensors, name, where):
    """(kernel, bias) of the torch `Linear` `name` in `tensors`, as a Keras
    `Dense` holds them (the kernel transposed); a missing one is an error
    naming it and `where` (the checkpoint)."""
    missing = [f"{name}.{part}" for part in ("weight", "bias")
               if f"{name}.{part}" not in tensors]
    if missing:
        raise ValueError(f"{where} has no {' or '.join(missing)}: its "
                         "config.json names a head these weights lack.")
    return (np.asarray(tensors[f"{name}.weight"], np.float32).T,
            np.asarray(tensors[f"{name}.bias"], np.float32))


def read_hf(path):
    """Reads HF weights of the BERT family: `BertModel`,
    `BertForPreTraining`, `BertForMaskedLM` (any model with a `bert.`
    trunk or none), `ElectraModel` / `ElectraForPreTraining` (the
    discriminator, its head included) and `DistilBertModel` /
    `DistilBertForMaskedLM`.

    Args:
        path: a directory with `config.json` and `model.safetensors` or
            `pytorch_model.bin`, or one of those weight files.

    Returns:
        (EncoderConfig, canonical weights dict, list of ignored names).
    """
    directory, _, tensors = read_hf_files(path)
    return map_hf(directory, tensors)


def map_hf(directory, tensors):
    """(EncoderConfig, canonical weights dict, list of ignored names) of
    the tensors `read_hf_files` read from the HF checkpoint `directory`:
    the encoder's weights in our names, checked against its config. A
    task head's tensors are left to its kind (`bert_tf.tasks.hf_runs`)."""
    config = encoder_config_from_json(
        find_file(directory, ("config.json",), "HF config.json"), "hf")
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
    check_sizes(config, weights, str(directory))
    return config, weights, ignored


def check_tokenizer_json(vocab, vocab_path, directory, lower_case=None):
    """Raises a ValueError naming both files unless `vocab` (read from
    `vocab_path`) is the vocab of `directory/tokenizer.json`, HF's fast
    tokenizer, when there is one: every token at the same id, as many
    tokens, and (given `lower_case`) the same case. A shuffled, cut or
    foreign vocab.txt beside a checkpoint is refused, not served.

    Examples:
        >>> import tempfile
        >>> from bert_tf.text.vocab import Vocab
        >>> folder = GPath(tempfile.mkdtemp())
        >>> _ = (folder / "tokenizer.json").write_text(json.dumps(
        ...     {"model": {"type": "WordPiece", "vocab": {"a": 0, "b": 1}}}))
        >>> check_tokenizer_json(Vocab(("b", "a")), "vocab.txt", folder)
        Traceback (most recent call last):
        ...
        ValueError: vocab.txt disagrees with ...tokenizer.json: 'b' is id 0 in vocab.txt and 1 in tokenizer.json: the vocab is not this checkpoint's (shuffled, cut or another model's).
    """
    path = GPath(directory) / "tokenizer.json"
    if not path.is_file():
        return
    try:
        data = json.loads(path.read_text())
        model = data.get("model") or {}
        ids = model.get("vocab") if model.get("type") == "WordPiece" else None
    except (json.JSONDecodeError, AttributeError):
        raise ValueError(f"{path} is not a readable tokenizer.json.") \
            from None
    if not isinstance(ids, dict):
        return  # not a WordPiece tokenizer: nothing to hold it to
    where = f"{vocab_path} disagrees with {path}"
    for index, token in enumerate(vocab.tokens):
        if ids.get(token) != index:
            raise ValueError(
                f"{where}: {token!r} is id {index} in {GPath(vocab_path).name}"
                f" and {ids.get(token, 'absent')} in tokenizer.json: the vocab"
                " is not this checkpoint's (shuffled, cut or another "
                "model's).")
    if len(ids) != vocab.size:
        raise ValueError(f"{where}: {vocab.size:,} tokens against "
                         f"{len(ids):,}: the vocab is cut.")
    normalizer = data.get("normalizer") or {}
    lowercase = normalizer.get("lowercase")
    if lower_case is not None and lowercase is not None and \
            bool(lowercase) != bool(lower_case):
        does = "lower-cases" if lowercase else "keeps the case"
        raise ValueError(f"{where}: its normalizer {does}, the vocab is "
                         f"{'uncased' if lower_case else 'cased'}.")
