"""Labels matched by name, never by position: data against a run (in
evaluation), a run's `task.labels` against its data, and a head against
the labels it goes on training with."""


def parse_label_map(text):
    """`DATA=RUN,...` (`bert-tf evaluate --label-map`) as a dict.

    Examples:
        >>> parse_label_map("neg=negative, pos=positive")
        {'neg': 'negative', 'pos': 'positive'}
    """
    if not text:
        return {}
    pairs = [part.strip() for part in str(text).split(",") if part.strip()]
    bad = [pair for pair in pairs if pair.count("=") != 1]
    if bad:
        raise ValueError(f"--label-map {text!r}: {bad[0]!r} is not "
                         "DATA_LABEL=RUN_LABEL.")
    return dict(pair.split("=") for pair in pairs)


def data_to_run(data_labels, run_labels, where, label_map=None):
    """The run's label id of each of the data's labels (a list in data id
    order), matched by name: the label sets must be equal, or
    `label_map` ({data label: run label}) must send every data label to
    one of the run's.

    Raises:
        ValueError: one line naming both label sets and the flag.

    Examples:
        >>> data_to_run(["negative", "positive"],
        ...             ["positive", "negative"], "data")
        [1, 0]
        >>> data_to_run(["negative", "positive"],
        ...             ["negative", "neutral", "positive"], "data",
        ...             {"negative": "negative", "positive": "positive"})
        [0, 2]
    """
    data_labels, run_labels = list(data_labels), list(run_labels)
    if label_map:
        unknown = [d for d in label_map if d not in data_labels]
        missing = [d for d in data_labels if d not in label_map]
        wrong = [r for r in label_map.values() if r not in run_labels]
        for problem, names, what in (
                ("names labels the data does not have", unknown, "data"),
                ("leaves out the data's labels", missing, "data"),
                ("names labels the run does not have", wrong, "run")):
            if names:
                raise ValueError(
                    f"--label-map {problem}: {', '.join(names)} (the "
                    f"{what}'s labels are "
                    f"{', '.join(data_labels if what == 'data' else run_labels)}).")
        return [run_labels.index(label_map[d]) for d in data_labels]
    if sorted(data_labels) != sorted(run_labels):
        shared = [d for d in data_labels if d in run_labels]
        hint = (f"; to score the shared ones by name, pass --label-map "
                f"{','.join(f'{d}={d}' for d in shared)}"
                if len(shared) == len(data_labels) else "")
        raise ValueError(
            f"{where} has the labels {', '.join(data_labels)} and the run "
            f"{', '.join(run_labels)}: they are matched by name and "
            f"differ{hint}.")
    return [run_labels.index(d) for d in data_labels]


def honoured(configured, data_labels, where):
    """The labels a run trains with: `task.labels` as configured (its
    order), which must hold every label of the data; else the data's.

    Examples:
        >>> honoured(["O", "B-PER", "I-PER"], ["B-PER", "I-PER", "O"], "x")
        ['O', 'B-PER', 'I-PER']
    """
    if not configured:
        return list(data_labels)
    missing = [d for d in data_labels if d not in configured]
    if missing:
        raise ValueError(
            f"task.labels = {list(configured)} lacks {', '.join(missing)}, "
            f"which {where} has: give every label, in the order the model's "
            "outputs should take them.")
    return list(configured)


def head_order(head_labels, task_labels):
    """The head output of each task label, when both hold the same labels
    in any order (a head that goes on training keeps every row); None
    when they differ.

    Examples:
        >>> head_order(["O", "B-PER", "I-PER"], ["B-PER", "I-PER", "O"])
        [1, 2, 0]
    """
    if not head_labels or sorted(head_labels) != sorted(task_labels or []):
        return None
    return [list(head_labels).index(label) for label in task_labels]
