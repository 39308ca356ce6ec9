"""Extractive QA data: SQuAD v1.1 / v2.0 (TFDS or local JSON) and the real
WNUT-16 QA set.

Every reader returns a `QAData`: per split a list of examples
`{"id", "question", "context", "answers": [texts], "answer_starts":
[code points], "is_impossible"}`. Answer starts are Python string indices
(Unicode code points) into the context, as SQuAD's JSON gives them; an
answer whose text is not found at its start is reported with its id and
the example is skipped and counted (`QAData.skipped`).
"""

import dataclasses
import json

import numpy as np
import tensorflow as tf

from bert_tf.samples import readers
from bert_tf.storage import GPath
from bert_tf.tasks.batching import split_of

SQUAD_VERSIONS = ("v1.1", "v2.0")


@dataclasses.dataclass
class QAData:
    """An extractive QA task's examples.

    Attributes:
        name: e.g. `squad/v1.1`, `sample:wnut_qa`, `local`.
        version_2: has unanswerable questions (SQuAD 2.0 style).
        splits: {split: [example dicts]}.
        skipped: {split: [(id, reason)]} examples left out while reading.
    """

    name: str
    version_2: bool
    splits: dict
    skipped: dict = dataclasses.field(default_factory=dict)

    def split(self, name):
        return split_of(self, name)

    def size(self, name):
        return len(self.split(name))


def _example(id_, question, context, answers, starts, impossible):
    return {"id": str(id_), "question": question, "context": context,
            "answers": list(answers), "answer_starts": [int(s) for s in
                                                         starts],
            "is_impossible": bool(impossible)}


def check_examples(examples):
    """(kept, skipped): examples whose every answer text sits at its start,
    and [(id, reason)] for the others."""
    kept, skipped = [], []
    for example in examples:
        context = example["context"]
        for text, start in zip(example["answers"], example["answer_starts"]):
            if context[start:start + len(text)] != text:
                found = context[start:start + len(text)]
                skipped.append((example["id"], (
                    f"answer {text!r} is not at answer_start {start} (the "
                    f"context there reads {found!r})")))
                break
        else:
            if not example["is_impossible"] and not example["answers"]:
                skipped.append((example["id"], "no answers and not marked "
                                "is_impossible"))
                continue
            kept.append(example)
    return kept, skipped


def read_squad_json(path):
    """Examples of a local SQuAD v1.1 or v2.0 JSON file (`data` ->
    `paragraphs` -> `qas`)."""
    path = GPath(path)
    if not path.is_file():
        raise FileNotFoundError(f"SQuAD file {path} does not exist.")
    try:
        data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
        articles = data["data"]
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise ValueError(f"{path} is not SQuAD JSON (a top-level 'data' list "
                         f"of articles with 'paragraphs' and 'qas'): {e}"
                         ) from None
    examples = []
    for article in articles:
        for paragraph in article.get("paragraphs", []):
            context = paragraph["context"]
            for qa in paragraph.get("qas", []):
                answers = qa.get("answers", [])
                examples.append(_example(
                    qa["id"], qa["question"], context,
                    [a["text"] for a in answers],
                    [a["answer_start"] for a in answers],
                    qa.get("is_impossible", False)))
    return examples


def load_local_squad(train, validation=None, test=None, name="local"):
    """A `QAData` from local SQuAD JSON files (v2.0 when any question is
    marked `is_impossible`)."""
    splits, skipped = {}, {}
    for split, path in (("train", train), ("validation", validation),
                        ("test", test)):
        if path:
            splits[split], skipped[split] = check_examples(
                read_squad_json(path))
    version_2 = any(e["is_impossible"] for examples in splits.values()
                    for e in examples)
    return QAData(name, version_2, splits, skipped)


def load_squad_tfds(version, data_dir=None):
    """TFDS `squad/v1.1` or `squad/v2.0` (train and validation; TFDS has
    no SQuAD test set, so `test` is the validation set too)."""
    import tensorflow_datasets as tfds

    if version not in SQUAD_VERSIONS:
        raise ValueError(f"SQuAD version {version!r}: use one of "
                         f"{', '.join(SQUAD_VERSIONS)}.")
    splits, skipped = {}, {}

    def text(value):
        return value.decode("utf-8", "replace")

    for split in ("train", "validation"):
        dataset = tfds.load(f"squad/{version}", split=split,
                            data_dir=data_dir, shuffle_files=False)
        examples = [_example(
            text(e["id"]), text(e["question"]), text(e["context"]),
            [text(t) for t in e["answers"]["text"]],
            e["answers"]["answer_start"].tolist(),
            bool(e.get("is_impossible", False)))
            for e in tfds.as_numpy(dataset)]
        splits[split], skipped[split] = check_examples(examples)
    splits["test"], skipped["test"] = splits["validation"], []
    return QAData(f"squad/{version}", version == "v2.0", splits, skipped)


QUESTIONS = {
    "person": "Which person is mentioned?",
    "geo-loc": "Which place is mentioned?",
    "company": "Which company is mentioned?",
    "facility": "Which facility is mentioned?",
    "product": "Which product is mentioned?",
    "musicartist": "Which music artist is mentioned?",
    "sportsteam": "Which sports team is mentioned?",
    "movie": "Which movie is mentioned?",
    "tvshow": "Which TV show is mentioned?",
    "other": "Which other named entity is mentioned?",
}


