"""Documents for pre-training: each a list of sentences, in reading order.

BERT needs document-level text (long contiguous spans), so every reader
keeps documents whole. Corpora, each named by a string:

    sample:wikipedia         the Wikipedia sample (wiki markup stripped)
    sample:lee               the Lee news corpus (one document per line)
    sample:rt_train          the RT movie-review sentences of the sentiment
                             task's training split (text only, no labels;
                             each sentence a document), for in-domain
                             pre-training before fine-tuning on that task
    tfds:wikipedia/20230601.en[:split]   TFDS Wikipedia (needs its data)
    sentences:PATH           original format: one sentence per line, a
                             blank line between documents
    paragraphs:PATH          plain text: lines are paragraphs, a blank line
                             between documents
    lines:PATH               one document per line
    PATH                     same as sentences:PATH

Empty documents are skipped and counted; invalid UTF-8 is replaced (and
counted), never fatal.
"""

import bz2
import dataclasses
import html
import os
import re
import xml.etree.ElementTree as ET

from bert_tf.storage import GPath

# --- sentences ----------------------------------------------------------------

_ABBREVIATIONS = {
    "mr", "mrs", "ms", "dr", "prof", "st", "jr", "sr", "vs", "etc", "e.g",
    "i.e", "u.s", "u.k", "no", "vol", "inc", "ltd", "co", "corp", "gen",
    "col", "lt", "sgt", "capt", "rev", "fig", "jan", "feb", "mar", "apr",
    "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", "mt", "ft",
    "approx", "est", "dept", "univ", "ave", "blvd", "rd", "op", "ca", "cf",
    "al", "pp", "ed", "eds", "c", "b", "d", "ch", "sec",
}
_BOUNDARY = re.compile(r"(?<=[.!?])[\"'”’)\]]*\s+(?=[\"'“‘(\[]*[A-Z0-9])")


def split_sentences(paragraph):
    """Splits a paragraph of prose into sentences (rule based).

    A boundary is `.`, `!` or `?` (with closing quotes/brackets) followed by
    whitespace and an upper-case letter or digit, except after common
    abbreviations and single-letter initials.

    Examples:
        >>> split_sentences("Dr. Smith arrived at 5 p.m. on Monday. He left. "
        ...                 "J. R. R. Tolkien wrote it.")
        ['Dr. Smith arrived at 5 p.m. on Monday.', 'He left.', 'J. R. R. Tolkien wrote it.']
    """
    paragraph = " ".join(paragraph.split())
    sentences, start = [], 0
    for match in _BOUNDARY.finditer(paragraph):
        before = paragraph[start:match.start()]
        last_word = before.rsplit(" ", 1)[-1].rstrip(".!?\"'”’)]").lower()
        if paragraph[match.start() - 1] == "." and (
                last_word in _ABBREVIATIONS or
                (len(last_word) == 1 and last_word.isalpha())):
            continue
        end = match.start() + len(match.group(0).rstrip())
        sentences.append(paragraph[start:end].strip())
        start = match.end()
    tail = paragraph[start:].strip()
    if tail:
        sentences.append(tail)
    return [s for s in sentences if s]


# --- wiki markup ---------------------------------------------------------------

_INNER_TEMPLATE = re.compile(r"\{\{[^{}]*\}\}")
_INNER_TABLE = re.compile(r"\{\|(?:(?!\{\|)[\s\S])*?\|\}")
_INNER_LINK = re.compile(r"\[\[([^\[\]]*)\]\]")
_DROPPED_LINK = re.compile(
    r"^\s*(file|image|category|media|wikipedia|wp|wikt|template|help|"
    r"portal|special|[a-z]{2,3}(-[a-z]+)?):", re.I)
_REF = re.compile(r"<ref[^>/]*/>|<ref[^>]*>[\s\S]*?</ref>", re.I)
_BLOCKS = re.compile(
    r"<(math|gallery|timeline|syntaxhighlight|source|score|table|div|"
    r"imagemap|pre|code|chem)\b[^>]*>[\s\S]*?</\1>", re.I)
