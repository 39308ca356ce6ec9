"""PyTorch zip checkpoints (`pytorch_model.bin`), read without torch.

The file is data, never code or memory: a restricted unpickler rebuilds
only tensors, storages and ordered dicts; each storage's member must hold
exactly the bytes its element count declares (read with that bound, so a
zip bomb stops at it); and each tensor's offset, shape and strides are
checked against its storage before a view is made, so a crafted file
cannot read past its buffer.
"""

import collections
import io
import math
import pickle
import zipfile

import numpy as np

from bert_tf.storage import GPath, is_remote

_TORCH_DTYPES = {"FloatStorage": np.float32, "HalfStorage": np.float16,
                 "DoubleStorage": np.float64, "LongStorage": np.int64,
                 "IntStorage": np.int32, "BFloat16Storage": "bfloat16",
                 "ByteStorage": np.uint8, "BoolStorage": np.bool_}
# The pickle of tensor names and views: a BERT-Large state dict's is
# about 40 KB.
_MAX_PICKLE_BYTES = 64 << 20
# torch.save stores its members uncompressed, and random floats barely
# compress: a member that inflates more than this is a bomb.
_MAX_RATIO = 100


class RefusedPickle(pickle.UnpicklingError, ValueError):
    """A pickle that names something other than tensors (a ValueError
    too, so the command line prints its one line)."""


def _itemsize(dtype):
    return 2 if dtype == "bfloat16" else np.dtype(dtype).itemsize


def _whole(value):
    return isinstance(value, int) and not isinstance(value, bool)


def check_view(where, storage_size, offset, size, stride):
    """Raises a ValueError naming `where` unless the tensor view (`offset`,
    `size`, `stride`, in elements) lies inside a storage of `storage_size`
    elements and holds no more elements than it (no negative or
    overlapping broadcast strides).

    Examples:
        >>> check_view("t", 16, 0, (4, 4), (4, 1))
        >>> check_view("t", 4, 0, (4096,), (1,))
        Traceback (most recent call last):
        ...
        ValueError: t: a tensor of 4,096 elements over a storage of 4: the file is damaged or crafted.
    """
    if not (_whole(offset) and isinstance(size, tuple) and
            isinstance(stride, tuple) and len(size) == len(stride) and
            all(map(_whole, size + stride))):
        raise ValueError(f"{where}: a tensor whose offset, shape or strides "
                         "are not whole numbers: the file is damaged or "
                         "crafted.")
    if offset < 0 or min(size + stride, default=0) < 0:
        raise ValueError(f"{where}: a negative offset, size or stride "
                         f"({offset}, {size}, {stride}): the file is "
                         "damaged or crafted.")
    count = math.prod(size)
    if count > storage_size:
        raise ValueError(f"{where}: a tensor of {count:,} elements over a "
                         f"storage of {storage_size:,}: the file is damaged "
                         "or crafted.")
    last = offset + sum((n - 1) * s for n, s in zip(size, stride))
    if count and last >= storage_size:
        raise ValueError(f"{where}: a tensor that reads element {last:,} of "
                         f"a storage of {storage_size:,}: the file is "
                         "damaged or crafted.")


def _read_member(archive, name, expected, path):
    """The bytes of `archive`'s member `name`, which must be `expected`
    bytes long (read with that bound: a member that inflates past it
    stops there)."""
    try:
        info = archive.getinfo(name)
    except KeyError:
        raise ValueError(f"{path}: the storage {name} it names is missing: "
                         "the file is damaged or crafted.") from None
    if info.compress_type != zipfile.ZIP_STORED and info.file_size > max(
            info.compress_size, 1 << 20) * _MAX_RATIO:
        raise ValueError(
            f"{path}: {name} inflates from {info.compress_size:,} to "
            f"{info.file_size:,} bytes: a zip bomb, not weights.")
    if info.file_size != expected:
        raise ValueError(
            f"{path}: {name} holds {info.file_size:,} bytes where its "
            f"element count declares {expected:,}: the file is damaged or "
            "crafted.")
    with archive.open(info) as member:
        raw = member.read(expected + 1)
    if len(raw) != expected:
        raise ValueError(
            f"{path}: {name} inflates to {len(raw):,}+ bytes where it "
            f"declares {expected:,}: the file is damaged or crafted.")
    return raw


