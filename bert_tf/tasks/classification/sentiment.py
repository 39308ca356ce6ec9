"""The real sentiment sample as a classification task: Rotten Tomatoes
movie-review sentences (see `bert_tf.samples.readers`)."""

import numpy as np
import tensorflow as tf

from bert_tf.samples.readers import rt_splits
from bert_tf.tasks.classification.task_data import ClassificationData

LABELS = ("negative", "positive")


def load_rt_sentiment(cache=None, seed=0):
    """The RT sentiment sample as a binary `ClassificationData` (8,454 /
    1,057 / 1,057
    sentences with seed 0).

    Args:
        cache: sample cache directory.
        seed: the split's shuffle seed (0 is the documented split).

    Examples:
        >>> task = load_rt_sentiment()
        >>> task.sizes
        {'train': 8454, 'validation': 1057, 'test': 1057}
    """
    splits, sizes = {}, {}
    for split, (texts, labels) in rt_splits(cache, seed).items():
        splits[split] = tf.data.Dataset.from_tensor_slices({
            "text": np.array(texts, dtype=object), "label": labels})
        sizes[split] = len(texts)
    return ClassificationData("sample:rt_sentiment", LABELS, False,
                              ("accuracy", "f1"),
                    splits, sizes)
