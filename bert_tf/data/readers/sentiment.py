"""The real sentiment sample: Rotten Tomatoes movie-review sentences.

10,605 sentences with human sentiment scores in [-4, 4] (Hutto & Gilbert,
ICWSM 2014; shipped in the vaderSentiment sdist, MIT). Like SST-2:
score > 0 is positive, score < 0 negative, the 37 neutral (0) sentences are
dropped. The split is a fixed, seeded shuffle: 80% train, 10% validation,
10% test.
"""

import numpy as np
import tensorflow as tf

from bert_tf.data import samples
from bert_tf.data.readers.base import TaskData

FILE = "movieReviewSnippets_GroundTruth.txt"
LABELS = ("negative", "positive")
SHARES = (("train", 0.8), ("validation", 0.1), ("test", 0.1))


def read_rt_snippets(cache=None):
    """(texts, scores) of all 10,605 sentences, in file order."""
    path = samples.fetch("rt_sentiment", cache=cache) / FILE
    texts, scores = [], []
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            parts = line.rstrip("\r\n").split("\t")
            if len(parts) != 3:
                raise ValueError(f"{path}:{number}: expected id, score, text "
                                 "separated by tabs.")
            scores.append(float(parts[1]))
            texts.append(parts[2])
    return texts, np.array(scores)


def load_rt_sentiment(cache=None, seed=0):
    """The RT sentiment sample as a binary `TaskData` (8,454 / 1,057 / 1,057
    sentences with seed 0).

    Args:
        cache: sample cache directory.
        seed: the split's shuffle seed (0 is the documented split).

    Example:
    >>> task = load_rt_sentiment()
    >>> task.sizes
    {'train': 8454, 'validation': 1057, 'test': 1057}
    """
    texts, scores = read_rt_snippets(cache)
    keep = np.flatnonzero(scores != 0)
    order = keep[np.random.default_rng(seed).permutation(len(keep))]
    splits, sizes, start = {}, {}, 0
    for i, (split, share) in enumerate(SHARES):
        end = len(order) if i == len(SHARES) - 1 else \
            start + int(round(share * len(order)))
        index = order[start:end]
        start = end
        splits[split] = tf.data.Dataset.from_tensor_slices({
            "text": np.array([texts[j] for j in index], dtype=object),
            "label": (scores[index] > 0).astype(np.int64)})
        sizes[split] = len(index)
    return TaskData("sample:rt_sentiment", LABELS, False, ("accuracy", "f1"),
                    splits, sizes)