_TAG = re.compile(r"</?[a-zA-Z][^>]*>")
_EXTERNAL = re.compile(r"\[(?:https?:|ftp:|//)\S*(?:\s+([^\]]*))?\]")


def _replace_innermost(pattern, replacement, text):
    while True:
        new = pattern.sub(replacement, text)
        if new == text:
            return text
        text = new


def _link_text(match):
    target, _, label = match.group(1).partition("|")
    if _DROPPED_LINK.match(target):
        return ""
    return (label.rsplit("|", 1)[-1] if label else target).strip()


def wiki_to_paragraphs(markup):
    """Plain prose paragraphs from MediaWiki markup.

    Templates, tables, references, comments, files/categories, headings,
    lists and HTML blocks are removed; links are reduced to their text.

    Examples:
        >>> wiki_to_paragraphs("'''Foo''' is a [[bar|thing]]<ref>x</ref>.{{cite}}"
        ...                    "\\n\\n== History ==\\n* a list item\\nIt grew.")
        ['Foo is a thing.', 'It grew.']
    """
    text = re.sub(r"<!--[\s\S]*?(-->|$)", "", markup)
    text = _REF.sub("", text)
    text = _BLOCKS.sub("", text)
    text = _replace_innermost(_INNER_TEMPLATE, "", text)
    # A template whose content has stray braces never balances: cut the
    # rest of its line.
    text = re.sub(r"\{\{[^\n]*|\}\}", "", text)
    text = _replace_innermost(_INNER_TABLE, "", text)
    text = _replace_innermost(_INNER_LINK, _link_text, text)
    text = _EXTERNAL.sub(lambda m: m.group(1) or "", text)
    text = _TAG.sub("", text)
    text = html.unescape(text).replace("\u00a0", " ")
    text = re.sub(r"'{2,}", "", text)
    paragraphs, current = [], []
    for line in text.split("\n"):
        line = line.strip()
        is_prose = line and not line.startswith(
            ("=", "*", "#", ":", ";", "|", "!", "{", "}", "__", "[["))
        if is_prose:
            current.append(line)
        elif current:
            paragraphs.append(" ".join(current))
            current = []
    if current:
        paragraphs.append(" ".join(current))
    # Leftovers of broken markup are not prose.
    return [p for p in (" ".join(p.split()) for p in paragraphs)
            if len(p) > 1 and not re.fullmatch(r"[\W\d_]+", p)]


def read_wikipedia_dump(path):
    """Articles of a MediaWiki XML dump (`.xml` or `.xml.bz2`) as documents.

    Only main-namespace pages; redirects are skipped.
    """
    opener = bz2.open if str(path).endswith(".bz2") else open
    with opener(path, "rb") as f:
        for _, element in ET.iterparse(f):
            if not element.tag.endswith("}page"):
                continue
            ns = element.find("{*}ns")
            text = element.find("{*}revision/{*}text")
            markup = text.text if text is not None and text.text else ""
            if (ns is None or ns.text == "0") and not re.match(
                    r"\s*#redirect", markup, re.I):
                yield [s for p in wiki_to_paragraphs(markup)
                       for s in split_sentences(p)]
            element.clear()


# --- readers ---------------------------------------------------------------------

@dataclasses.dataclass
class CorpusStats:
    """What reading a corpus met."""

    documents: int = 0
    sentences: int = 0
    empty_documents: int = 0
    lines_with_invalid_utf8: int = 0


def _lines(path, stats):
    with GPath(path).open("rb") as f:
        for raw in f:
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                line = raw.decode("utf-8", errors="replace")
                stats.lines_with_invalid_utf8 += 1
            yield line.rstrip("\r\n")


