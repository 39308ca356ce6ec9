"""A WordPiece vocab built deterministically from the multilingual sample,
by the fixture script (which tokenizes with HF) and by the test (which
tokenizes with ours) alike; pure Python, so both environments run it."""

import collections
import hashlib
import unicodedata

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PUNCTUATION = ",.。，"


def text_digest(lines):
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()


def build_vocab(sentences):
    """Every character, alone and as `##` continuation (but every 17th,
    which stays unknown), every 3rd word whole and every 5th split in two,
    in both cases and with accents stripped, so that the cased and the
    uncased tokenizer both find pieces."""
    counts = collections.Counter(c for s in sentences for c in s
                                 if not c.isspace())
    chars = sorted(counts, key=lambda c: (-counts[c], c))
    words = list(dict.fromkeys(w.strip(PUNCTUATION) for s in sentences
                               for w in s.split()))
    tokens = []
    for i, char in enumerate(chars):
        if i % 17 != 16:
            tokens += [char, "##" + char, char.lower(),
                       "##" + _strip(char.lower())]
    for i, word in enumerate(words):
        if i % 3 == 0:
            tokens += [word, word.lower(), _strip(word.lower())]
        if i % 5 == 0 and len(word) > 3:
            half = len(word) // 2
            tokens += [word[:half], "##" + word[half:], _strip(
                word[:half].lower()), "##" + _strip(word[half:].lower())]
    return SPECIAL + [t for t in dict.fromkeys(tokens)
                      if t and t != "##" and t not in SPECIAL]


def _strip(text):
    return "".join(c for c in unicodedata.normalize("NFD", text)
                   if unicodedata.category(c) != "Mn")
