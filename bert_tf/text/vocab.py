"""WordPiece vocab files: reading and validation.

A vocab.txt holds one token per line; the line number (from 0) is the id.
"""

import dataclasses

from bert_tf.storage import GPath

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


@dataclasses.dataclass(frozen=True)
class Vocab:
    """A validated vocabulary.

    Attributes:
        tokens: the tokens, index = id.
        path: the file it was read from (or None).

    Examples:
        >>> vocab = Vocab(("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a"))
        >>> vocab.cls_id, vocab.size, vocab.is_cased
        (2, 6, False)
    """

    tokens: tuple
    path: str = None

    @property
    def size(self):
        return len(self.tokens)

    def id(self, token):
        return self._index[token]

    @property
    def _index(self):
        index = self.__dict__.get("_index_cache")
        if index is None:
            index = {t: i for i, t in enumerate(self.tokens)}
            object.__setattr__(self, "_index_cache", index)
        return index

    pad_id = property(lambda self: self.id("[PAD]"))
    unk_id = property(lambda self: self.id("[UNK]"))
    cls_id = property(lambda self: self.id("[CLS]"))
    sep_id = property(lambda self: self.id("[SEP]"))
    mask_id = property(lambda self: self.id("[MASK]"))

    @property
    def special_ids(self):
        """Ids of every bracketed special token (`[CLS]`, `[unused0]`, ...)."""
        return tuple(i for i, t in enumerate(self.tokens)
                     if t.startswith("[") and t.endswith("]"))

    @property
    def is_cased(self):
        """True when word tokens contain upper-case letters (a cased vocab)."""
        upper = sum(1 for t in self.tokens
                    if not t.startswith("[") and t != t.lower())
        return upper > max(10, len(self.tokens) // 1000)

    def saved(self, path):
        """Writes the vocab to `path`; returns it as a `Vocab` whose `path`
        is that file (what an export keeps as its asset)."""
        return dataclasses.replace(self, path=str(self.save(path)))

    def save(self, path):
        """Writes the vocab as vocab.txt; returns the path."""
        GPath(path).write_text("".join(t + "\n" for t in self.tokens),
                              encoding="utf-8")
        return GPath(path)


def validate_tokens(tokens, source="vocab"):
    """Checks a token list; raises ValueError naming the offending line."""
    if not tokens:
        raise ValueError(f"{source} is empty: a vocab needs one token per "
                         "line, including " + " ".join(SPECIAL_TOKENS) + ".")
    seen = {}
    for line, token in enumerate(tokens, start=1):
        if not token.strip():
            raise ValueError(
                f"{source} line {line} is empty: every line must hold one "
                "token (its id is the line number - 1).")
        if token != token.strip() or any(c.isspace() for c in token):
            raise ValueError(
                f"{source} line {line} ({token!r}) contains whitespace: "
                "WordPiece tokens never do.")
        if token in seen:
            raise ValueError(
                f"{source} line {line} repeats {token!r} from line "
                f"{seen[token]}: every token must be unique.")
        seen[token] = line
    missing = [t for t in SPECIAL_TOKENS if t not in seen]
    if missing:
        raise ValueError(
            f"{source} lacks the special token(s) {', '.join(missing)}: a "
            f"BERT vocab must contain {' '.join(SPECIAL_TOKENS)}.")


def read_vocab(path):
    """Reads and validates a vocab.txt.

    Args:
        path: the file, UTF-8, one token per line.

    Returns:
        a `Vocab`.

    Examples:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "vocab.txt")
        >>> _ = open(path, "w").write("[PAD]\\n[UNK]\\n[CLS]\\n[SEP]\\n[MASK]\\nhi\\n")
        >>> read_vocab(path).size
        6
    """
    path = GPath(path)
    if not path.is_file():
        raise FileNotFoundError(f"Vocab file {path} does not exist.")
    raw = path.read_bytes()
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()  # the final newline
    tokens = []
    for line, data in enumerate(lines, start=1):
        try:
            tokens.append(data.decode("utf-8").rstrip("\r"))
        except UnicodeDecodeError as e:
            raise ValueError(
                f"Vocab file {path} line {line} is not valid UTF-8 ({e.reason} "
                f"at byte {e.start}).") from None
    validate_tokens(tokens, source=f"Vocab file {path}")
    return Vocab(tuple(tokens), str(path))
