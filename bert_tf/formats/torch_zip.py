"""PyTorch zip checkpoints (`pytorch_model.bin`), read without torch."""

import collections
import io
import pickle
import zipfile

import numpy as np

from bert_tf.storage import GPath, is_remote

_TORCH_DTYPES = {"FloatStorage": np.float32, "HalfStorage": np.float16,
                 "DoubleStorage": np.float64, "LongStorage": np.int64,
                 "IntStorage": np.int32, "BFloat16Storage": "bfloat16",
                 "ByteStorage": np.uint8, "BoolStorage": np.bool_}


def read_torch_state_dict(path):
    """Reads a PyTorch zip checkpoint (`pytorch_model.bin`) without torch.

    A restricted unpickler: only tensors, storages and ordered dicts are
    rebuilt, so a malicious pickle cannot run code.
    """
    path = GPath(path)
    source = io.BytesIO(path.read_bytes()) if is_remote(path) else path
    if not zipfile.is_zipfile(source):
        raise ValueError(
            f"{path} is not a PyTorch zip checkpoint (torch >= 1.6 format); "
            "convert it to safetensors first.")
    with zipfile.ZipFile(source) as archive:
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
