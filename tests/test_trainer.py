"""The strategy.run trainer: resume, NaN stop, strategies, CLI."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf
import yaml

from bert_tf import config as config_lib
from bert_tf.training import distribute
from bert_tf.training.optimization import (OptimizerConfig, create_optimizer,
                                           WarmUpPolynomialDecay)
from conftest import pretrain_config

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "configs",
                       "pretrain")


def _pretrain(config_path, *extra):
    return subprocess.Popen(
        [sys.executable, "-m", "bert_tf.cli", "pretrain", "--config",
         str(config_path), *extra], stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))


def _checkpoints(directory):
    """The prefixes of the checkpoints in `directory`, oldest first."""
    state = tf.train.get_checkpoint_state(str(directory))
    return list(state.all_model_checkpoint_paths) if state else []


def _final_variables(model_dir):
    from bert_tf import checkpoints
    prefix = tf.train.latest_checkpoint(str(model_dir / "checkpoints"))
    return prefix, checkpoints.read_model_variables(prefix)


@pytest.mark.slow
def test_sigkill_and_resume_equals_an_uninterrupted_run(sample_pairs,
                                                         tmp_path):
    """`bert-tf pretrain` SIGKILLed after its second checkpoint, whose
    newest checkpoint is then cut in half: the rerun warns in one line,
    sets the damaged one aside, resumes from the older one and ends
    bitwise equal to an uninterrupted run."""
    import re
    pairs_dir, _ = sample_pairs
    steps = dict(train_steps=100, checkpoint_every=25)
    straight = pretrain_config(tmp_path / "a", pairs_dir, **steps)
    process = _pretrain(straight)
    output = process.communicate(timeout=300)[0]
    assert process.returncode == 0, output
    assert "wrote checkpoint" in output and "final: " in output
    # On a CPU with AVX2 and no AVX-512 the command turns oneDNN on and
    # says so (bert_tf.precision.onednn_for_training); elsewhere it is quiet.
    from bert_tf.precision import ONEDNN_SWITCH, cpu_flags
    flags = cpu_flags()
    turned_on = ("avx2" in flags and "avx512f" not in flags
                 and ONEDNN_SWITCH not in os.environ)
    assert ("oneDNN: on for training" in output) == turned_on, output[:500]

    killed = pretrain_config(tmp_path / "b", pairs_dir, **steps)
    process = _pretrain(killed)
    directory = tmp_path / "b" / "run" / "checkpoints"
    deadline = time.time() + 240
    while len(_checkpoints(directory)) < 2 and time.time() < deadline:
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=60)
    assert process.returncode == -signal.SIGKILL
    *_, older, newest = _checkpoints(directory)
    data = newest + ".data-00000-of-00001"
    with open(data, "r+b") as f:
        f.truncate(os.path.getsize(data) // 2)
    process = _pretrain(killed)
    output = process.communicate(timeout=300)[0]
    assert process.returncode == 0, output
    assert "Traceback" not in output
    damaged = os.path.basename(newest)
    assert re.search(rf"warning: checkpoint .*{damaged} does not read \("
                     rf"{damaged}.data-00000-of-00001, {damaged}.index: .*\); "
                     r"trying the next older one", output), output[-2000:]
    step = older.rsplit("-", 1)[1]
    assert f"restored {older} at step {step}" in output, output[-2000:]
    assert sorted(os.listdir(directory / "unreadable")) == [
        f"{damaged}.data-00000-of-00001", f"{damaged}.index"]

    prefix_a, a = _final_variables(tmp_path / "a" / "run")
    prefix_b, b = _final_variables(tmp_path / "b" / "run")
    assert prefix_a.endswith("ckpt-100") and prefix_b.endswith("ckpt-100")
    assert a.keys() == b.keys() and len(a) > 20
    for name in a:  # bitwise identical
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    assert (tmp_path / "b" / "run" / "tensorboard").is_dir()


@pytest.mark.slow
def test_resuming_a_checkpoint_of_another_optimizer_layout_is_refused(
        sample_pairs, tmp_path, monkeypatch):
    """A run directory written with Keras's per-variable AdamW (bert_tf
    before FusedAdamW) is not resumed into the fused layout: a clear error
    that says what to do, and the checkpoint stays as it was."""
    import keras
    from bert_tf import pretrain
    from bert_tf.training import optimization
    pairs_dir, _ = sample_pairs
    cfg = pretrain.load(pretrain_config(tmp_path, pairs_dir, train_steps=5,
                                steps_per_loop=5, checkpoint_every=5))
    monkeypatch.setattr(optimization, "FusedAdamW", keras.optimizers.AdamW)
    pretrain.build_trainer(cfg, log=lambda *a: None).train()
    monkeypatch.undo()
    checkpoints_dir = tmp_path / "run" / "checkpoints"
    before = {p.name: p.stat().st_mtime_ns for p in checkpoints_dir.iterdir()}
    with pytest.raises(ValueError, match=r"Cannot resume from .*ckpt-5: .*"
                       r"optimizer.*new trainer.model_dir.*init_checkpoint="):
        pretrain.build_trainer(cfg, log=lambda *a: None).train()
    assert {p.name: p.stat().st_mtime_ns
            for p in checkpoints_dir.iterdir()} == before


@pytest.mark.slow
def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(sample_pairs,
                                                           tmp_path):
    from bert_tf import pretrain
    from bert_tf.models.pretrainer import BertPretrainer
    from bert_tf.training.trainer import NonFiniteLossError

    pairs_dir, _ = sample_pairs
    cfg = pretrain.load(pretrain_config(tmp_path, pairs_dir))
    trainer = pretrain.build_trainer(cfg, log=lambda *a: None)
    model, optimizer = trainer.model, trainer.optimizer
    original = BertPretrainer.compute_loss

    def poisoned(self, *args, **kwargs):
        loss = original(self, *args, **kwargs)
        return loss + tf.where(optimizer.iterations >= 12, np.nan, 0.0)

    model.compute_loss = poisoned.__get__(model)
    trainer._train_loop = trainer._make_train_loop()
    with pytest.raises(NonFiniteLossError, match=r"Loss became nan .* last "
                                                 r"good checkpoint is .*"
                                                 r"ckpt-10"):
        trainer.train()
    assert trainer.manager.latest_checkpoint.endswith("ckpt-10")
    assert not (tmp_path / "run" / "checkpoints" / "ckpt-15.index").exists()


def test_dry_run_of_every_shipped_config():
    from bert_tf import cli
    for name in ("sample_cpu", "bert_base_paper", "bert_large_tpu"):
        path = os.path.join(CONFIGS, f"{name}.yaml")
        cfg = config_lib.load_config(path, config_lib.PretrainConfig)
        assert cfg.trainer.train_steps > 0
        assert cli.main(["pretrain", "--config", path, "--dry-run"]) == 0
    paper = config_lib.load_config(os.path.join(CONFIGS,
                                                "bert_base_paper.yaml"),
                                   config_lib.PretrainConfig)
    assert (paper.data.global_batch_size, paper.optimizer.learning_rate,
            paper.optimizer.warmup_steps) == (256, 1e-4, 10_000)
    assert paper.encoder.num_parameters() == 109_482_240


def test_config_errors_are_named(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"trainer": {"train_step": 5}}))
    with pytest.raises(ValueError, match="trainer.train_step"):
        config_lib.load_config(bad, config_lib.PretrainConfig)
    bad.write_text(yaml.safe_dump({"data": {"train_files": "x", "vocab": "v",
                                            "seq_length": 1024}}))
    with pytest.raises(ValueError, match="data.seq_length = 1024 exceeds"):
        config_lib.load_config(bad, config_lib.PretrainConfig)
    with pytest.raises(ValueError, match="strategy = 'gpu_farm'"):
        distribute.create_strategy("gpu_farm")


def test_schedule_and_weight_decay_exclusions():
    import keras
    schedule = WarmUpPolynomialDecay(1e-4, warmup_steps=10, decay_steps=110)
    assert [round(float(schedule(s)), 9) for s in (0, 5, 10, 60, 110)] == [
        0.0, 5e-5, 1e-4, 5e-5, 0.0]
    optimizer = create_optimizer(OptimizerConfig(
        learning_rate=0.1, warmup_steps=0, decay_steps=0, weight_decay=0.5,
        clipnorm=0))
    kernel = keras.Variable(np.ones(3, "float32"), name="kernel")
    gamma = keras.Variable(np.ones(3, "float32"), name="gamma")
    bias = keras.Variable(np.ones(3, "float32"), name="bias")
    optimizer.apply_gradients([(tf.zeros(3), v) for v in (kernel, gamma,
                                                          bias)])
    np.testing.assert_allclose(kernel.numpy(), 0.95)
    np.testing.assert_array_equal(gamma.numpy(), 1.0)
    np.testing.assert_array_equal(bias.numpy(), 1.0)
    assert create_optimizer(OptimizerConfig(
        name="lamb", gradient_accumulation_steps=4)
    ).gradient_accumulation_steps == 4


@pytest.mark.parametrize("overrides", [["mixed_precision=mixed_bfloat16"],
                                       ["mixed_precision=mixed_float16"],
                                       ["trainer.jit_compile=true"]])
@pytest.mark.slow
def test_bfloat16_float16_and_xla_train_20_steps(sample_pairs, tmp_path, overrides):
    import keras
    from bert_tf import pretrain
    pairs_dir, _ = sample_pairs
    cfg = pretrain.load(pretrain_config(tmp_path, pairs_dir), overrides)
    try:
        trainer = pretrain.build_trainer(cfg, log=lambda *a: None)
        losses = [float(trainer._train_loop(trainer.iterator,
                                            tf.constant(5)))
                  for _ in range(4)]
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert int(trainer.step.numpy()) == 20
    assert np.isfinite(losses).all() and losses[-1] < losses[0], losses


@pytest.mark.slow
def test_mlm_only_pretraining_with_clipping_leaves_the_pooler(sample_pairs,
                                                            tmp_path):
    """Without NSP the pooler gets no gradient: it is skipped, not a crash."""
    from bert_tf import pretrain
    pairs_dir, _ = sample_pairs
    cfg = pretrain.load(pretrain_config(tmp_path, pairs_dir), [
        "nsp=false", "optimizer.clipnorm=1.0"])
    trainer = pretrain.build_trainer(cfg, log=lambda *a: None)
    pooler = trainer.model.encoder.pooler.kernel.numpy()
    embeddings = trainer.model.encoder.token_embedding.embeddings.numpy()
    loss = float(trainer._train_loop(trainer.iterator, tf.constant(3)))
    assert np.isfinite(loss)
    np.testing.assert_array_equal(trainer.model.encoder.pooler.kernel.numpy(),
                                  pooler)
    assert not np.array_equal(
        trainer.model.encoder.token_embedding.embeddings.numpy(), embeddings)


@pytest.mark.slow
def test_two_phase_schedule_continues_from_the_short_phase(sample_pairs,
                                                           tmp_path):
    """Phase 2 (longer sequences) starts from phase 1's checkpoint."""
    from bert_tf import checkpoints, pretrain
    pairs_dir, _ = sample_pairs
    config_path = pretrain_config(tmp_path, pairs_dir, train_steps=10,
                          steps_per_loop=5, checkpoint_every=10)
    first = pretrain.build_trainer(pretrain.load(config_path),
                                   log=lambda *a: None)
    first.train()
    phase_one = checkpoints.read_model_variables(
        tmp_path / "run" / "checkpoints")
    second = pretrain.build_trainer(pretrain.load(config_path, [
        "data.seq_length=128", "data.max_predictions_per_seq=20",
        f"init_checkpoint={tmp_path / 'run' / 'checkpoints'}",
        f"trainer.model_dir={tmp_path / 'phase2'}"]), log=lambda *a: None)
    assert int(second.step.numpy()) == 0  # a new run, not a resume
    encoder = second.model.encoder
    np.testing.assert_array_equal(
        encoder.embeddings.word_embeddings.embeddings.numpy(),
        phase_one["encoder/embeddings/word_embeddings/embeddings"])
    np.testing.assert_array_equal(
        second.model.next_sentence.dense.kernel.numpy(),
        phase_one["next_sentence/dense/kernel"])
    loss = float(second._train_loop(second.iterator, tf.constant(2)))
    assert np.isfinite(loss)
