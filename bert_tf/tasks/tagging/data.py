"""Token tagging data: CoNLL-format files, TFDS `conll2003` and the real
WNUT-16 sample.

Every reader returns a `TaggingData`: per split a list of `(words, tags)`
sentences with tags in IOB2 (BIO), whatever scheme the source uses (IOB1,
IOB2/BIO and IOBES are read and converted).
"""

import dataclasses

from bert_tf.samples import readers
from bert_tf.storage import GPath
from bert_tf.tasks.batching import split_of

SCHEMES = ("bio", "iob1", "iobes")


@dataclasses.dataclass
class TaggingData:
    """A token tagging task.

    Attributes:
        name: e.g. `conll2003`, `sample:wnut_ner`, `local`.
        labels: BIO tags in id order, "O" first.
        splits: {split: [(words, tags)]}.
    """

    name: str
    labels: tuple
    splits: dict

    def split(self, name):
        return split_of(self, name)

    def size(self, name):
        return len(self.split(name))

    def relabeled(self, labels, order):
        """This data with `labels` as its tags (a run's), each tag `t` of
        id `i` written as `labels[order[i]]` (`bert_tf.tasks.labels.
        data_to_run`): a mapping renames, names alike stay."""
        rename = {tag: labels[order[i]] for i, tag in enumerate(self.labels)}
        return dataclasses.replace(self, labels=tuple(labels), splits={
            name: [(words, [rename[t] for t in tags]) for words, tags in
                   self.split(name)] for name in self.splits})

    @property
    def types(self):
        return tuple(sorted({t[2:] for t in self.labels if t != "O"}))


def to_bio(tags, scheme="bio"):
    """Tags of one sentence converted to IOB2 (BIO).

    IOB1 starts an entity with I- unless it follows one of the same type
    (then B-); IOBES marks single words S- and last words E-.

    Examples:
        >>> to_bio(["I-PER", "I-PER", "B-PER", "O", "I-LOC"], "iob1")
        ['B-PER', 'I-PER', 'B-PER', 'O', 'B-LOC']
        >>> to_bio(["S-PER", "B-LOC", "E-LOC", "O"], "iobes")
        ['B-PER', 'B-LOC', 'I-LOC', 'O']
    """
    if scheme not in SCHEMES:
        raise ValueError(f"Tag scheme {scheme!r}: use one of "
                         f"{', '.join(SCHEMES)}.")
    out, previous = [], "O"
    for tag in tags:
        prefix, _, kind = tag.partition("-")
        if tag == "O" or not kind:
            out.append("O")
        elif scheme == "iobes":
            out.append(("B-" if prefix in ("B", "S") else "I-") + kind)
        elif scheme == "iob1":
            continues = previous != "O" and previous[2:] == kind
            out.append(("B-" if prefix == "B" or not continues else "I-")
                       + kind)
        else:
            out.append(f"{prefix}-{kind}")
        previous = out[-1]
    return out


def read_conll(path, tag_column=-1, scheme="bio"):
    """[(words, BIO tags)] of a CoNLL-format file: one token per line with
    whitespace-separated columns (the tag in `tag_column`), blank lines
    between sentences, `-DOCSTART-` lines skipped."""
    path = GPath(path)
    if not path.is_file():
        raise FileNotFoundError(f"Tagging file {path} does not exist.")
    sentences, words, tags = [], [], []
    with path.open(errors="replace") as f:
        for number, line in enumerate(f, 1):
            columns = line.split()
            if not columns or columns[0] == "-DOCSTART-":
                if words:
                    sentences.append((words, to_bio(tags, scheme)))
                words, tags = [], []
                continue
            if len(columns) < 2:
                raise ValueError(f"{path}:{number}: expected a token and a "
                                 f"tag, got {line.strip()!r}.")
            try:
                tag = columns[tag_column]
            except IndexError:
                raise ValueError(f"{path}:{number}: no column {tag_column} "
                                 f"in {line.strip()!r}.") from None
            words.append(columns[0])
            tags.append(tag)
    if words:
        sentences.append((words, to_bio(tags, scheme)))
    return sentences


def _labels(splits):
    types = sorted({t[2:] for s in splits.values() for _, tags in s
                    for t in tags if t != "O"})
    return ("O",) + tuple(f"{p}-{t}" for t in types for p in "BI")


def load_local_conll(train, validation=None, test=None, tag_column=-1,
                     scheme="bio"):
    """A `TaggingData` from local CoNLL-format files."""
    splits = {split: read_conll(path, tag_column, scheme) for split, path in
              (("train", train), ("validation", validation), ("test", test))
              if path}
    return TaggingData("local", _labels(splits), splits)


def load_conll2003(data_dir=None):
    """TFDS `conll2003` (train / dev as validation / test)."""
    import tensorflow_datasets as tfds

    splits = {}
    builder = tfds.builder("conll2003", data_dir=data_dir)
    names = builder.info.features["ner"].feature.names
    for ours, theirs in (("train", "train"), ("validation", "dev"),
                         ("test", "test")):
        dataset = tfds.load("conll2003", split=theirs, data_dir=data_dir,
                            shuffle_files=False)
        sentences = []
        for number, e in enumerate(tfds.as_numpy(dataset)):
            if len(e["tokens"]) != len(e["ner"]):
                raise ValueError(f"conll2003 {theirs} example {number}: "
                                 f"{len(e['tokens'])} tokens but "
                                 f"{len(e['ner'])} tags.")
            sentences.append(([w.decode("utf-8", "replace")
                               for w in e["tokens"]],
                              [names[i] for i in e["ner"]]))
        splits[ours] = sentences
    return TaggingData("conll2003", tuple(names), splits)


def load_wnut_ner(cache=None, seed=0):
    """WNUT-16 with the documented split (`bert_tf.samples.readers`)."""
    sentences = readers.read_wnut(cache)
    splits = {split: [sentences[i] for i in indices] for split, indices in
              readers.split_indices(len(sentences), seed).items()}
    return TaggingData("sample:wnut_ner", _labels(splits), splits)


def load_tagging(spec, cache=None, data_dir=None, seed=0, train=None,
                 validation=None, test=None, tag_column=-1, scheme="bio"):
    """A `TaggingData` from a spec: `conll2003` (TFDS), `sample:wnut_ner`
    or `local` (CoNLL-format files)."""
    if spec == "conll2003":
        return load_conll2003(data_dir)
    if spec == "sample:wnut_ner":
        return load_wnut_ner(cache, seed)
    if spec == "local":
        if not train:
            raise ValueError("A local tagging task needs task.train_file "
                             "(CoNLL format).")
        return load_local_conll(train, validation, test, tag_column, scheme)
    raise ValueError(f"Unknown tagging task {spec!r}: use conll2003, "
                     "sample:wnut_ner or local (CoNLL files).")
