"""Paths anywhere: every file a run reads or writes goes through
`tf.io.gfile`, shown end to end on TensorFlow's in-memory `ram://` file
system (what works there works on gs://, s3:// or hdfs://)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
import tensorflow as tf

from bert_tf.storage import GPath, is_remote

# One process (ram:// lives in it): corpus, vocab, configs and task files
# are put on ram://, then `bert-tf pairs`, `pretrain`, `finetune` and
# `export` run on ram:// paths only, and the export answers from ram://.
SCRIPT = textwrap.dedent("""
    import json, sys
    import yaml
    import tensorflow as tf
    from bert_tf import cli
    from bert_tf import samples
    from bert_tf.storage import GPath

    root = GPath("ram://e2e")
    lee = samples.fetch("lee") / "lee_background.cor"
    (root / "corpus.txt").write_text(lee.read_text())
    vocab = (samples.fetch("minilm") / "vocab.txt").read_text()
    (root / "vocab.txt").write_text(vocab)
    rows = ["text\\tlabel"] + [
        f"{t}\\t{l}" for t, l in [("a great film", "pos"),
                                  ("a dull film", "neg")] * 16]
    for split in ("train", "dev", "test"):
        (root / f"{split}.tsv").write_text("\\n".join(rows) + "\\n")
    encoder = {"vocab_size": 30522, "hidden_size": 32, "num_layers": 1,
               "num_heads": 2, "intermediate_size": 64,
               "max_position_embeddings": 64}
    (root / "pretrain.yaml").write_text(yaml.safe_dump({
        "encoder": encoder,
        "data": {"train_files": str(root / "pairs"),
                 "eval_files": str(root / "pairs" / "eval"),
                 "vocab": str(root / "vocab.txt"), "seq_length": 32,
                 "max_predictions_per_seq": 5, "global_batch_size": 8,
                 "shuffle_buffer": 100},
        "optimizer": {"learning_rate": 1e-3, "warmup_steps": 2,
                      "decay_steps": 10},
        "trainer": {"model_dir": str(root / "pretrain"), "train_steps": 10,
                    "steps_per_loop": 5, "checkpoint_every": 5,
                    "eval_every": 10, "eval_steps": 2}}))
    (root / "finetune.yaml").write_text(yaml.safe_dump({
        "task": {"name": "local", "train_file": str(root / "train.tsv"),
                 "validation_file": str(root / "dev.tsv"),
                 "test_file": str(root / "test.tsv")},
        "init": str(root / "pretrain"), "seq_length": 16, "batch_size": 8,
        "epochs": 1,
        "trainer": {"model_dir": str(root / "finetune")}}))
    steps = [
        ["pairs", "--corpus", f"lines:{root / 'corpus.txt'}", "--vocab",
         str(root / "vocab.txt"), "--out", str(root / "pairs"),
         "--seq-length", "32", "--dupe-factor", "1", "--eval-share", "0.1"],
        ["pretrain", "--config", str(root / "pretrain.yaml")],
        ["finetune", "--config", str(root / "finetune.yaml")],
        ["export", "--run", str(root / "finetune"), "--out",
         str(root / "export" / "sentiment" / "1"), "--server-config"],
    ]
    for argv in steps:
        code = cli.main(argv)
        assert code == 0, (argv, code)
    import tensorflow_text  # noqa: F401
    served = tf.saved_model.load(str(root / "export" / "sentiment" / "1"))
    answer = served.signatures["serving_default"](
        text=tf.constant(["a great film"]))
    files = [str(p) for p in root.rglob("*")]
    print("RESULT " + json.dumps({
        "files": files, "label": answer["label"].numpy()[0].decode()}))