def read_torch_state_dict(path):
    """Reads a PyTorch zip checkpoint (`pytorch_model.bin`) without torch.

    A restricted unpickler: only tensors, storages and ordered dicts are
    rebuilt, so a malicious pickle cannot run code; every size and view is
    checked before it is read (module docstring). A file that breaks a
    rule is a ValueError naming it and the rule.
    """
    path = GPath(path)
    source = io.BytesIO(path.read_bytes()) if is_remote(path) else path
    if not zipfile.is_zipfile(source):
        raise ValueError(
            f"{path} is not a PyTorch zip checkpoint (torch >= 1.6 format); "
            "convert it to safetensors first.")
    try:
        with zipfile.ZipFile(source) as archive:
            return _read_archive(archive, path)
    except (zipfile.BadZipFile, EOFError, OSError) as error:
        raise ValueError(f"{path} is not a readable zip checkpoint: "
                         f"{error}") from None


def _read_archive(archive, path):
    pickles = [n for n in archive.namelist() if n.endswith("/data.pkl")]
    if not pickles:
        raise ValueError(f"{path} holds no data.pkl: not a PyTorch "
                         "checkpoint.")
    root = pickles[0][:-len("data.pkl")]
    storages = {}  # tied weights share one storage: read it once

    def load_storage(storage_type, key, numel):
        if storage_type not in _TORCH_DTYPES or not _whole(numel) or \
                numel < 0 or not isinstance(key, str):
            raise ValueError(f"{path}: a storage of type {storage_type!r}, "
                             f"key {key!r} and {numel!r} elements: the "
                             "file is damaged or crafted.")
        if (storage_type, key, numel) in storages:
            return storages[storage_type, key, numel]
        dtype = _TORCH_DTYPES[storage_type]
        raw = _read_member(archive, f"{root}data/{key}",
                           numel * _itemsize(dtype), path)
        if dtype == "bfloat16":
            bits = np.frombuffer(raw, np.uint16).astype(np.uint32) << 16
            array = bits.view(np.float32)
        else:
            array = np.frombuffer(raw, dtype)
        storages[storage_type, key, numel] = array
        return array

    def rebuild_tensor(storage, offset, size, stride, *unused):
        if not isinstance(storage, np.ndarray):
            raise ValueError(f"{path}: a tensor over no storage: the file "
                             "is damaged or crafted.")
        size, stride = tuple(size), tuple(stride)
        check_view(str(path), storage.size, offset, size, stride)
        item = storage.itemsize
        return np.lib.stride_tricks.as_strided(
            storage[offset:], shape=size,
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
            raise RefusedPickle(
                f"{path}: refusing to load {module}.{name} (only tensors "
                "are read from PyTorch checkpoints).")

        def persistent_load(self, pid):
            if not (isinstance(pid, tuple) and len(pid) == 5):
                raise ValueError(f"{path}: a storage reference {pid!r} "
                                 "that is not torch's: the file is damaged "
                                 "or crafted.")
            _, storage_type, key, _location, numel = pid
            return load_storage(storage_type, key, numel)

    info = archive.getinfo(pickles[0])
    if info.file_size > _MAX_PICKLE_BYTES:
        raise ValueError(f"{path}: data.pkl holds {info.file_size:,} bytes, "
                         f"over {_MAX_PICKLE_BYTES:,}: not a state dict.")
    with archive.open(info) as f:
        data = f.read(_MAX_PICKLE_BYTES + 1)
    try:
        state = Unpickler(io.BytesIO(data)).load()
    except RefusedPickle:
        raise
    except (pickle.UnpicklingError, EOFError, TypeError, IndexError,
            AttributeError) as error:
        raise ValueError(f"{path}: data.pkl is not a state dict of tensors: "
                         f"{error}") from None
    if not isinstance(state, dict):
        raise ValueError(f"{path} does not hold a state dict of tensors.")
    return state
