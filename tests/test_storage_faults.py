"""Storage faults: what was already good survives, the next run continues,
and every failure is one line naming the path, the cause and the fix.

The faults are made without root or a real disk: files truncated or
removed on purpose, `RLIMIT_FSIZE` (with SIGXFSZ ignored, a write past it
fails with EFBIG, as on a full disk) in a child process, file-system calls
replaced to fail as a read-only mount does, and SIGKILL at random points.
"""

import errno
import json
import os
import random
import re
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import safe_io
from bert_tf.safe_io import StorageError
from bert_tf.storage import GPath
from bert_tf.checkpoints import run_files

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _manager(directory, size=1000):
    variable = tf.Variable(tf.zeros([size]))
    checkpoint = tf.train.Checkpoint(v=variable)
    return variable, checkpoint, tf.train.CheckpointManager(
        checkpoint, str(directory), max_to_keep=5)


def _three_checkpoints(directory):
    variable, checkpoint, manager = _manager(directory)
    for step in (10, 20, 30):
        variable.assign(tf.fill([1000], float(step)))
        manager.save(checkpoint_number=step)
    return variable, checkpoint


def _truncate(path, keep=0.5):
    data = path.read_bytes()
    path.write_bytes(data[:int(len(data) * keep)])


DAMAGE = {
    "truncated data": lambda d: _truncate(d / "ckpt-30.data-00000-of-00001"),
    "missing data shard": lambda d: (d / "ckpt-30.data-00000-of-00001")
    .unlink(),
    "bad index": lambda d: (d / "ckpt-30.index").write_bytes(b"\0" * 64),
    "missing index": lambda d: (d / "ckpt-30.index").unlink(),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_the_newest_readable_checkpoint_is_used(tmp_path, damage):
    variable, checkpoint = _three_checkpoints(tmp_path)
    DAMAGE[damage](tmp_path)
    lines = []
    prefix = run_files.newest_readable(tmp_path, lines.append, tidy=True)
    assert prefix.endswith("ckpt-20")
    assert len(lines) == 1 and "ckpt-30 does not read" in lines[0]
    assert "trying the next older one" in lines[0]
    checkpoint.read(prefix).assert_existing_objects_matched()
    assert float(variable[0]) == 20.0
    # Set aside, and the state file now names the good one as the latest.
    assert not list(tmp_path.glob("ckpt-30.*"))
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-20")
    # A manager made now continues from there: the next save is the latest.
    _, _, manager = _manager(tmp_path)
    assert manager.latest_checkpoint.endswith("ckpt-20")
    assert manager.save(checkpoint_number=30).endswith("ckpt-30")
    assert run_files.newest_readable(tmp_path, lines.append) \
        .endswith("ckpt-30")


def test_when_no_checkpoint_reads_the_error_lists_each(tmp_path):
    _three_checkpoints(tmp_path)
    for step in (10, 20, 30):
        _truncate(tmp_path / f"ckpt-{step}.data-00000-of-00001")
    with pytest.raises(StorageError, match=r"no checkpoint in .* reads "
                       r"\(tried ckpt-30: .*; ckpt-20: .*; ckpt-10: .*\)\. "
                       r"Restore the files"):
        run_files.newest_readable(tmp_path, lambda line: None)
    assert run_files.newest_readable(tmp_path / "empty") is None


_FILL_THE_DISK = textwrap.dedent("""
    import resource, signal, sys
    import tensorflow as tf
    from bert_tf.safe_io import StorageError
    from bert_tf.checkpoints import run_files
    variable = tf.Variable(tf.ones([250_000]))  # 1 MB
    checkpoint = tf.train.Checkpoint(v=variable)
    manager = tf.train.CheckpointManager(checkpoint, sys.argv[1], 5)
    run_files.save(manager, 20)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (300_000, resource.RLIM_INFINITY))
    variable.assign(tf.fill([250_000], 2.0))
    try:
        run_files.save(manager, 40)
    except StorageError as error:
        print("ERROR", error)
""")


def test_a_full_disk_during_a_checkpoint_keeps_the_last_good_one(tmp_path):
    directory = tmp_path / "checkpoints"
    out = subprocess.run([sys.executable, "-c", _FILL_THE_DISK,
                          str(directory)], capture_output=True, text=True,
                         env=ENV, cwd=ROOT, timeout=120)
    line = [x for x in out.stdout.splitlines() if x.startswith("ERROR")]
    assert line, out.stdout + out.stderr
    assert line[0] == (
        f"ERROR cannot write checkpoint ckpt-40 to {directory}: no space "
        "(checkpoint ckpt-40 needs about 1.0 MB); free space there (or "
        "point it at a larger disk) and run again.")
    # No temporary or partial files; ckpt-20 still the latest, and intact.
    names = sorted(p.name for p in directory.iterdir())
    assert names == ["checkpoint", "ckpt-20.data-00000-of-00001",
                     "ckpt-20.index"]
    assert run_files.newest_readable(directory).endswith("ckpt-20")


def test_causes_are_told_apart():
    cause = safe_io.cause_of
    assert cause(OSError(errno.EROFS, "Read-only file system")) == \
        "read-only file system"
    assert cause(OSError(errno.EACCES, "Permission denied")) == \
        "permission denied"
    assert cause(tf.errors.ResourceExhaustedError(
        None, None, "x; No space left on device")) == "no space"
    assert cause(OSError(errno.EFBIG, "File too large")) == "no space"
    assert cause(KeyError("x")) is None


def _read_only(monkeypatch, root):
    """Every write under `root` fails as on a read-only mount."""
    def refuse(original):
        def call(self, *args, **kwargs):
            if str(self).startswith(str(root)):
                raise OSError(errno.EROFS, "Read-only file system", str(self))
            return original(self, *args, **kwargs)
        return call
    for name in ("mkdir", "write_text", "write_bytes"):
        monkeypatch.setattr(GPath, name, refuse(getattr(GPath, name)))


def test_export_to_a_read_only_place_is_refused_before_any_work(
        toy_run, tmp_path, monkeypatch, capsys):
    from bert_tf import cli, tasks
    run = toy_run[1].best_dir.parent
    _read_only(monkeypatch, tmp_path / "ro")
    loaded = []
    monkeypatch.setattr(tasks, "get_kind", lambda *a: loaded.append(a))
    out = tmp_path / "ro" / "export" / "toy" / "1"
    assert cli.main(["export", "--run", run, "--out", out]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"bert-tf export: error: cannot write the export to "
                   f"{out.parent}: read-only file system; choose a writable "
                   "location.")
    assert not loaded  # no model was built


def test_pretraining_into_a_read_only_model_dir_is_refused(tmp_path,
                                                           monkeypatch):
    from bert_tf.training.trainer import Trainer, TrainerConfig
    _read_only(monkeypatch, tmp_path / "ro")
    built = []
    with pytest.raises(StorageError, match=r"cannot write the run "
                       r"\(trainer.model_dir\) to .*ro/run: read-only"):
        Trainer(tf.distribute.get_strategy(), built.append, None, None,
                TrainerConfig(model_dir=str(tmp_path / "ro" / "run")))
    assert not built  # no model was built


@pytest.mark.slow
def test_a_failed_overwrite_keeps_the_export_that_was_there(
        toy_run, tmp_path, monkeypatch):
    from bert_tf.serving import export as export_lib
    run = toy_run[1].best_dir.parent
    out = tmp_path / "export" / "toy" / "1"
    export_lib.export_model(run, out, log=lambda *a: None)
    before = {p.name: p.stat().st_size for p in GPath(out).rglob("*")}
    (out.parent / "1.partial").mkdir()  # what a killed export leaves

    def full_disk(*args, **kwargs):
        raise tf.errors.ResourceExhaustedError(
            None, None, "Failed to write: No space left on device")
    monkeypatch.setattr(tf.saved_model, "save", full_disk)
    with pytest.raises(StorageError, match=r"cannot write the export to "
                       r".*/1: no space; free space there"):
        export_lib.export_model(run, out, overwrite=True, log=lambda *a: None)
    assert {p.name: p.stat().st_size for p in GPath(out).rglob("*")} == before
    assert sorted(p.name for p in out.parent.iterdir()) == ["1"]
    export_lib.load_exported(out)
    monkeypatch.undo()
    (out.parent / "1.partial").mkdir()
    export_lib.export_model(run, out, overwrite=True, log=lambda *a: None)
    assert sorted(p.name for p in out.parent.iterdir()) == ["1"]


BREAKS = {
    "truncated variables": ("variables/variables.data-00000-of-00001",
                            lambda p: _truncate(p, 0.3),
                            r"variables in .*/variables do not read"),
    "missing graph": ("saved_model.pb", lambda p: p.unlink(),
                      r"not a SavedModel \(no saved_model.pb\)"),
    "missing vocab asset": ("assets/vocab.txt", lambda p: p.unlink(),
                            r"assets/vocab.txt is missing \(the model reads "
                            r"it on load\)"),
    "missing variables index": ("variables/variables.index",
                                lambda p: p.unlink(),
                                r"variables/variables.index is missing"),
}


@pytest.mark.slow
def test_a_broken_export_is_named_in_one_line(toy_run, tmp_path, capsys):
    import shutil

    from bert_tf import cli
    from bert_tf.serving import export as export_lib
    run = toy_run[1].best_dir.parent
    good = tmp_path / "good" / "1"
    export_lib.export_model(run, good, log=lambda *a: None)
    for name, (file, damage, message) in BREAKS.items():
        out = tmp_path / name.replace(" ", "_") / "1"
        shutil.copytree(good, out)
        damage(out / file)
        code = cli.main(["predict", "--model", out, "fine"])
        err = capsys.readouterr().err.strip()
        assert code == 2 and len(err.splitlines()) == 1, (name, err)
        assert err.startswith("bert-tf predict: error: "), (name, err)
        assert re.search(message, err), (name, err)


_SAVE_FOREVER = textwrap.dedent("""
    import sys
    import tensorflow as tf
    from bert_tf.checkpoints import run_files
    variable = tf.Variable(tf.zeros([2_000_000]))  # 8 MB per checkpoint
    checkpoint = tf.train.Checkpoint(v=variable)
    manager = tf.train.CheckpointManager(checkpoint, sys.argv[1], 3)
    step = run_files.newest_readable(sys.argv[1], tidy=True)
    step = int(step.rsplit("-", 1)[1]) if step else 0
    if step:
        checkpoint.read(manager.latest_checkpoint)
    print("READY", flush=True)
    while True:
        step += 1
        variable.assign(tf.fill([2_000_000], float(step)))
        run_files.save(manager, step)
""")


@pytest.mark.slow
def test_sigkill_during_checkpoint_writes_never_loses_the_last_good_one(
        tmp_path):
    directory = tmp_path / "checkpoints"
    rng = random.Random(0)
    restored = []
    for _ in range(6):
        process = subprocess.Popen(
            [sys.executable, "-c", _SAVE_FOREVER, str(directory)],
            stdout=subprocess.PIPE, text=True, env=ENV, cwd=ROOT)
        assert process.stdout.readline().strip() == "READY"
        time.sleep(rng.uniform(0.05, 1.0))
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        prefix = run_files.newest_readable(directory, lambda line: None,
                                               tidy=True)
        assert prefix is not None
        value = tf.train.load_checkpoint(prefix).get_tensor(
            "v/.ATTRIBUTES/VARIABLE_VALUE")
        step = int(prefix.rsplit("-", 1)[1])
        np.testing.assert_array_equal(value, np.full(2_000_000, step))
        restored.append(step)
    assert restored == sorted(restored) and restored[-1] > restored[0]


@pytest.mark.slow
def test_sigkill_during_an_export_keeps_the_previous_one(toy_run, tmp_path):
    from bert_tf.serving import export as export_lib
    run = toy_run[1].best_dir.parent
    out = tmp_path / "export" / "toy" / "1"
    export_lib.export_model(run, out, log=lambda *a: None)
    good = export_lib.predict_texts(export_lib.load_exported(out), ["fine"])
    rng = random.Random(1)
    command = [sys.executable, "-m", "bert_tf.cli", "export", "--run",
               str(run), "--out", str(out), "--overwrite"]
    for _ in range(3):
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, env=ENV,
                                   cwd=ROOT)
        time.sleep(rng.uniform(3.0, 12.0))
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        safe_io.recover_directory(out)
        answer = export_lib.predict_texts(export_lib.load_exported(out),
                                          ["fine"])
        np.testing.assert_allclose(answer["probabilities"],
                                   good["probabilities"], atol=1e-6)
    subprocess.run(command, check=True, env=ENV, cwd=ROOT,
                   capture_output=True, timeout=300)
    assert sorted(p.name for p in out.parent.iterdir()) == ["1"]


