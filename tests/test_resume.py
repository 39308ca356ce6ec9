"""Exact resume under multi-device strategies and stopping on SIGTERM:
a restarted run continues the data where it stopped (no replay), and its
final weights and TensorBoard curve equal an uninterrupted run's."""

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from conftest import free_ports, pretrain_config

# One worker of a 2-worker MultiWorkerMirroredStrategy cluster (TF_CONFIG
# from the environment), through the command line.
WORKER = """
import sys
from bert_tf import cli
sys.exit(cli.main(["pretrain", "--config", sys.argv[1], "--set",
                   "strategy=multi_worker_mirrored"]))
"""

# Mirrored over 2 logical CPUs, for each argument CONFIG:STEPS,STEPS...: a
# new trainer on the config's model_dir to each number of steps in turn
# (straight to 15; or to 5, then a new trainer to 15). One process for
# both runs: a process and its TensorFlow start cost more than the runs.
MIRRORED = """
import sys
import numpy as np
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from bert_tf import pretrain
for run in sys.argv[1:]:
    config, steps = run.split(":")
    for step in steps.split(","):
        cfg = pretrain.load(config, ["strategy=mirrored",
                                     f"trainer.train_steps={step}"])
        trainer = pretrain.build_trainer(cfg, log=print)
        trainer.train()
    print("run done:", config)
    np.savez(config + ".npz", *[w.numpy() for w in trainer.model.weights])
"""


def _env(**extra):
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", **extra)


def _weights(path):
    data = np.load(path)
    return [data[k] for k in data.files]


def _assert_close(a, b):
    assert len(a) == len(b) > 20
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, atol=1e-6, rtol=0)


def _curve(run_dir):
    """{step: the last train/loss logged at it} from TensorBoard."""
    curve = {}
    for path in sorted(tf.io.gfile.glob(str(run_dir / "tensorboard" /
                                            "events.*"))):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.tag == "train/loss":
                    curve[event.step] = float(tf.make_ndarray(value.tensor))
    return curve


@pytest.mark.slow
def test_mirrored_resume_continues_the_data_and_equals_a_straight_run(
        sample_pairs, tmp_path):
    pairs_dir, _ = sample_pairs
    configs = {name: pretrain_config(tmp_path / name, pairs_dir,
                                     train_steps=15, checkpoint_every=5)
               for name in ("straight", "resumed")}
    process = subprocess.run(
        [sys.executable, "-c", MIRRORED, f"{configs['straight']}:15",
         f"{configs['resumed']}:5,15"],
        capture_output=True, text=True, timeout=400, env=_env())
    assert process.returncode == 0, process.stdout[-2000:] + \
        process.stderr[-2000:]
    straight_log, resumed_log = process.stdout.split(
        f"run done: {configs['straight']}")
    assert "fast-forwarded" not in straight_log
    assert "input fast-forwarded past the 5 steps" in resumed_log
    _assert_close(_weights(f"{configs['straight']}.npz"),
                  _weights(f"{configs['resumed']}.npz"))
    straight = _curve(tmp_path / "straight" / "run")
    resumed = _curve(tmp_path / "resumed" / "run")
    assert sorted(straight) == sorted(resumed) == [5, 10, 15]
    for step in straight:
        assert abs(straight[step] - resumed[step]) <= 1e-5, step


def _cluster(config, tmp_path, name):
    """Starts the 2 workers of a run; returns the processes."""
    workers = [f"127.0.0.1:{port}" for port in free_ports(2)]
    processes = []
    for task in range(2):
        tf_config = json.dumps({"cluster": {"worker": workers},
                                "task": {"type": "worker", "index": task}})
        processes.append(subprocess.Popen(
            [sys.executable, "-c", WORKER, str(config)],
            stdout=open(tmp_path / f"{name}_{task}.log", "a"),
            stderr=subprocess.STDOUT, env=_env(TF_CONFIG=tf_config)))
    return processes


def _wait(processes, timeout=300):
    try:
        return [p.wait(timeout=timeout) for p in processes]
    finally:
        for p in processes:
            p.kill()


def _wait_for_checkpoint(run_dir, at_least, timeout=240):
    directory = str(run_dir / "checkpoints")
    deadline = time.time() + timeout
    while time.time() < deadline:
        latest = tf.train.latest_checkpoint(directory)
        if latest and int(latest.rsplit("-", 1)[1]) >= at_least:
            return
        time.sleep(0.05)
    raise AssertionError(f"no checkpoint >= {at_least} in {directory}")


def _final(run_dir, directory="checkpoints"):
    from bert_tf import checkpoints
    prefix = tf.train.latest_checkpoint(str(run_dir / directory))
    assert prefix.endswith("ckpt-30"), prefix
    return list(checkpoints.read_model_variables(prefix).values())


