"""Multiple-choice data: TFDS `hellaswag` and `super_glue/copa`, the
original SWAG CSV layout, local JSONL and the real next-sentence set built
from the pre-training documents.


Every reader returns a `ChoiceData`: per split a list of
`(context, choices, label)` examples with the same number of choices
(label -1: unlabeled, e.g. the TFDS test splits).
"""

import csv
import dataclasses
import json

import numpy as np

from bert_tf.storage import GPath
from bert_tf.tasks.batching import split_of

FORMATS = ("swag", "jsonl")


@dataclasses.dataclass
class ChoiceData:
    """A multiple-choice task.

    Attributes:
        name: e.g. `hellaswag`, `super_glue/copa`, `sample:next_sentence`,
            `local`.
        num_choices: choices per example.
        splits: {split: [(context, [choices], label)]}.
    """

    name: str
    num_choices: int
    splits: dict

    def __post_init__(self):
        for split, examples in self.splits.items():
            for number, (_, choices, label) in enumerate(examples):
                if len(choices) != self.num_choices:
                    raise ValueError(
                        f"{self.name} {split} example {number}: "
                        f"{len(choices)} choices, but the task has "
                        f"{self.num_choices}.")
                if not -1 <= label < self.num_choices:
                    raise ValueError(
                        f"{self.name} {split} example {number}: label "
                        f"{label} is not a choice index (0..."
                        f"{self.num_choices - 1}, or -1 unlabeled).")

    def split(self, name):
        return split_of(self, name)

    def size(self, name):
        return len(self.split(name))


def _text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) \
        else str(value)


def _from_examples(name, splits):
    counts = {len(c) for examples in splits.values() for _, c, _ in examples}
    if not counts:
        raise ValueError(f"{name}: no examples.")
    return ChoiceData(name, max(counts), splits)


def load_hellaswag(data_dir=None):
    """TFDS `hellaswag`: the context and its four endings."""
    import tensorflow_datasets as tfds

    splits = {}
    for split in ("train", "validation", "test"):
        dataset = tfds.load("hellaswag", split=split, data_dir=data_dir,
                            shuffle_files=False)
        splits[split] = [(_text(e["context"]),
                          [_text(x) for x in e["endings"]], int(e["label"]))
                         for e in tfds.as_numpy(dataset)]
    return _from_examples("hellaswag", splits)


def copa_choice(question, choice):
    """A COPA alternative as a continuation of the premise: "because ..."
    for a cause, "so ..." for an effect."""
    connector = "because" if question == "cause" else "so"
    return f"{connector} {choice[:1].lower()}{choice[1:]}"


def load_copa(data_dir=None):
    """TFDS `super_glue/copa`: the premise and two alternatives, each read
    as a continuation (`copa_choice`)."""
    import tensorflow_datasets as tfds

    splits = {}
    for split in ("train", "validation", "test"):
        dataset = tfds.load("super_glue/copa", split=split,
                            data_dir=data_dir, shuffle_files=False)
        splits[split] = [
            (_text(e["premise"]),
             [copa_choice(_text(e["question"]), _text(e[key]))
              for key in ("choice1", "choice2")], int(e["label"]))
            for e in tfds.as_numpy(dataset)]
    return _from_examples("super_glue/copa", splits)


def read_swag_csv(path):
    """[(context, choices, label)] of a file in the original SWAG CSV
    layout: the context is `sent1`, choice i is `sent2` + `ending<i>` (as
    the paper's SWAG setup); no `label` column: -1."""
    path = GPath(path)
    if not path.is_file():
        raise FileNotFoundError(f"SWAG file {path} does not exist.")
    with path.open(errors="replace", newline="") as f:
        reader = csv.DictReader(f)
        endings = sorted((c for c in reader.fieldnames or ()
                          if c.startswith("ending")),
                         key=lambda c: int(c[6:] or 0))
        missing = [c for c in ("sent1", "sent2") if c not in
                   (reader.fieldnames or ())]
        if missing or not endings:
            raise ValueError(f"{path}: not the SWAG layout (needs sent1, "
                             f"sent2, ending0..N; missing "
                             f"{missing or ['ending0']}).")
        examples = []
        for number, row in enumerate(reader, 2):
            label = row.get("label", "")
            try:
                label = int(label) if label not in ("", None) else -1
            except ValueError:
                raise ValueError(f"{path}:{number}: label {label!r} is not "
                                 "a number.") from None
            examples.append((row["sent1"], [
                f"{row['sent2']} {row[c]}".strip() for c in endings], label))
    return examples


