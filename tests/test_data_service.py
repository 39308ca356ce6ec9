"""The pre-training input on the tf.data service: a dispatcher and two
workers started by `bert-tf data-service` on loopback."""

import os
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data import service
from bert_tf.data.pretraining import pretraining_dataset
from conftest import free_ports, pretrain_config


def _start(*args):
    process = subprocess.Popen(
        [sys.executable, "-m", "bert_tf.cli", "data-service", *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    line = process.stdout.readline()  # printed once the server runs
    assert "tf.data service" in line, line + process.stdout.read()
    return process, line


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """(dispatcher address, its journal directory, worker addresses)."""
    port = free_ports(1)[0]
    journal = tmp_path_factory.mktemp("dispatcher")
    processes = []
    try:
        dispatcher, _ = _start("dispatcher", "--port", str(port),
                               "--work-dir", str(journal))
        processes.append(dispatcher)
        workers = []
        for _ in range(2):
            worker, line = _start("worker", "--dispatcher",
                                  f"localhost:{port}", "--host",
                                  "localhost")
            processes.append(worker)
            workers.append(line.split(" at ")[1].split()[0])
        yield f"localhost:{port}", journal, workers
    finally:
        # Workers are killed (as a lost host would be); the dispatcher
        # stops cleanly on SIGTERM.
        for process in processes[:0:-1]:
            process.kill()
        for process in processes:
            if process is processes[0]:
                process.terminate()
            assert process.wait(timeout=30) in (0, -9)


def _journal_bytes(journal):
    return b"".join(path.read_bytes() for path in journal.rglob("*")
                    if path.is_file())


def _masking_shares(batches, vocab):
    """(selected / maskable, [MASK] share, random share, kept share)."""
    selected = maskable = masked = kept = 0
    for batch in batches:
        valid = batch["masked_lm_weights"] > 0
        corrupted = np.take_along_axis(batch["input_word_ids"],
                                       batch["masked_lm_positions"], 1)[valid]
        # Every real piece but [CLS] and the two [SEP]s may be picked.
        maskable += (batch["input_mask"].sum(1) - 3).sum()
        selected += valid.sum()
        masked += (corrupted == vocab.mask_id).sum()
        kept += (corrupted == batch["masked_lm_ids"][valid]).sum()
    return (selected / maskable, masked / selected,
            1 - (masked + kept) / selected, kept / selected)


@pytest.mark.slow
def test_masked_batches_from_two_workers_match_the_local_pipeline(
        cluster, sample_pairs, bert_vocab):
    address, journal, workers = cluster
    directory, _ = sample_pairs
    make = lambda: pretraining_dataset(  # noqa: E731
        directory, bert_vocab, batch_size=32, seq_length=128,
        max_predictions_per_seq=20, shuffle_buffer=1000)
    served = service.distribute(make(), address)
    remote = [b for b in served.take(60).as_numpy_iterator()]
    local = [b for b in make().take(60).as_numpy_iterator()]
    assert remote[0].keys() == local[0].keys()
    for key in remote[0]:
        assert remote[0][key].shape == local[0][key].shape, key
    remote_shares = _masking_shares(remote, bert_vocab)
    local_shares = _masking_shares(local, bert_vocab)
    # Predictions are capped at 20 per sequence of up to 128 pieces, so
    # slightly under 15% of the maskable pieces are picked.
    assert 0.13 <= remote_shares[0] <= 0.155, remote_shares
    for expected, r, lo in zip((0.8, 0.1, 0.1), remote_shares[1:],
                               local_shares[1:]):
        assert abs(r - expected) <= 0.02 and abs(r - lo) <= 0.02, \
            (remote_shares, local_shares)
    assert abs(remote_shares[0] - local_shares[0]) <= 0.005
    # Both workers registered with the dispatcher (its journal).
    recorded = _journal_bytes(journal)
    assert all(w.encode() in recorded for w in workers), workers


@pytest.mark.slow
def test_pretraining_consumes_batches_from_the_service(
        cluster, sample_pairs, tmp_path):
    from bert_tf import pretrain

    address, journal, _ = cluster
    pairs_dir, _ = sample_pairs
    run = tmp_path / "run"
    path = pretrain_config(tmp_path, pairs_dir, train_steps=20,
                           checkpoint_every=10)
    lines = []
    results = pretrain.run(pretrain.load(path, [f"data.service={address}"]),
                           log=lines.append)
    assert np.isfinite(results["loss"]), results
    assert any(f"tf.data service at {address}" in l for l in lines), lines
    assert tf.train.latest_checkpoint(str(run / "checkpoints")) \
        .endswith("ckpt-20")
    # The dispatcher served this run's job.
    assert f"bert_tf_pretrain:{run}".encode() in _journal_bytes(journal)


def test_a_dead_dispatcher_is_a_clear_error_not_a_hang(capsys):
    from bert_tf import cli

    address = f"localhost:{free_ports(1)[0]}"  # nothing listens there
    start = time.time()
    with pytest.raises(RuntimeError, match=rf"no tf.data service "
                       rf"dispatcher answers at {address}.*bert-tf "
                       "data-service dispatcher"):
        service.distribute(tf.data.Dataset.range(3), address)
    with pytest.raises(ValueError, match="HOST:PORT"):
        service.check_dispatcher("localhost")
    # Through the command line: exit 2 and the message, no traceback.
    assert cli.main(["data-service", "worker", "--dispatcher",
                     address]) == 2
    err = capsys.readouterr().err
    assert f"no tf.data service dispatcher answers at {address}" in err
    assert "Traceback" not in err
    assert time.time() - start < 60