def _assert_equal(a, b):
    assert len(a) == len(b) > 20
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def _damage_the_newest_checkpoint(run_dir):
    """Truncates the newest checkpoint's data; returns (the prefix of the
    one before it, the damaged one's)."""
    state = tf.train.get_checkpoint_state(str(run_dir / "checkpoints"))
    *_, older, newest = state.all_model_checkpoint_paths
    data = pathlib.Path(newest + ".data-00000-of-00001")
    data.write_bytes(data.read_bytes()[:data.stat().st_size // 2])
    return older, newest


@pytest.mark.slow
def test_two_workers_killed_or_stopped_resume_exactly(sample_pairs,
                                                      tmp_path):
    """Two MultiWorkerMirrored workers on loopback: a straight run (two
    replicas, the same weights on both workers at the end); one
    where a worker is SIGKILLed at a random step (its peer stops with a
    clear error) and both restart; one where a worker gets SIGTERM, both
    save the same step and exit with 143, the newest checkpoint is then
    truncated (the chief reports it and sets it aside), and both restart
    from the same older one. All three end with the same weights and
    curve."""
    pairs_dir, _ = sample_pairs
    settings = dict(train_steps=30, steps_per_loop=5, checkpoint_every=5)
    runs = {}
    for name in ("straight", "sigkill", "sigterm"):
        config = pretrain_config(tmp_path / name, pairs_dir, **settings)
        run_dir = tmp_path / name / "run"
        processes = _cluster(config, tmp_path, name)
        if name == "sigkill":
            _wait_for_checkpoint(run_dir, np.random.randint(1, 4) * 5)
            processes[1].send_signal(signal.SIGKILL)
            # The survivor's collectives are aborted: a clear error, exit 2.
            assert _wait(processes, timeout=120)[0] == 2
            survivor = (tmp_path / "sigkill_0.log").read_text()
            assert "another worker stopped responding" in survivor and \
                "Restart every worker" in survivor, survivor[-2000:]
            assert "Traceback" not in survivor, survivor[-2000:]
            # The killed worker's own checkpoints may lag the chief's (it
            # died between the two saves) or be lost with its machine:
            # every worker resumes from the chief's.
            shutil.rmtree(run_dir / "scratch", ignore_errors=True)
            processes = _cluster(config, tmp_path, name)
        elif name == "sigterm":
            _wait_for_checkpoint(run_dir, 10)
            processes[0].send_signal(signal.SIGTERM)
            codes = _wait(processes)
            logs = [(tmp_path / f"sigterm_{t}.log").read_text()
                    for t in range(2)]
            assert codes == [143, 143], logs
            assert all("stopped by SIGTERM at step" in log for log in logs)
            older, stopped = _damage_the_newest_checkpoint(run_dir)
            assert 10 <= int(stopped.rsplit("-", 1)[1]) < 30
            processes = _cluster(config, tmp_path, name)
        codes = _wait(processes)
        logs = [(tmp_path / f"{name}_{t}.log").read_text() for t in range(2)]
        assert codes == [0, 0], logs
        if name == "straight":
            # Two replicas, one per worker, that end with identical
            # weights: the chief's checkpoint and the other's scratch one.
            assert all("CollectiveAllReduceStrategy, 2 replicas" in log
                       for log in logs), logs
            _assert_equal(_final(run_dir),
                          _final(run_dir, "scratch/worker_1"))
        if name != "straight":
            assert "input fast-forwarded past the" in logs[0], logs[0]
            resumed = str(run_dir / "checkpoints" / "ckpt-")
            assert all(f"restored {resumed}" in log for log in logs), logs
            assert all("Traceback" not in log for log in logs), logs
        if name == "sigterm":
            # The chief set the damaged newest checkpoint aside; both
            # workers resumed from the same older one.
            assert f"{os.path.basename(stopped)} does not read" in logs[0]
            assert (run_dir / "checkpoints" / "unreadable" / (
                os.path.basename(stopped) +
                ".data-00000-of-00001")).exists()
            step = older.rsplit("-", 1)[1]
            assert all(f"restored {older} at step {step}" in log
                       for log in logs), logs
        runs[name] = (_final(run_dir), _curve(run_dir))
    straight_weights, straight_curve = runs["straight"]
    assert sorted(straight_curve) == list(range(5, 31, 5))
    for name in ("sigkill", "sigterm"):
        weights, curve = runs[name]
        _assert_close(straight_weights, weights)
        # No gap and no replay: the same steps, the same losses.
        assert sorted(curve) == sorted(straight_curve), (name, curve)
        for step, loss in straight_curve.items():
            assert abs(curve[step] - loss) <= 1e-5, (name, step)