def read_choices_jsonl(path):
    """[(context, choices, label)] of a JSONL file: one object per line
    with `context`, `choices` (a list) and optionally `label` (the right
    choice's index)."""
    path = GPath(path)
    if not path.is_file():
        raise FileNotFoundError(f"Multiple-choice file {path} does not "
                                "exist.")
    examples = []
    with path.open(errors="replace") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                examples.append((str(row["context"]),
                                 [str(c) for c in row["choices"]],
                                 int(row.get("label", -1))))
            except (ValueError, KeyError, TypeError) as error:
                raise ValueError(
                    f"{path}:{number}: expected an object with context, "
                    f"choices (a list) and label ({error}).") from None
    return examples


def load_local_choices(train, validation=None, test=None, fmt=None):
    """A `ChoiceData` from local files, `swag` (CSV) or `jsonl` (default:
    from each file's suffix)."""
    splits = {}
    for split, path in (("train", train), ("validation", validation),
                        ("test", test)):
        if not path:
            continue
        kind = fmt or ("swag" if str(path).endswith(".csv") else "jsonl")
        if kind not in FORMATS:
            raise ValueError(f"task.format = {kind!r}: use swag (CSV) or "
                             "jsonl for multiple choice.")
        splits[split] = (read_swag_csv if kind == "swag" else
                         read_choices_jsonl)(path)
    return _from_examples("local", splits)


# The next-sentence set: per document at most this many contexts.
CONTEXTS_PER_DOCUMENT = 10
NEXT_SENTENCE_SHARES = {"train": 0.8, "validation": 0.1, "test": 0.1}


def next_sentence_examples(documents, num_choices=4, seed=0,
                           shares=NEXT_SENTENCE_SHARES):
    """{split: [(context, choices, label)]}: the context is a sentence, the
    right choice its true next sentence, the others sentences of other
    documents of the same split. Documents are split (shuffled with
    `seed`) before any example is made, so no document, context or
    distractor is in two splits; the right choice's position is drawn
    uniformly."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(documents))
    bounds = np.cumsum([0] + [int(round(s * len(documents)))
                              for s in shares.values()])
    bounds[-1] = len(documents)
    splits = {}
    for (split, _), low, high in zip(shares.items(), bounds[:-1],
                                     bounds[1:]):
        members = [documents[i] for i in sorted(order[low:high])]
        splits[split] = _document_examples(members, num_choices, rng)
    return splits


def _document_examples(documents, num_choices, rng):
    examples = []
    for index, document in enumerate(documents):
        starts = np.arange(len(document) - 1)
        if not len(starts) or len(documents) < 2:
            continue
        take = rng.choice(starts, min(len(starts), CONTEXTS_PER_DOCUMENT),
                          replace=False)
        for start in sorted(take):
            wrong = []
            while len(wrong) < num_choices - 1:
                other = int(rng.integers(len(documents)))
                if other != index:
                    sentences = documents[other]
                    wrong.append(sentences[int(rng.integers(len(sentences)))])
            label = int(rng.integers(num_choices))
            choices = wrong[:label] + [document[start + 1]] + wrong[label:]
            examples.append((document[start], choices, label))
    return examples


def load_next_sentence(cache=None, seed=0):
    """The real next-sentence set from the pre-training sample documents
    (`sample:wikipedia` and `sample:lee`), split by document 80/10/10."""
    from bert_tf.data.documents import load_documents

    documents, _ = load_documents(["sample:wikipedia", "sample:lee"], cache)
    return ChoiceData("sample:next_sentence", 4,
                      next_sentence_examples(documents, 4, seed))


def load_choices(spec, cache=None, data_dir=None, seed=0, train=None,
                 validation=None, test=None, fmt=None):
    """A `ChoiceData` from a spec: `hellaswag`, `super_glue/copa` (TFDS),
    `sample:next_sentence` or `local` (SWAG CSV or JSONL files)."""
    if spec == "hellaswag":
        return load_hellaswag(data_dir)
    if spec == "super_glue/copa":
        return load_copa(data_dir)
    if spec == "sample:next_sentence":
        return load_next_sentence(cache, seed)
    if spec == "local":
        if not train:
            raise ValueError("A local multiple-choice task needs "
                             "task.train_file (SWAG CSV or JSONL).")
        return load_local_choices(train, validation, test, fmt)
    raise ValueError(f"Unknown multiple-choice task {spec!r}: use "
                     "hellaswag, super_glue/copa, sample:next_sentence or "
                     "local (SWAG CSV or JSONL files).")
