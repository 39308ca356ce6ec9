"""Task metrics as GLUE defines them, computed over a whole evaluation set.

F1, Matthews correlation and the correlations are not averages of
per-batch values, so they are computed here from all labels and
predictions at once (NumPy; no scikit-learn needed).
"""

import numpy as np

METRICS = ("accuracy", "f1", "mcc", "pearson", "spearman")


def accuracy(labels, predictions):
    """Share of predictions equal to the labels.

    Examples:
        >>> accuracy([0, 1, 1, 0], [0, 1, 0, 0])
        0.75
    """
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    return float(np.mean(labels == predictions)) if labels.size else 0.0


def _confusion(labels, predictions, positive=1):
    labels = np.asarray(labels) == positive
    predictions = np.asarray(predictions) == positive
    tp = float(np.sum(labels & predictions))
    fp = float(np.sum(~labels & predictions))
    fn = float(np.sum(labels & ~predictions))
    tn = float(np.sum(~labels & ~predictions))
    return tp, fp, fn, tn


def f1(labels, predictions, positive=1):
    """F1 of the positive class (GLUE MRPC/QQP: class 1).

    Examples:
        >>> round(f1([1, 1, 0, 0, 1], [1, 0, 1, 0, 1]), 4)
        0.6667
    """
    tp, fp, fn, _ = _confusion(labels, predictions, positive)
    return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


def mcc(labels, predictions):
    """Matthews correlation coefficient of binary labels (GLUE CoLA).

    Examples:
        >>> round(mcc([1, 1, 0, 0, 1], [1, 0, 1, 0, 1]), 4)
        0.1667
    """
    tp, fp, fn, tn = _confusion(labels, predictions)
    denominator = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return float((tp * tn - fp * fn) / denominator) if denominator else 0.0


def pearson(labels, predictions):
    """Pearson correlation (GLUE STS-B).

    Examples:
        >>> round(pearson([1.0, 2.0, 3.0], [2.0, 4.0, 7.0]), 4)
        0.9934
    """
    x = np.asarray(labels, np.float64)
    y = np.asarray(predictions, np.float64)
    x, y = x - x.mean(), y - y.mean()
    denominator = np.sqrt(np.sum(x * x) * np.sum(y * y))
    return float(np.sum(x * y) / denominator) if denominator else 0.0


def _ranks(values):
    """Ranks starting at 1, ties sharing their average rank."""
    values = np.asarray(values, np.float64)
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values))
    sorted_values = values[order]
    start = 0
    for end in range(1, len(values) + 1):
        if end == len(values) or sorted_values[end] != sorted_values[start]:
            ranks[order[start:end]] = (start + end + 1) / 2.0
            start = end
    return ranks


def spearman(labels, predictions):
    """Spearman rank correlation, ties averaged (GLUE STS-B).

    Examples:
        >>> spearman([1.0, 2.0, 3.0], [2.0, 4.0, 7.0])
        1.0
    """
    return pearson(_ranks(labels), _ranks(predictions))


_FUNCTIONS = {"accuracy": accuracy, "f1": f1, "mcc": mcc,
              "pearson": pearson, "spearman": spearman}


def compute(names, labels, predictions):
    """{metric: value} for `names`, from labels and predictions.

    Args:
        names: metric names from `METRICS`.
        labels: class ids (or scores for regression).
        predictions: predicted class ids (or scores).

    Examples:
        >>> compute(("accuracy", "f1"), [1, 0, 1], [1, 1, 1])
        {'accuracy': 0.6666666666666666, 'f1': 0.8}
    """
    unknown = [n for n in names if n not in _FUNCTIONS]
    if unknown:
        raise ValueError(f"Unknown metric(s) {unknown}; known: "
                         f"{', '.join(METRICS)}.")
    return {name: _FUNCTIONS[name](labels, predictions) for name in names}
