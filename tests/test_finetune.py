"""`bert-tf finetune`: config, init sources, training through the shared
trainer, per-epoch evaluation, best checkpoint, test metrics."""

import json

import numpy as np
import pytest
import yaml
from toy_task import ENCODER, VOCAB, toy_config, write_toy_task

from bert_tf import checkpoints
from bert_tf import config as config_lib
from bert_tf import finetune
from bert_tf.models.encoder import BertEncoder
from bert_tf.tasks.classification.task import load_classifier
from bert_tf.text.vocab import Vocab


@pytest.mark.slow
def test_finetune_learns_and_keeps_the_best_epoch(toy_run):
    directory, result = toy_run
    best = result.best_dir
    assert best == directory / "run" / "best"
    for name in ("task.yaml", "vocab.txt", "model.ckpt.index",
                 "best.json", "metrics.json"):
        assert (best / name).is_file(), name
    # One evaluation per epoch (60 steps of 32 over 320 examples).
    assert [e["step"] for e in result.eval_history] == list(range(10, 61,
                                                                  10))
    accuracies = [e["accuracy"] for e in result.eval_history]
    assert result.best["value"] == max(accuracies) >= 0.9
    assert result.best["step"] == result.eval_history[
        int(np.argmax(accuracies))]["step"]
    assert result.test["accuracy"] >= 0.9 and 0 <= result.test["f1"] <= 1
    saved = json.loads((best / "metrics.json").read_text())
    assert saved["test"]["accuracy"] == result.test["accuracy"]
    spec = yaml.safe_load((best / "task.yaml").read_text())
    assert spec["labels"] == ["negative", "positive"] and not spec["pair"]
    assert spec["kind"] == "classification"
    # The best model reloads and scores the dev set as recorded.
    model, _, _ = load_classifier(directory / "run")
    assert model.num_classes == 2
    assert len(result.history) == 12 and result.history[-1]["step"] == 60


@pytest.mark.slow
def test_init_from_bert_tf_directory_and_hf(tmp_path, minilm_dir, minilm):
    encoder = BertEncoder(**ENCODER)
    checkpoints.save_pretrained(tmp_path / "pre", encoder,
                                Vocab(tuple(VOCAB)))
    write_toy_task(tmp_path)
    cfg = toy_config(tmp_path, init=str(tmp_path / "pre"), vocab="")
    init = finetune.resolve_init(cfg)
    assert init.encoder.hidden_size == 32 and "bert_tf checkpoint" in \
        init.description
    fresh = BertEncoder.from_config_object(init.encoder)
    init.restore(fresh)
    assert len(encoder.weights) == len(fresh.weights) > 0
    for a, b in zip(encoder.weights, fresh.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())

    cfg = toy_config(tmp_path, init=f"hf:{minilm_dir}", vocab="")
    init = finetune.resolve_init(cfg)
    assert init.vocab_path == minilm_dir / "vocab.txt"
    fresh = BertEncoder.from_config_object(init.encoder)
    init.restore(fresh)
    np.testing.assert_array_equal(fresh.pooler.kernel.numpy(),
                                  minilm.encoder.pooler.kernel.numpy())


def test_finetune_config_errors(tmp_path):
    write_toy_task(tmp_path)
    with pytest.raises(ValueError, match="vocab is required"):
        toy_config(tmp_path, vocab="")
    with pytest.raises(ValueError, match="Unknown config key 'epoch'"):
        config_lib.from_dict(config_lib.FinetuneConfig, {"epoch": 3})
    with pytest.raises(ValueError, match="task.name = 'sst2'"):
        finetune.task_of(toy_config(tmp_path, **{"task.name": "sst2"}))
    with pytest.raises(ValueError, match="task.kind = 'ner'"):
        finetune.task_of(toy_config(tmp_path, **{"task.kind": "ner"}))
    cfg = toy_config(tmp_path, seq_length=64)
    with pytest.raises(ValueError, match="seq_length = 64 exceeds"):
        finetune.run(cfg, log=lambda *a: None)
    cfg = toy_config(tmp_path, vocab=str(tmp_path / "train.tsv"))
    with pytest.raises(ValueError):
        finetune.run(cfg, log=lambda *a: None)


def test_finetune_configs_in_repo_validate():
    from pathlib import Path
    configs = sorted((Path(__file__).resolve().parents[1] / "configs" /
                      "finetune").glob("*.yaml"))
    assert len(configs) >= 11, configs
    for path in configs:
        cfg = finetune.load(path)
        lines = []
        finetune.run(cfg, dry_run=True, log=lines.append)
        assert "strategy:" in lines[-1], path


MIRRORED_FINETUNE = """
import sys
import tensorflow as tf
tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0],
    [tf.config.LogicalDeviceConfiguration()] * 2)
sys.path.insert(0, sys.argv[2])
from pathlib import Path
from bert_tf import finetune
from toy_task import toy_config, write_toy_task
directory = Path(sys.argv[1])
write_toy_task(directory)
result = finetune.run(toy_config(directory, strategy="mirrored"),
                      log=print)
print("RESULT", result.best["value"], result.test["accuracy"])
"""


