"""The official SQuAD metrics (v1.1 and v2.0 evaluation scripts' rules).

Answers are normalized as the official scripts do: lower case, punctuation
removed, the articles a/an/the removed, whitespace collapsed. Exact match
and token F1 take the maximum over the gold answers; an unanswerable
question (no gold answers) scores 1 only for the empty prediction. SQuAD
2.0 adds HasAns/NoAns breakdowns and the best no-answer threshold over the
null-minus-best score differences. Figures are percentages, as the
official scripts print them.
"""

import collections
import re
import string

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text):
    """The official normalization.

    Examples:
        >>> normalize_answer("The  Eiffel-Tower!")
        'eiffeltower'
        >>> normalize_answer("an apple a day")
        'apple day'
    """
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction, gold):
    """1.0 when the normalized strings are equal.

    Examples:
        >>> exact_match("the Louvre", "Louvre.")
        1.0
    """
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1_score(prediction, gold):
    """Token-overlap F1 of the normalized strings (v2 rule: if either is
    empty, 1.0 when both are).

    Examples:
        >>> round(f1_score("Denver Broncos won", "the Denver Broncos"), 4)
        0.8
    """
    predicted = normalize_answer(prediction).split()
    expected = normalize_answer(gold).split()
    if not predicted or not expected:
        return float(predicted == expected)
    common = collections.Counter(predicted) & collections.Counter(expected)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(expected)
    return 2 * precision * recall / (precision + recall)


def _scores(prediction, golds):
    golds = [g for g in golds if normalize_answer(g)] or [""]
    return (max(exact_match(prediction, g) for g in golds),
            max(f1_score(prediction, g) for g in golds))


def squad_v1(golds, predictions):
    """SQuAD v1.1: {"exact_match", "f1"} in percent.

    Args:
        golds: per question, the list of gold answer texts.
        predictions: per question, the predicted text.

    Examples:
        >>> squad_v1([["Denver Broncos"], ["1966", "in 1966"]],
        ...          ["Denver Broncos", "1967"])
        {'exact_match': 50.0, 'f1': 50.0}
    """
    if len(golds) != len(predictions):
        raise ValueError(f"{len(golds)} questions but {len(predictions)} "
                         "predictions.")
    if not golds:
        return {"exact_match": 0.0, "f1": 0.0}
    pairs = [_scores(p, g) for p, g in zip(predictions, golds)]
    return {"exact_match": 100.0 * sum(e for e, _ in pairs) / len(pairs),
            "f1": 100.0 * sum(f for _, f in pairs) / len(pairs)}


def _best_threshold(span_scores, spans, no_answer_diffs, has_answer_gold):
    """The official `find_best_thresh`: the threshold on null - best above
    which answering "" maximizes the total score, and that score.

    Questions are taken in order of their difference; answering question i
    with its span changes the total by its span score (answerable) or by -1
    (unanswerable, when the span is not empty).
    """
    running = float(sum(1 for h in has_answer_gold if not h))
    best_total, best_threshold = running, 0.0
    for i in sorted(range(len(spans)), key=lambda i: no_answer_diffs[i]):
        if has_answer_gold[i]:
            running += span_scores[i]
        elif spans[i]:
            running -= 1.0
        if running > best_total:
            best_total, best_threshold = running, no_answer_diffs[i]
    return 100.0 * best_total / max(len(spans), 1), best_threshold


def squad_v2(golds, predictions, no_answer_diffs=None, spans=None):
    """SQuAD 2.0: exact/f1 overall, HasAns_/NoAns_, and the best threshold.

    Args:
        golds: per question, gold answer texts ([] or [""]: unanswerable).
        predictions: per question, the predicted text ("" : no answer).
        no_answer_diffs: per question, null score - best span score; with
            `spans` (each question's best span text), adds `best_exact`,
            `best_exact_thresh`, `best_f1`, `best_f1_thresh`.
        spans: per question, the best non-null span text.

    Examples:
        >>> result = squad_v2([["Paris"], []], ["Paris", ""])
        >>> result["exact"], result["HasAns_exact"], result["NoAns_exact"]
        (100.0, 100.0, 100.0)
    """
    if len(golds) != len(predictions):
        raise ValueError(f"{len(golds)} questions but {len(predictions)} "
                         "predictions.")
    has = [any(normalize_answer(g) for g in gold) for gold in golds]
    pairs = [_scores(p, g) for p, g in zip(predictions, golds)]
    result = {}

    def mean(values):
        values = list(values)
        return 100.0 * sum(values) / len(values) if values else 0.0

    result["exact"] = mean(e for e, _ in pairs)
    result["f1"] = mean(f for _, f in pairs)
    result["total"] = len(pairs)
    for name, want in (("HasAns", True), ("NoAns", False)):
        chosen = [pair for pair, h in zip(pairs, has) if h == want]
        result[f"{name}_exact"] = mean(e for e, _ in chosen)
        result[f"{name}_f1"] = mean(f for _, f in chosen)
        result[f"{name}_total"] = len(chosen)
    if no_answer_diffs is not None and spans is not None:
        span_pairs = [_scores(s, g) for s, g in zip(spans, golds)]
        for index, name in ((0, "exact"), (1, "f1")):
            best, threshold = _best_threshold(
                [pair[index] for pair in span_pairs], list(spans),
                [float(d) for d in no_answer_diffs], has)
            result[f"best_{name}"] = best
            result[f"best_{name}_thresh"] = threshold
    return result
