"""What resuming costs under multi-device strategies: the seeded pre-training
input is fast-forwarded by the restored step (`skip_batches`, skipped
before tokenizing and masking). Compares the time to the first batch after
N skipped batches with the time to make N batches, on the real sample
pairs (seq 128, batch 32, the MiniLM vocab), and checks that the batch
reached equals batch N of an unbroken pass.

    .venv/bin/python benchmarks/fast_forward.py [--batches 2000]
"""

import argparse
import os
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=2000)
    args = parser.parse_args()

    import numpy as np
    from input_pipeline import real_pairs

    from bert_tf import samples
    from bert_tf.data.pretraining import pretraining_dataset

    vocab = str(samples.fetch("minilm") / "vocab.txt")
    out = tempfile.mkdtemp(prefix="pairs_")
    stats = real_pairs(out)

    def make(skip=0):
        return pretraining_dataset(out, vocab, 32, seq_length=128,
                                   max_predictions_per_seq=20, seed=7,
                                   skip_batches=skip)

    start = time.perf_counter()
    iterator = iter(make())
    for _ in range(args.batches):
        next(iterator)
    unbroken = next(iterator)
    made = time.perf_counter() - start
    start = time.perf_counter()
    reached = next(iter(make(args.batches)))
    skipped = time.perf_counter() - start
    same = all(np.array_equal(unbroken[k], reached[k]) for k in unbroken)
    print(f"{stats.pairs:,} real pairs; {args.batches} batches of 32 "
          f"({args.batches * 32 / stats.pairs:.1f} passes)")
    print(f"making them:            {made:7.1f} s")
    print(f"fast-forward past them: {skipped:7.1f} s "
          f"({made / skipped:.1f}x faster)")
    print(f"batch {args.batches} identical to the unbroken pass's: {same}")


if __name__ == "__main__":
    main()
