"""Checkpoints are data: each crafted file below ends `bert-tf convert`
with one line, a non-zero exit and no traceback, within 60 s and under
1 GB, and writes nothing (`bert_tf.formats.torch_zip`, `formats.hf`,
`config.EncoderConfig.validate`)."""

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from crafted_checkpoints import CONFIG, write_hf_bert

HERE = Path(__file__).parent
WORDS = "bert.embeddings.word_embeddings.weight"


def _external_h5(directory):
    import h5py
    directory.mkdir()
    secret = directory.parent / "secret.bin"
    secret.write_bytes(b"HF_TOKEN=hf_not_a_real_token\n" * 200)
    with h5py.File(directory / "tf_model.h5", "w") as f:
        f.create_dataset(
            "bert/tf_bert_model/bert/embeddings/word_embeddings/weight:0",
            shape=(64, 16), dtype="f4", external=[(str(secret), 0, 4096)])
    (directory / "config.json").write_text(json.dumps(CONFIG))
    return directory


def _truncated(directory):
    write_hf_bert(directory)
    path = directory / "pytorch_model.bin"
    path.write_bytes(path.read_bytes()[:5000])
    return directory


CASES = {
    "tensor larger than its storage": lambda d: write_hf_bert(
        d, views={WORDS: (4, 0, (64, 16), (16, 1))},
        members={WORDS: b"\0" * 16}),
    "negative stride": lambda d: write_hf_bert(
        d, views={WORDS: (1024, 1008, (64, 16), (-16, 1))}),
    "shape of 2**31": lambda d: write_hf_bert(
        d, views={WORDS: (1024, 0, (2 ** 31,), (1,))}),
    "zip bomb behind a small tensor": lambda d: write_hf_bert(
        d, views={WORDS: (64_000, 0, (64_000,), (1,))},
        members={WORDS: (512, b"\0" * (1 << 20))}),
    "zip bomb of its declared size": lambda d: write_hf_bert(
        d, views={WORDS: (2 ** 27, 0, (2 ** 27,), (1,))},
        members={WORDS: (512, b"\0" * (1 << 20))}),
    "truncated file": _truncated,
    "100,000 layers": lambda d: write_hf_bert(
        d, {**CONFIG, "num_hidden_layers": 100_000}),
    "intermediate_size 10**9": lambda d: write_hf_bert(
        d, {**CONFIG, "intermediate_size": 10 ** 9}),
    "max_position_embeddings 10**9": lambda d: write_hf_bert(
        d, {**CONFIG, "max_position_embeddings": 10 ** 9}),
    "size as a string": lambda d: write_hf_bert(
        d, {**CONFIG, "num_hidden_layers": "1"}),
    "config of more layers than the weights": lambda d: write_hf_bert(
        d, {**CONFIG, "num_hidden_layers": 3}),
    "HDF5 external dataset": _external_h5,
}

RUNNER = r"""
import contextlib, io, json, resource, sys, time
import tensorflow
from bert_tf import cli
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
results = {}
for case, directory, out in json.loads(sys.argv[1]):
    err = io.StringIO()
    start = time.perf_counter()
    try:
        with contextlib.redirect_stderr(err):
            code = cli.main(["convert", "--from", "hf", "--input", directory,
                             "--output", out])
    except BaseException as error:  # a traceback would reach the user
        code, err = -1, io.StringIO(f"Traceback: {error!r}")
    results[case] = {"code": code, "stderr": err.getvalue(),
                     "seconds": time.perf_counter() - start}
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base
print(json.dumps({"results": results, "grown_kb": grown}))
"""


@pytest.fixture(scope="module")
def refused(tmp_path_factory):
    root = tmp_path_factory.mktemp("crafted")
    jobs = []
    for i, (case, write) in enumerate(CASES.items()):
        jobs.append((case, str(write(root / f"in{i}")), str(root / f"out{i}")))
    result = subprocess.run(
        [sys.executable, "-c", RUNNER, json.dumps(jobs)], cwd=HERE,
        capture_output=True, text=True, timeout=600,
        env={"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    return report, {case: Path(out) for case, _, out in jobs}


RULES = {
    "tensor larger than its storage": "a tensor of 1,024 elements over a "
                                      "storage of 4",
    "negative stride": "a negative offset, size or stride",
    "shape of 2**31": "a tensor of 2,147,483,648 elements over a storage",
    "zip bomb behind a small tensor": "a zip bomb, not weights",
    "zip bomb of its declared size": "a zip bomb, not weights",
    "truncated file": "not a readable zip checkpoint|is not a PyTorch zip",
    "100,000 layers": "num_layers = 100,000: over the ceiling of 256",
    "intermediate_size 10**9": "intermediate_size = 1,000,000,000: over the "
                               "ceiling",
    "max_position_embeddings 10**9": "max_position_embeddings = "
                                     "1,000,000,000: over the ceiling",
    "size as a string": "num_layers = '1': expected int, got str",
    "config of more layers than the weights":
        "no variable 'bert/encoder/layer_1/attention/self/query/kernel'",
    "HDF5 external dataset": "keeps its data in another file",
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_crafted_checkpoint_is_refused_in_one_line(refused, case):
    import re
    report, outs = refused
    got = report["results"][case]
    lines = got["stderr"].strip().splitlines()
    assert got["code"] == 2, got
    assert len(lines) == 1 and lines[0].startswith(
        "bert-tf convert: error: "), got["stderr"]
    assert re.search(RULES[case], lines[0]), lines[0]
    assert "Traceback" not in got["stderr"]
    assert got["seconds"] < 60
    assert not outs[case].exists()
    # Every case in one process: its peak is each case's bound.
    assert report["grown_kb"] < 1 << 20, report["grown_kb"]


def test_the_uncrafted_checkpoint_converts(tmp_path):
    """The crafted cases differ from a good file only where they say."""
    from bert_tf import checkpoints
    directory = write_hf_bert(tmp_path / "good")
    config, weights, _ = checkpoints.read_hf(directory)
    assert config.num_layers == 1
    np.testing.assert_array_equal(
        weights["bert/embeddings/word_embeddings"].shape, (64, 16))


def test_a_legitimate_view_of_a_shared_storage_is_read():
    from bert_tf.formats.torch_zip import check_view
    check_view("t", 12, 2, (2, 5), (5, 1))  # the last element is 11
    with pytest.raises(ValueError, match="reads element 12"):
        check_view("t", 12, 3, (2, 5), (5, 1))
    with pytest.raises(ValueError, match="not whole numbers"):
        check_view("t", 12, 0, (2, "5"), (5, 1))


def test_weights_the_config_does_not_describe_are_refused_before_a_build(
        tmp_path):
    """The tensors that carry each size fit, but the file holds a layer
    the config does not count: its parameter count is refused."""
    from bert_tf import checkpoints
    from crafted_checkpoints import hf_shapes, write_torch_bin

    directory = write_hf_bert(tmp_path / "hf")  # one layer, as CONFIG
    write_torch_bin(directory / "pytorch_model.bin", {
        name: np.zeros(shape, "float32") for name, shape in
        hf_shapes({**CONFIG, "num_hidden_layers": 2}).items()})
    with pytest.raises(ValueError, match=r"holds [\d,]+ parameters in its "
                                         r"embeddings and layers, where "
                                         r"config.json implies 3,824"):
        checkpoints.read_hf(directory)
