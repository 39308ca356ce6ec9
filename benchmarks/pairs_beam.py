"""Pair creation on Apache Beam against the in-process writer, on the real
corpus (the Wikipedia sample + the Lee corpus) and on 10 copies of it.

Each run is a fresh process (so peak memory is its own). Prints pairs per
second and peak resident memory: of the main process and of its largest
child (Beam's DirectRunner workers in multi-processing mode; the
in-process writer's pool). Both make the same pairs (checked as a
multiset on the 1x corpus).

    .venv/bin/python benchmarks/pairs_beam.py [--copies 1 10] [--workers 2]
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
SPECS = ["sample:wikipedia", "sample:lee"]
SETTINGS = dict(seq_length=128, dupe_factor=5, seed=12345)


def one(kind, copies, workers, out):
    """Runs one pair creation; prints a JSON line of its figures."""
    from bert_tf import samples

    vocab = samples.fetch("minilm") / "vocab.txt"
    specs = SPECS * copies
    start = time.perf_counter()
    if kind == "beam":
        from bert_tf.data.pairs_beam import run_pairs_pipeline

        stats = run_pairs_pipeline(
            specs, vocab, out, num_shards=4, log=lambda line: None,
            pipeline_args=[f"--direct_num_workers={workers}",
                           "--direct_running_mode=multi_processing"],
            **SETTINGS)
    else:
        from bert_tf.data import pairs
        from bert_tf.data.documents import read_documents
        from bert_tf.text.tokenizer import BertTokenizer

        stats = pairs.write_pairs(read_documents(specs),
                                  BertTokenizer(str(vocab)), out,
                                  workers=workers, num_shards=4,
                                  log=lambda line: None, **SETTINGS)
    seconds = time.perf_counter() - start
    print(json.dumps({
        "kind": kind, "copies": copies, "pairs": stats.pairs,
        "seconds": seconds,
        "main_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3,
        "child_mb": resource.getrusage(
            resource.RUSAGE_CHILDREN).ru_maxrss / 1e3}))


def _records(directory):
    import tensorflow as tf

    return sorted(bytes(r.numpy()) for r in tf.data.TFRecordDataset(sorted(
        str(p) for p in Path(directory).glob("pairs-*.tfrecord"))))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--one", nargs=3, metavar=("KIND", "COPIES", "OUT"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        return one(args.one[0], int(args.one[1]), args.workers, args.one[2])
    root = Path(tempfile.mkdtemp(prefix="bench_pairs_beam_"))
    rows = []
    for copies in args.copies:
        for kind in ("in-process", "beam"):
            out = root / f"{kind}-{copies}"
            result = subprocess.run(
                [sys.executable, __file__, "--workers", str(args.workers),
                 "--one", kind, str(copies), str(out)],
                capture_output=True, text=True, check=True)
            rows.append(json.loads(result.stdout.strip().splitlines()[-1]))
        if copies == 1:
            same = _records(root / "in-process-1") == _records(root /
                                                               "beam-1")
            print(f"1x corpus: Beam pairs == in-process pairs (multiset): "
                  f"{same}")
    print(f"{'writer':<12} {'corpus':>6} {'pairs':>9} {'seconds':>8} "
          f"{'pairs/s':>8} {'main MB':>8} {'worker MB':>10}")
    for r in rows:
        print(f"{r['kind']:<12} {r['copies']:>5}x {r['pairs']:>9,} "
              f"{r['seconds']:>8.1f} {r['pairs'] / r['seconds']:>8.0f} "
              f"{r['main_mb']:>8.0f} {r['child_mb']:>10.0f}")
    print(f"({args.workers} workers each; files under {root})")


if __name__ == "__main__":
    main()