def read_sentence_per_line(path, stats):
    """The original BERT format: one sentence per line, blank line between
    documents."""
    document = []
    for line in _lines(path, stats):
        if line.strip():
            document.append(line.strip())
        elif document:
            yield document
            document = []
        else:
            yield []  # consecutive blank lines: an empty document
    if document:
        yield document


def read_paragraphs(path, stats):
    """Plain text: each line a paragraph, a blank line between documents."""
    document = []
    for line in _lines(path, stats):
        if line.strip():
            document.extend(split_sentences(line))
        elif document:
            yield document
            document = []
    if document:
        yield document


def read_document_per_line(path, stats):
    """One document per line (e.g. the Lee corpus)."""
    for line in _lines(path, stats):
        yield split_sentences(line)


def read_tfds_wikipedia(name="wikipedia/20230601.en", split="train",
                        data_dir=None):
    """TFDS Wikipedia articles (`title`, `text`) as documents."""
    import tensorflow_datasets as tfds

    dataset = tfds.load(name, split=split, data_dir=data_dir)
    for example in dataset.as_numpy_iterator():
        text = example["text"].decode("utf-8", errors="replace")
        yield [s for paragraph in text.split("\n")
               for s in split_sentences(paragraph)]


_FILE_READERS = {"sentences": read_sentence_per_line,
                 "paragraphs": read_paragraphs,
                 "lines": read_document_per_line}


def _source(corpus, stats, cache=None):
    scheme, _, rest = corpus.partition(":")
    if scheme == "sample":
        from bert_tf import samples
        if rest == "wikipedia":
            path = next(samples.fetch("wikipedia", cache).glob("enwiki-*"))
            return read_wikipedia_dump(path)
        if rest == "lee":
            path = samples.fetch("lee", cache) / "lee_background.cor"
            return read_document_per_line(path, stats)
        if rest == "rt_train":
            from bert_tf.samples.readers import rt_splits
            texts, _ = rt_splits(cache)["train"]
            return ([text] for text in texts)
        raise ValueError(f"Unknown sample corpus {corpus!r}; use "
                         "sample:wikipedia, sample:lee or sample:rt_train.")
    if scheme == "tfds":
        name, _, split = rest.partition(":")
        return read_tfds_wikipedia(name or "wikipedia/20230601.en",
                                   split or "train")
    if scheme in _FILE_READERS:
        path = GPath(rest)
    else:
        scheme, path = "sentences", GPath(corpus)
    if not path.is_file():
        raise FileNotFoundError(
            f"Corpus file {path} does not exist (corpus {corpus!r}).")
    return _FILE_READERS[scheme](path, stats)


def read_documents(corpora, stats=None, cache=None):
    """Yields the non-empty documents of one or more corpora.

    Args:
        corpora: a corpus name or a list of them (see the module
            docstring).
        stats: a `CorpusStats` to fill (documents, sentences, skipped).
        cache: sample cache directory.

    Examples:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "c.txt")
        >>> _ = open(path, "w").write("First one.\\nSecond.\\n\\n\\nOther doc.\\n")
        >>> stats = CorpusStats()
        >>> list(read_documents(path, stats)), stats.empty_documents
        ([['First one.', 'Second.'], ['Other doc.']], 1)
    """
    stats = stats if stats is not None else CorpusStats()
    for corpus in ([corpora] if isinstance(corpora, (str, os.PathLike))
                   else corpora):
        for document in _source(str(corpus), stats, cache):
            document = [s for s in (" ".join(s.split()) for s in document)
                        if s]
            if not document:
                stats.empty_documents += 1
                continue
            stats.documents += 1
            stats.sentences += len(document)
            yield document


def load_documents(corpora, cache=None):
    """All documents of `corpora` as a list, plus their `CorpusStats`.

    Raises ValueError when the corpus holds no text at all.
    """
    stats = CorpusStats()
    documents = list(read_documents(corpora, stats, cache))
    if not documents:
        raise ValueError(
            f"Corpus {corpora!r} holds no text: {stats.empty_documents} empty "
            "document(s) and nothing else.")
    return documents, stats
