"""Tiny HF BERT checkpoints written without torch, and crafted ones: a
`pytorch_model.bin` is a zip of a pickle whose tensors name
`torch._utils._rebuild_tensor_v2` over storages kept as members
(`data/<key>`); `write_torch_bin` writes that format with any offsets,
shapes, strides and members, so a test can hand the reader what an
attacker would."""

import io
import json
import pickle
import zipfile

import numpy as np

CONFIG = {"model_type": "bert", "vocab_size": 64, "hidden_size": 16,
          "num_hidden_layers": 1, "num_attention_heads": 2,
          "intermediate_size": 32, "max_position_embeddings": 32,
          "type_vocab_size": 2, "hidden_act": "gelu"}


def hf_shapes(config=CONFIG):
    """{HF name: shape} of a `BertModel` of `config`."""
    h, i = config["hidden_size"], config["intermediate_size"]
    shapes = {"bert.embeddings.word_embeddings.weight": (
                  config["vocab_size"], h),
              "bert.embeddings.position_embeddings.weight": (
                  config["max_position_embeddings"], h),
              "bert.embeddings.token_type_embeddings.weight": (
                  config["type_vocab_size"], h),
              "bert.embeddings.LayerNorm.weight": (h,),
              "bert.embeddings.LayerNorm.bias": (h,)}
    for n in range(config["num_hidden_layers"]):
        p = f"bert.encoder.layer.{n}."
        for part in ("query", "key", "value"):
            shapes[f"{p}attention.self.{part}.weight"] = (h, h)
            shapes[f"{p}attention.self.{part}.bias"] = (h,)
        shapes.update({
            f"{p}attention.output.dense.weight": (h, h),
            f"{p}attention.output.dense.bias": (h,),
            f"{p}attention.output.LayerNorm.weight": (h,),
            f"{p}attention.output.LayerNorm.bias": (h,),
            f"{p}intermediate.dense.weight": (i, h),
            f"{p}intermediate.dense.bias": (i,),
            f"{p}output.dense.weight": (h, i),
            f"{p}output.dense.bias": (h,),
            f"{p}output.LayerNorm.weight": (h,),
            f"{p}output.LayerNorm.bias": (h,)})
    return shapes


class FloatStorage:  # pickled as torch.FloatStorage (see _as_torch)
    pass


def _rebuild_tensor_v2(*args):  # pickled as torch._utils._rebuild_tensor_v2
    raise AssertionError("never called: only pickled")


class _View:
    def __init__(self, key, numel, offset, size, stride):
        self.args = (key, numel, offset, size, stride)

    def __reduce__(self):
        key, numel, offset, size, stride = self.args
        return (_rebuild_tensor_v2, (_Storage(key, numel), offset,
                                     tuple(size), tuple(stride), False, {}))


class _Storage:
    def __init__(self, key, numel):
        self.pid = ("storage", FloatStorage, key, "cpu", numel)


class _Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        return obj.pid if isinstance(obj, _Storage) else None


def _as_torch(data):
    """The pickle's globals renamed to torch's (protocol 2 spells a global
    as one text line)."""
    here = __name__.encode()
    return data.replace(b"c" + here + b"\n_rebuild_tensor_v2\n",
                        b"ctorch._utils\n_rebuild_tensor_v2\n").replace(
        b"c" + here + b"\nFloatStorage\n", b"ctorch\nFloatStorage\n")


def write_torch_bin(path, tensors, views=None, members=None):
    """Writes `tensors` ({name: float32 array}) as a torch zip checkpoint.

    Args:
        views: {name: (numel, offset, size, stride)} that replace a
            tensor's storage element count and view as pickled.
        members: {name: bytes or an (int, chunk) pair: `int` chunks of
            `chunk` bytes, deflated} that replace a storage member.
    """
    views, members = views or {}, members or {}
    state, storage_bytes = {}, {}
    for key, (name, value) in enumerate(tensors.items()):
        value = np.ascontiguousarray(value, np.float32)
        stride = [int(s) // 4 for s in value.strides]
        numel, offset, size, stride = views.get(
            name, (value.size, 0, value.shape, stride))
        state[name] = _View(str(key), numel, offset, size, stride)
        storage_bytes[str(key)] = members.get(name, value.tobytes())
    buffer = io.BytesIO()
    _Pickler(buffer, protocol=2).dump(state)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", _as_torch(buffer.getvalue()))
        for key, data in storage_bytes.items():
            name = f"archive/data/{key}"
            if isinstance(data, tuple):
                count, chunk = data
                info = zipfile.ZipInfo(name)
                info.compress_type = zipfile.ZIP_DEFLATED
                with archive.open(info, "w", force_zip64=True) as member:
                    for _ in range(count):
                        member.write(chunk)
            else:
                archive.writestr(name, data)


def write_hf_bert(directory, config=CONFIG, views=None, members=None,
                  seed=0):
    """A tiny random HF BERT (`config.json`, `vocab.txt`,
    `pytorch_model.bin`) in `directory`; `views` and `members` as
    `write_torch_bin`. Returns the directory."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    tensors = {name: rng.normal(0, 0.02, shape).astype("float32")
               for name, shape in hf_shapes().items()}
    write_torch_bin(directory / "pytorch_model.bin", tensors, views,
                    members)
    (directory / "config.json").write_text(json.dumps(config))
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [
        f"w{i}" for i in range(CONFIG["vocab_size"] - 5)]
    (directory / "vocab.txt").write_text("\n".join(tokens) + "\n")
    return directory
