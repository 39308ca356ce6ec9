"""Tagging's official metric: entity-level precision, recall and F1, equal
to seqeval's default mode (the tests check it against seqeval)."""


def entity_scores(gold, predicted, types=None):
    """Entity-level precision, recall and F1 (micro, and `f1_<type>`) from
    sets of (sentence, type, first word, last word), in [0, 1].

    Args:
        gold, predicted: sets of entity tuples.
        types: names of the type ids in the tuples (None: the tuples hold
            type names).

    Examples:
        >>> entity_scores({(0, "PER", 0, 1), (0, "LOC", 3, 3)},
        ...               {(0, "PER", 0, 1), (0, "PER", 3, 3)})["f1"]
        0.5
    """
    def prf(g, p):
        hit = len(g & p)
        precision = hit / len(p) if p else 0.0
        recall = hit / len(g) if g else 0.0
        f1 = 2 * precision * recall / (precision + recall) if hit else 0.0
        return precision, recall, f1

    precision, recall, f1 = prf(gold, predicted)
    result = {"f1": f1, "precision": precision, "recall": recall}
    keys = range(len(types)) if types is not None else sorted(
        {e[1] for e in gold | predicted})
    for key in keys:
        name = types[key] if types is not None else key
        result[f"f1_{name}"] = prf({e for e in gold if e[1] == key},
                                   {e for e in predicted if e[1] == key})[2]
    return result