@pytest.mark.slow
def test_finetune_under_mirrored_strategy(tmp_path):
    """The same trainer fine-tunes over 2 replicas (2 logical CPUs)."""
    import os
    import subprocess
    import sys
    from pathlib import Path
    result = subprocess.run(
        [sys.executable, "-c", MIRRORED_FINETUNE, str(tmp_path),
         str(Path(__file__).parent)], capture_output=True, text=True,
        timeout=600, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[
        -3000:]
    assert "mirrored, 2 replicas" in result.stdout
    best, test = map(float, result.stdout.split("RESULT")[-1].split())
    assert best >= 0.9 and test >= 0.9


@pytest.mark.slow
def test_a_run_logs_plainly_and_a_finished_run_is_not_trained_again(
        tmp_path):
    """`bert-tf finetune ... > log.txt`: plain progress lines, no terminal
    codes, no TF warning about unrestored values. Run again, it says in one
    line that the run is finished; --fresh moves the old run aside
    (`test_fresh_moves_the_old_run_aside`)."""
    import os
    import subprocess
    import sys

    write_toy_task(tmp_path)
    config = tmp_path / "toy.yaml"
    config_lib.save_config(toy_config(tmp_path, epochs=1), config)
    command = [sys.executable, "-m", "bert_tf.cli", "finetune", "--config",
               str(config)]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="0")

    def run(*extra):
        log = tmp_path / "log.txt"
        with open(log, "w") as out:
            result = subprocess.run(command + list(extra), stdout=out,
                                    stderr=subprocess.STDOUT, env=env,
                                    timeout=600)
        assert result.returncode == 0, log.read_text()[-3000:]
        return log.read_text()

    first = run()
    assert "\x1b" not in first
    assert "step 10/10" in first and "_Default" not in first
    assert "unrestored" not in first.lower()
    again = run()
    lines = [line for line in again.splitlines() if str(tmp_path) in line]
    assert len(lines) == 1 and "is a finished run" in lines[0], again
    assert "unrestored" not in again.lower() and "step 1/" not in again


def test_fresh_moves_the_old_run_aside(tmp_path):
    """`--fresh`: the old run directory moves to DIR.previous-N (the first
    free N), nothing is deleted, and the run starts in an empty one."""
    from bert_tf.training.run_setup import move_aside

    run = tmp_path / "run"
    (run / "best").mkdir(parents=True)
    (run / "best" / "metrics.json").write_text("{}")
    (tmp_path / "run.previous-1").mkdir()
    lines = []
    cfg = toy_config(tmp_path)
    assert finetune.already_finished(cfg, fresh=True, log=lines.append) \
        is None
    assert lines == [f"moved the previous run {run} to "
                     f"{tmp_path / 'run.previous-2'}"]
    assert (tmp_path / "run.previous-2" / "best" / "metrics.json").is_file()
    assert not run.exists() and move_aside(run) is None


def test_a_run_is_finished_only_for_the_config_it_finished_with(tmp_path):
    """The same config again (`mixed_precision: auto` matching whatever
    the run chose) finds the run finished; more steps continue it."""
    cfg = toy_config(tmp_path, mixed_precision="auto")
    run = tmp_path / "run"
    (run / "best").mkdir(parents=True)
    config_lib.save_config(
        config_lib.from_dict(config_lib.FinetuneConfig, {
            **config_lib.to_dict(cfg), "mixed_precision": "float32"}),
        run / "finetune.yaml")
    (run / "best" / "metrics.json").write_text(json.dumps(
        {"best": {"step": 60, "value": 0.9}, "test": {"accuracy": 0.9}}))
    lines = []
    result = finetune.already_finished(cfg, log=lines.append)
    assert result.best["step"] == 60 and result.test == {"accuracy": 0.9}
    assert len(lines) == 1 and "is a finished run" in lines[0]
    longer = toy_config(tmp_path, mixed_precision="auto", epochs=12)
    assert finetune.already_finished(longer, log=lines.append) is None


def test_fresh_refuses_a_directory_that_is_no_run(tmp_path):
    """`--fresh` with `trainer.model_dir` at a home or data folder: one
    line, nothing moved."""
    home = tmp_path / "home"
    (home / "photos").mkdir(parents=True)
    (home / "notes.txt").write_text("keep")
    cfg = toy_config(tmp_path)
    cfg.trainer.model_dir = str(home)
    with pytest.raises(ValueError, match=r"--fresh: .*home is not a run "
                                         r"directory .* refusing to move"):
        finetune.already_finished(cfg, fresh=True, log=lambda line: None)
    assert (home / "notes.txt").read_text() == "keep"
    assert not list(tmp_path.glob("home.previous-*"))