""")


def _tree(directory):
    return sorted(os.path.relpath(os.path.join(d, f), directory)
                  for d, _, files in os.walk(directory) for f in files)


@pytest.mark.slow
def test_pairs_pretrain_finetune_export_on_ram_paths(tmp_path):
    work, home, temp = (tmp_path / n for n in ("work", "home", "temp"))
    for d in (work, home, temp):
        d.mkdir()
    cache = os.environ.get("BERT_TF_CACHE",
                           os.path.expanduser("~/.cache/bert_tf"))
    before = _tree(cache)
    process = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=work, capture_output=True,
        text=True, timeout=600,
        env=dict(os.environ, HOME=str(home), TMPDIR=str(temp),
                 BERT_TF_CACHE=cache, TF_CPP_MIN_LOG_LEVEL="3",
                 KERAS_HOME=str(temp / "keras"),
                 MPLCONFIGDIR=str(temp / "matplotlib"),
                 PYTHONPATH=os.pathsep.join(sys.path)))
    assert process.returncode == 0, process.stdout[-3000:] + \
        process.stderr[-3000:]
    result = json.loads(process.stdout.split("RESULT ")[-1])
    files = set(result["files"])
    for expected in ("pairs/manifest.json", "pairs/eval/manifest.json",
                     "pretrain/checkpoints/checkpoint", "pretrain/vocab.txt",
                     "pretrain/config.yaml", "finetune/best/best.json",
                     "finetune/best/metrics.json",
                     "export/sentiment/1/saved_model.pb",
                     "export/models.config"):
        assert f"ram://e2e/{expected}" in files, sorted(files)
    assert any("pretrain/tensorboard/" in f for f in files)
    assert any("pairs/pairs-" in f for f in files)
    assert result["label"] in ("pos", "neg")
    # Nothing was written to local disk but the temp dir (where the
    # libraries caches were pointed: Keras, matplotlib).
    assert _tree(work) == [] and _tree(home) == []
    assert _tree(cache) == before


def test_gpath_keeps_schemes_and_works_like_pathlib(tmp_path):
    remote = GPath("ram://bucket/a") / "b" / "c.txt"
    assert str(remote) == "ram://bucket/a/b/c.txt" and is_remote(remote)
    assert (remote.name, remote.suffix, remote.stem) == ("c.txt", ".txt",
                                                         "c")
    assert str(remote.parent.parent) == "ram://bucket/a"
    assert str(remote.with_suffix(".json")) == "ram://bucket/a/b/c.json"
    remote.parent.mkdir(parents=True, exist_ok=True)
    remote.write_text("h\u00e9llo \xff\n")
    assert remote.read_text() == "h\u00e9llo \xff\n"
    assert remote.is_file() and not remote.is_dir()
    assert remote.stat().st_size == len("h\u00e9llo \xff\n".encode())
    with pytest.raises(FileExistsError):
        remote.parent.mkdir()
    # Invalid UTF-8 read with errors="replace", as `open` would.
    remote.write_bytes(b"ok \xff\n")
    with remote.open(errors="replace") as f:
        assert f.read() == "ok \ufffd\n"
    # A directory moves whole (object stores cannot rename directories).
    moved = remote.parent.rename("ram://bucket/moved")
    assert (moved / "c.txt").read_bytes() == b"ok \xff\n"
    assert not remote.exists()
    assert [p.name for p in GPath("ram://bucket").rglob("*.txt")] == \
        ["c.txt"]
    # Local paths stay os.PathLike and equal to pathlib's.
    local = GPath(tmp_path) / "x.txt"
    local.write_text("x")
    assert open(local).read() == "x" and local == tmp_path / "x.txt"
    assert tf.io.gfile.exists(str(local))


@pytest.mark.slow
def test_hf_weights_import_from_ram_paths(minilm_dir, antiberty_dir):
    """safetensors (MiniLM) and PyTorch zip (AntiBERTy) weights read from
    ram:// equal the same files read from local disk."""
    import numpy as np
    from bert_tf.formats.hf import read_hf

    for name, local in (("minilm", minilm_dir),
                        ("antiberty", antiberty_dir)):
        remote = GPath(f"ram://hf/{name}")
        remote.mkdir(parents=True, exist_ok=True)
        for path in local.iterdir():
            if path.name in ("config.json", "model.safetensors",
                             "pytorch_model.bin"):
                (remote / path.name).write_bytes(path.read_bytes())
        config, weights, _ = read_hf(str(remote))
        local_config, local_weights, _ = read_hf(local)
        assert config == local_config and weights.keys() == \
            local_weights.keys() and len(weights) > 20
        for key in weights:
            np.testing.assert_array_equal(weights[key], local_weights[key])
