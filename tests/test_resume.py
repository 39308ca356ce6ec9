"""Exact resume under multi-device strategies and stopping on SIGTERM:
a restarted run continues the data where it stopped (no replay), and its
final weights and TensorBoard curve equal an uninterrupted run's; and
2 mirrored replicas train as one device does."""

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

# Mirrored over 2 logical CPUs, in one process (a process and its
# TensorFlow start cost more than these runs). First, for the config
# MATCH, without dropout: 20 single steps on one device, then on the 2
# replicas, their losses printed. Then for each argument CONFIG:STEPS,...:
# a new trainer on the config's model_dir to each number of steps in turn
# (straight to 15; or to 5, then a new trainer to 15).
MIRRORED = """
import os, sys
import numpy as np
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from bert_tf import pretrain
match, *runs = sys.argv[1:]
no_dropout = ["encoder.hidden_dropout=0.0", "encoder.attention_dropout=0.0"]
for strategy in ("default", "mirrored"):
    cfg = pretrain.load(match, no_dropout + [
        f"strategy={strategy}",
        f"trainer.model_dir={os.path.dirname(match)}/{strategy}"])
    trainer = pretrain.build_trainer(cfg, log=lambda *a: None)
    losses = [float(trainer._train_loop(trainer.iterator, tf.constant(1)))
              for _ in range(20)]
    print(strategy.upper(), trainer.strategy.num_replicas_in_sync, losses)
for run in runs:
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


def _assert_close(a, b, atol=1e-6):
    assert len(a) == len(b) > 20
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, atol=atol, rtol=0)


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


@pytest.fixture(scope="module")
def mirrored(sample_pairs, tmp_path_factory):
    """The MIRRORED process's output and configs: the one-device and
    2-replica runs, a straight run and a resumed one."""
    pairs_dir, _ = sample_pairs
    root = tmp_path_factory.mktemp("mirrored")
    configs = {name: pretrain_config(root / name, pairs_dir,
                                     train_steps=15, checkpoint_every=5)
               for name in ("straight", "resumed")}
    configs["match"] = pretrain_config(root / "match", pairs_dir)
    process = subprocess.run(
        [sys.executable, "-c", MIRRORED, str(configs["match"]),
         f"{configs['straight']}:15", f"{configs['resumed']}:5,15"],
        capture_output=True, text=True, timeout=400, env=_env())
    assert process.returncode == 0, process.stdout[-2000:] + \
        process.stderr[-2000:]
    return process.stdout, configs, root


@pytest.mark.slow
def test_mirrored_two_replicas_match_one_device(mirrored):
    """MirroredStrategy over 2 logical CPUs: the first 20 losses equal
    single-device training at the same global batch (within 1e-4)."""
    output, _, _ = mirrored
    lines = dict(line.split(" ", 1) for line in output.splitlines()
                 if line.startswith(("DEFAULT", "MIRRORED")))
    replicas_one, single = lines["DEFAULT"].split(" ", 1)
    replicas_two, two = lines["MIRRORED"].split(" ", 1)
    assert (replicas_one, replicas_two) == ("1", "2")
    single, two = np.array(json.loads(single)), np.array(json.loads(two))
    assert len(single) == 20 and single[-1] < single[0]
    np.testing.assert_allclose(two, single, atol=1e-4, rtol=0)


@pytest.mark.slow
def test_mirrored_resume_continues_the_data_and_equals_a_straight_run(
        mirrored):
    output, configs, root = mirrored
    straight_log, resumed_log = output.split(
        f"run done: {configs['straight']}")
    assert "fast-forwarded" not in straight_log
    assert "input fast-forwarded past the 5 steps" in resumed_log
    _assert_close(_weights(f"{configs['straight']}.npz"),
                  _weights(f"{configs['resumed']}.npz"))
    straight = _curve(root / "straight" / "run")
    resumed = _curve(root / "resumed" / "run")
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
    assert prefix.endswith("ckpt-40"), prefix
    return list(checkpoints.read_model_variables(prefix).values())


def _damage_the_newest_checkpoint(run_dir):
    """Truncates the newest checkpoint's data; returns (the prefix of the
    one before it, the damaged one's)."""
    state = tf.train.get_checkpoint_state(str(run_dir / "checkpoints"))
    *_, older, newest = state.all_model_checkpoint_paths
    data = pathlib.Path(newest + ".data-00000-of-00001")
    data.write_bytes(data.read_bytes()[:data.stat().st_size // 2])
    return older, newest


def _stop_by_sigterm(processes, run_dir, logs):
    """SIGTERM to the chief once it checkpointed step 10: both workers
    save the same step and exit 143. Returns that step."""
    _wait_for_checkpoint(run_dir, 10)
    processes[0].send_signal(signal.SIGTERM)
    codes = _wait(processes)
    assert codes == [143, 143], logs()
    assert all("stopped by SIGTERM at step" in log for log in logs())
    return int(tf.train.latest_checkpoint(
        str(run_dir / "checkpoints")).rsplit("-", 1)[1])


def _kill_a_worker(processes, run_dir, at_least, survivor_log):
    """SIGKILL to worker 1 once the chief checkpointed `at_least`: the
    survivor's collectives are aborted, a clear error and exit 2."""
    _wait_for_checkpoint(run_dir, at_least)
    processes[1].send_signal(signal.SIGKILL)
    assert _wait(processes, timeout=120)[0] == 2
    survivor = survivor_log()
    assert "another worker stopped responding" in survivor and \
        "Restart every worker" in survivor, survivor[-2000:]
    assert "Traceback" not in survivor, survivor[-2000:]


@pytest.mark.slow
def test_two_workers_killed_or_stopped_resume_exactly(sample_pairs,
                                                      tmp_path):
    """Two MultiWorkerMirrored workers on loopback. A straight run: two
    replicas, the same weights on both workers at the end. An interrupted
    one: the chief gets SIGTERM, both save the same step and exit 143;
    the newest checkpoint is then truncated, and both restart from the
    same older one (the chief reports it and sets it aside); then worker
    1 is SIGKILLed at a random later step (its peer stops with a clear
    error), and both restart again. Both runs end with the same weights
    and curve."""
    pairs_dir, _ = sample_pairs
    settings = dict(train_steps=40, steps_per_loop=5, checkpoint_every=5)
    runs = {}
    for name in ("straight", "interrupted"):
        config = pretrain_config(tmp_path / name, pairs_dir, **settings)
        run_dir = tmp_path / name / "run"

        def logs():
            return [(tmp_path / f"{name}_{t}.log").read_text()
                    for t in range(2)]
        processes = _cluster(config, tmp_path, name)
        if name == "interrupted":
            stopped = _stop_by_sigterm(processes, run_dir, logs)
            older, damaged = _damage_the_newest_checkpoint(run_dir)
            assert 10 <= stopped == int(damaged.rsplit("-", 1)[1]) < 40
            processes = _cluster(config, tmp_path, name)
            _kill_a_worker(processes, run_dir,
                           stopped + 5 * np.random.randint(1, 3),
                           lambda: logs()[0])
            # The killed worker's own checkpoints may lag the chief's (it
            # died between the two saves) or be lost with its machine:
            # every worker resumes from the chief's.
            shutil.rmtree(run_dir / "scratch", ignore_errors=True)
            processes = _cluster(config, tmp_path, name)
        codes = _wait(processes)
        assert codes == [0, 0], logs()
        if name == "straight":
            # Two replicas, one per worker, that end with identical
            # weights: the chief's checkpoint and the other's scratch one.
            assert all("CollectiveAllReduceStrategy, 2 replicas" in log
                       for log in logs()), logs()
            _assert_close(_final(run_dir),
                          _final(run_dir, "scratch/worker_1"), atol=0)
        else:
            chief = logs()[0]
            assert chief.count("input fast-forwarded past the") == 2, chief
            resumed = str(run_dir / "checkpoints" / "ckpt-")
            assert all(log.count(f"restored {resumed}") == 2
                       for log in logs()), logs()
            assert all("Traceback" not in log for log in logs()), logs()
            # After the SIGTERM, the chief set the damaged newest
            # checkpoint aside; both workers resumed from the older one.
            assert f"{os.path.basename(damaged)} does not read" in chief
            assert (run_dir / "checkpoints" / "unreadable" / (
                os.path.basename(damaged) +
                ".data-00000-of-00001")).exists()
            step = older.rsplit("-", 1)[1]
            assert all(f"restored {older} at step {step}" in log
                       for log in logs()), logs()
        runs[name] = (_final(run_dir), _curve(run_dir))
    straight_weights, straight_curve = runs["straight"]
    assert sorted(straight_curve) == list(range(5, 41, 5))
    weights, curve = runs["interrupted"]
    _assert_close(straight_weights, weights)
    # No gap and no replay: the same steps, the same losses.
    assert sorted(curve) == sorted(straight_curve), curve
    for step, loss in straight_curve.items():
        assert abs(curve[step] - loss) <= 1e-5, step