def _context_entities(tweets, separator="\n\n"):
    """(context, [(type, text, start)]): tagged tweets joined by
    `separator` (each tweet's tokens by single spaces), and every
    annotated span with its start in the context."""
    parts, entities, position = [], [], 0
    for tokens, tags in tweets:
        starts = []
        for token in tokens:
            starts.append(position)
            position += len(token) + 1
        position += len(separator) - 1
        parts.append(" ".join(tokens))
        entities += [(t, " ".join(tokens[a:b + 1]), starts[a])
                     for t, a, b in readers.entity_spans(tags)]
    return separator.join(parts), entities


def wnut_qa_examples(sentences, seed=0, offset=0):
    """QA examples from tagged tweets (see `load_wnut_qa`); an item of
    `sentences` may also be a list of tweets (a thread, one context)."""
    rng = np.random.default_rng(seed)
    examples = []
    for number, item in enumerate(sentences, offset):
        tweets = item if isinstance(item, list) else [item]
        context, entities = _context_entities(tweets)
        present = [t for t in readers.TYPES
                   if any(e[0] == t for e in entities)]
        for kind in present:
            chosen = [(text, start) for t, text, start in entities
                      if t == kind]
            examples.append(_example(
                f"wnut-{number}-{kind}", QUESTIONS[kind], context,
                [c[0] for c in chosen], [c[1] for c in chosen], False))
        absent = [t for t in readers.TYPES if t not in present]
        if absent:
            kind = absent[int(rng.integers(len(absent)))]
            examples.append(_example(f"wnut-{number}-{kind}",
                                     QUESTIONS[kind], context, [], [],
                                     True))
    return examples


# sample:wnut_qa_threads: training contexts of this many tweets at most.
MAX_THREAD_TWEETS = 8


def wnut_threads(sentences, indices, seed=0):
    """The training split's tweets (`indices`, in order) cut into threads
    of 2 to `MAX_THREAD_TWEETS` consecutive tweets (lengths drawn with
    `seed`)."""
    rng = np.random.default_rng(seed)
    threads, start = [], 0
    while start < len(indices):
        size = int(rng.integers(2, MAX_THREAD_TWEETS + 1))
        threads.append([sentences[i] for i in indices[start:start + size]])
        start += size
    return threads


def load_wnut_qa(cache=None, seed=0, threads=False):
    """The real-annotation QA set built from the WNUT-16 tweets.

    Context: the tweet (its tokens joined by single spaces). For each entity
    type present, the question "Which <type> is mentioned?" with every
    annotated span of that type as a gold answer; and for one type absent
    from the tweet (drawn with `seed`), the same question, unanswerable
    (SQuAD 2.0 style). Split by tweet with the documented WNUT split
    (`bert_tf.samples.readers`): 1,212 answerable and 2,394 unanswerable
    questions in all.

    With `threads` (`sample:wnut_qa_threads`), training also holds the
    train tweets again as threads: 2 to 8 consecutive tweets joined by
    blank lines as one context (every span of the asked type in any of
    them a gold answer; unanswerable when none has one), so that a model
    learns to answer from a long context of many tweets. Validation and
    test are the same single tweets.

    Examples:
        >>> data = load_wnut_qa()
        >>> {k: len(v) for k, v in data.splits.items()}
        {'train': 2884, 'validation': 354, 'test': 368}
    """
    sentences = readers.read_wnut(cache)
    splits = {}
    splits_of = readers.split_indices(len(sentences), seed)
    for split, indices in splits_of.items():
        examples = []
        for i in indices:
            examples += wnut_qa_examples([sentences[i]], seed=seed * 100003 +
                                         i, offset=i)
        if threads and split == "train":
            examples += wnut_qa_examples(
                wnut_threads(sentences, indices, seed), seed=seed + 1,
                offset=len(sentences))
        splits[split], _ = check_examples(examples)
    name = "sample:wnut_qa_threads" if threads else "sample:wnut_qa"
    return QAData(name, True, splits,
                  {split: [] for split in splits})


def load_qa(spec, cache=None, data_dir=None, seed=0, train=None,
            validation=None, test=None):
    """A `QAData` from a spec: `squad/v1.1`, `squad/v2.0` (TFDS),
    `sample:wnut_qa` or `local` (SQuAD JSON files)."""
    if spec.startswith("squad/"):
        return load_squad_tfds(spec.split("/", 1)[1], data_dir=data_dir)
    if spec in ("sample:wnut_qa", "sample:wnut_qa_threads"):
        return load_wnut_qa(cache=cache, seed=seed,
                            threads=spec.endswith("_threads"))
    if spec == "local":
        if not train:
            raise ValueError("A local QA task needs task.train_file (SQuAD "
                             "JSON).")
        return load_local_squad(train, validation, test)
    raise ValueError(f"Unknown QA task {spec!r}: use squad/v1.1, squad/v2.0, "
                     "sample:wnut_qa, sample:wnut_qa_threads or local "
                     "(SQuAD JSON files).")


def answer_span(example):
    """(start, end) code points of the first gold answer ((-1, -1): none)."""
    if example["is_impossible"] or not example["answers"]:
        return -1, -1
    start = example["answer_starts"][0]
    return start, start + len(example["answers"][0])


def qa_dataset(examples):
    """A `tf.data.Dataset` of {"question", "context", "answer_start",
    "answer_end"} (the first gold answer; -1 for none)."""
    spans = np.array([answer_span(e) for e in examples] or
                     np.zeros((0, 2)), np.int32).reshape(-1, 2)
    return tf.data.Dataset.from_tensor_slices({
        "question": np.array([e["question"] for e in examples], object),
        "context": np.array([e["context"] for e in examples], object),
        "answer_start": spans[:, 0], "answer_end": spans[:, 1]})
