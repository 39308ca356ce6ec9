"""The masking pipeline on the tf.data service against the local pipeline,
on loopback, on the real sample corpus (Wikipedia sample + Lee, pairs at
seq 128, the MiniLM vocab).

Starts a dispatcher and N workers with `bert-tf data-service`, then times
masked batches per second read by this process: from the local pipeline
(this process tokenizes, packs and masks) and from the service (the
workers do). On one 2-core machine both compete for the same cores; on a
cluster the workers are other hosts.

    .venv/bin/python benchmarks/data_service.py [--workers 2] [--batches 200]
"""

import argparse
import os
import socket
import subprocess
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def _start(*args):
    process = subprocess.Popen(
        [sys.executable, "-m", "bert_tf.cli", "data-service", *args],
        stdout=subprocess.PIPE, text=True, env=os.environ.copy())
    return process, process.stdout.readline().strip()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    from input_pipeline import measure, real_pairs

    from bert_tf import samples, service
    from bert_tf.data.pretraining import pretraining_dataset

    vocab = str(samples.fetch("minilm") / "vocab.txt")
    out = tempfile.mkdtemp(prefix="pairs_")
    stats = real_pairs(out)
    print(f"{stats.pairs:,} real pairs in {out}")

    def make():
        return pretraining_dataset(out, vocab, args.batch_size,
                                   seq_length=128, max_predictions_per_seq=20)

    # 10 warm-up batches: tracing, worker start, first buffers.
    local = measure(make(), args.batch_size, args.batches, warmup=10)
    with socket.socket() as probe:
        probe.bind(("", 0))
        port = probe.getsockname()[1]
    processes = [_start("dispatcher", "--port", str(port))[0]]
    try:
        for _ in range(args.workers):
            processes.append(_start("worker", "--dispatcher",
                                    f"localhost:{port}", "--host",
                                    "localhost")[0])
        remote = measure(service.distribute(make(), f"localhost:{port}"),
                         args.batch_size, args.batches, warmup=10)
    finally:
        for process in processes[::-1]:
            process.terminate()
            process.wait()
    print(f"{'pipeline':<36} {'examples/s':>11}")
    print(f"{'local (this process)':<36} {local:>11,.0f}")
    print(f"{f'tf.data service, {args.workers} workers, loopback':<36} "
          f"{remote:>11,.0f}")
    print(f"{args.batches} batches of {args.batch_size} after 10 warm-up "
          f"batches; {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