def test_a_cut_off_best_model_swap_is_put_back(tmp_path):
    best = tmp_path / "best"
    best.mkdir()
    (best / "best.json").write_text(json.dumps({"value": 0.5}))
    variable = tf.Variable([1.0, 2.0])
    checkpoint = tf.train.Checkpoint(v=variable)
    run_files.save_best(checkpoint, best, {"value": 0.7})
    assert json.loads((best / "best.json").read_text()) == {"value": 0.7}
    # A crash between moving the old aside and moving the new in:
    best.rename(tmp_path / "best.old")
    (tmp_path / "best.partial").mkdir()
    assert run_files.recover_best(best)
    assert json.loads((best / "best.json").read_text()) == {"value": 0.7}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best"]


def test_a_failed_best_model_write_keeps_the_previous_best(tmp_path,
                                                           monkeypatch):
    best = tmp_path / "best"
    variable = tf.Variable([1.0, 2.0])
    checkpoint = tf.train.Checkpoint(v=variable)
    run_files.save_best(checkpoint, best, {"value": 0.5})
    (best / "task.yaml").write_text("kind: x\n")
    before = {p.name: p.read_bytes() for p in best.iterdir()}

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(checkpoint, "write", full)
    with pytest.raises(StorageError, match=r"cannot write the best model to "
                       r".*best: no space"):
        run_files.save_best(checkpoint, best, {"value": 0.9})
    assert {p.name: p.read_bytes() for p in best.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best"]


# `bert-tf pretrain` resuming past a truncated newest checkpoint: in
# test_trainer.py, after a SIGKILL, against an uninterrupted run.


@pytest.mark.slow
def test_fine_tuning_resumes_past_a_missing_shard_and_keeps_its_best(
        tmp_path):
    from toy_task import toy_config, write_toy_task

    from bert_tf import finetune
    write_toy_task(tmp_path)
    # Stopped at step 20 of 40 (checkpoints every 10).
    cfg = toy_config(tmp_path, epochs=0, **{
        "trainer.train_steps": 20, "trainer.checkpoint_every": 10,
        "optimizer.decay_steps": 40, "optimizer.warmup_steps": 4})
    finetune.run(cfg, log=lambda *a: None)
    checkpoints = tmp_path / "run" / "checkpoints"
    best = json.loads((tmp_path / "run" / "best" / "best.json").read_text())
    (checkpoints / "ckpt-20.data-00000-of-00001").unlink()
    lines = []
    result = finetune.run(toy_config(tmp_path, epochs=0, **{
        "trainer.train_steps": 40, "trainer.checkpoint_every": 10,
        "optimizer.decay_steps": 40, "optimizer.warmup_steps": 4}), log=lines.append)
    text = "\n".join(lines)
    assert re.search(r"checkpoint .*ckpt-20 does not read \(ckpt-20.index:",
                     text), text
    assert re.search(r"restored .*ckpt-10 at step 10", text)
    assert result.best["value"] >= best["value"]
    assert run_files.newest_readable(checkpoints).endswith("ckpt-40")
    assert not (tmp_path / "run" / "best.partial").exists()


_FILL_WITH_LOGS = textwrap.dedent("""
    import resource, signal, sys
    import tensorflow as tf
    from bert_tf.safe_io import StorageError
    from bert_tf.training.summaries import write_scalars
    writer = tf.summary.create_file_writer(sys.argv[1])
    write_scalars(writer, sys.argv[1], "train", {"loss": 1.0}, 0)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (2000, resource.RLIM_INFINITY))
    try:
        for step in range(1, 200):
            write_scalars(writer, sys.argv[1], "train",
                          {f"loss{i}": 1.0 for i in range(10)}, step)
    except StorageError as error:
        print("ERROR", error)
""")


def test_a_full_disk_under_the_tensorboard_logs_is_one_line(tmp_path):
    out = subprocess.run([sys.executable, "-c", _FILL_WITH_LOGS,
                          str(tmp_path)], capture_output=True, text=True,
                         env=ENV, cwd=ROOT, timeout=120)
    assert out.stdout.strip() == (
        f"ERROR cannot write the TensorBoard logs to {tmp_path}: no space; "
        "free space there (or point it at a larger disk) and run again."), \
        out.stdout + out.stderr[-2000:]


def test_a_failed_rename_into_place_keeps_the_previous_directory(
        tmp_path, monkeypatch):
    target, staging = tmp_path / "1", tmp_path / "1.partial"
    target.mkdir()
    (target / "saved_model.pb").write_text("old")
    staging.mkdir()
    (staging / "saved_model.pb").write_text("new")
    original = GPath.rename

    def rename(self, other):  # the move of the new one fails (EIO)
        if GPath(self).name == "1.partial":
            raise OSError(errno.EIO, "Input/output error", str(self))
        return original(self, other)
    monkeypatch.setattr(GPath, "rename", rename)
    monkeypatch.setattr(GPath, "replace", rename)
    with pytest.raises(StorageError, match=r"cannot write the export to "
                       r".*/1: .*Input/output error"):
        safe_io.replace_directory(staging, target, "the export")
    assert (target / "saved_model.pb").read_text() == "old"
    assert not (tmp_path / "1.old").exists()


def _tiny_pairs(output, **kwargs):
    from toy_task import VOCAB

    from bert_tf.data import pairs
    from bert_tf.text.tokenizer import BertTokenizer
    from bert_tf.text.vocab import Vocab
    documents = [["the film was good .", "the film was long .",
                  "and new ."] * 3] * 6
    return pairs.write_pairs(documents, BertTokenizer(Vocab(tuple(VOCAB))),
                             output, seq_length=16, dupe_factor=1, seed=0,
                             log=lambda *a: None, **kwargs)


def test_pairs_into_a_read_only_place_are_refused_before_any_work(
        tmp_path, monkeypatch):
    _read_only(monkeypatch, tmp_path / "ro")
    with pytest.raises(StorageError, match=r"cannot write the pairs to "
                       r".*ro/pairs: read-only file system"):
        _tiny_pairs(tmp_path / "ro" / "pairs")


def test_a_full_disk_during_pair_shards_leaves_no_manifest(tmp_path,
                                                           monkeypatch):
    from bert_tf.data import pairs
    out = tmp_path / "pairs"
    _tiny_pairs(out)
    assert (out / pairs.MANIFEST).is_file()

    class FullDisk:
        def __init__(self, path):
            self.path = path

        def __enter__(self):
            raise tf.errors.ResourceExhaustedError(
                None, None, f"{self.path}; No space left on device")

        def __exit__(self, *exc):
            return False
    monkeypatch.setattr(tf.io, "TFRecordWriter", FullDisk)
    with pytest.raises(StorageError, match=r"cannot write a pair shard to "
                       r".*pairs-00000-of-00001.tfrecord: no space"):
        _tiny_pairs(out)
    # The old manifest went first: half-rewritten shards are never read.
    assert not (out / pairs.MANIFEST).exists()
    assert not list(out.glob("pairs-*.tfrecord"))


def test_tflite_into_a_read_only_place_is_refused_before_any_work(
        toy_run, tmp_path, monkeypatch):
    from bert_tf import tasks
    from bert_tf.serving.tflite import export_tflite
    run = toy_run[1].best_dir.parent
    _read_only(monkeypatch, tmp_path / "ro")
    loaded = []
    monkeypatch.setattr(tasks, "load_finetuned", lambda *a: loaded.append(a))
    with pytest.raises(StorageError, match=r"cannot write the TFLite file "
                       r"to .*ro: read-only file system"):
        export_tflite(run, tmp_path / "ro" / "m.tflite", log=lambda *a: None)
    assert not loaded


def test_hub_export_into_a_read_only_place_is_refused_before_any_work(
        tmp_path, monkeypatch):
    from bert_tf import checkpoints
    from bert_tf.serving.hub import export_hub
    _read_only(monkeypatch, tmp_path / "ro")
    loaded = []
    monkeypatch.setattr(checkpoints, "load_encoder",
                        lambda *a, **k: loaded.append(a))
    with pytest.raises(StorageError, match=r"cannot write the hub export "
                       r"to .*ro: read-only file system"):
        export_hub("any-checkpoint", tmp_path / "ro" / "hub",
                   log=lambda *a: None)
    assert not loaded


def test_an_interrupted_atomic_write_keeps_the_old_text(tmp_path,
                                                        monkeypatch):
    """A write cut off half way (a full disk) leaves the file as it was and
    no staging file: the text goes through a staging file renamed into
    place, never into the file itself."""
    path = tmp_path / "manifest.json"
    path.write_text('{"records": 10}\n')
    real_write = GPath.write_text

    def cut_off(self, text, *args, **kwargs):
        real_write(self, text[:len(text) // 2], *args, **kwargs)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(GPath, "write_text", cut_off)
    with pytest.raises(StorageError, match="manifest.json"):
        safe_io.write_text_atomic(path, '{"records": 20, "shards": 4}\n',
                                  "the manifest")
    monkeypatch.undo()
    assert path.read_text() == '{"records": 10}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json"]
