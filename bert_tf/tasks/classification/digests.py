"""A real long-document set: RT "critic digests".

A digest is 16 Rotten Tomatoes snippets, as a critic's round-up of a
season, labelled by the sentiment of the majority: 10, 11 or 12 snippets
(62-75%) share the label and the rest have the other. The snippets are
shuffled, so the evidence is spread over the whole digest and the first
window alone sees about a third of it. A digest is about 300 words: 3 to
5 windows of 128 pieces with the uncased BERT vocab (3.7 on average).

Digests draw their snippets from one split of the documented RT split
(`rt_splits`), so no test snippet is seen in training; a snippet may be in
several digests of its split. Sizes: 800 train, 200 validation and 500
test digests, fixed by `seed`.
"""

import numpy as np
import tensorflow as tf

from bert_tf.samples.readers import rt_splits
from bert_tf.tasks.classification.task_data import ClassificationData

LABELS = ("negative", "positive")
SNIPPETS = 16
MAJORITIES = (10, 11, 12)
DIGESTS = {"train": 800, "validation": 200, "test": 500}


def make_digests(texts, labels, count, rng, snippets=SNIPPETS,
                 majorities=MAJORITIES):
    """`count` digests of `snippets` texts each: (digest texts, labels).

    Examples:
        >>> texts = [f"good {i}." for i in range(20)] + [
        ...     f"bad {i}." for i in range(20)]
        >>> labels = np.array([1] * 20 + [0] * 20)
        >>> digests, y = make_digests(texts, labels, 2, np.random.default_rng(0),
        ...                           snippets=5, majorities=(3,))
        >>> [(max(d.count("good"), d.count("bad")),
        ...   (d.count("good") > 2) == bool(label))
        ...  for d, label in zip(digests, y)]
        [(3, True), (3, True)]
    """
    by_label = [np.flatnonzero(labels == k) for k in (0, 1)]
    digests, digest_labels = [], []
    for _ in range(count):
        label = int(rng.integers(2))
        majority = int(rng.choice(majorities))
        chosen = np.concatenate([
            rng.choice(by_label[label], majority, replace=False),
            rng.choice(by_label[1 - label], snippets - majority,
                       replace=False)])
        rng.shuffle(chosen)
        digests.append(" ".join(texts[i] for i in chosen))
        digest_labels.append(label)
    return digests, np.array(digest_labels, np.int64)


def load_rt_digests(cache=None, seed=0):
    """The critic digests as a binary `ClassificationData` (see the module
    docstring).

    Examples:
        >>> task = load_rt_digests()
        >>> task.sizes
        {'train': 800, 'validation': 200, 'test': 500}
    """
    splits, sizes = {}, {}
    for number, (split, (texts, labels)) in enumerate(
            rt_splits(cache, seed).items()):
        rng = np.random.default_rng([seed, number])
        digests, y = make_digests(texts, labels, DIGESTS[split], rng)
        splits[split] = tf.data.Dataset.from_tensor_slices({
            "text": np.array(digests, dtype=object), "label": y})
        sizes[split] = len(digests)
    return ClassificationData("sample:rt_digests", LABELS, False,
                              ("accuracy", "f1"),
                    splits, sizes)
