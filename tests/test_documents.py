import bz2

import pytest

from bert_tf.data import documents as d


def test_sentence_splitting():
    assert d.split_sentences(
        "Dr. Smith paid $3.50 at 5 p.m. on Monday. He left! Did she? "
        "J. R. R. Tolkien wrote \"The Hobbit.\" It sold well.") == [
        "Dr. Smith paid $3.50 at 5 p.m. on Monday.", "He left!",
        "Did she?", "J. R. R. Tolkien wrote \"The Hobbit.\"",
        "It sold well."]
    assert d.split_sentences("  ") == []
    assert d.split_sentences("no final stop") == ["no final stop"]


def test_wiki_markup_is_stripped():
    markup = """{{Infobox country|name={{nowrap|Foo}}|capital=Bar}}
'''Foo''' ([[Help:IPA|/fu/]]) is a [[country]] in [[Europe|western Europe]].<ref name="a">Cite</ref> It has 3&nbsp;cities.<ref>x</ref><!-- hidden -->
{| class="wikitable"
| cell || {{flag|X}}
|}
[[File:Foo.jpg|thumb|A [[picture]] of Foo.]]

== History ==
* a list item
# numbered
See [http://example.com the site] and <math>x^2</math> too.
[[Category:Countries]]
[[de:Foo]]"""
    assert d.wiki_to_paragraphs(markup) == [
        "Foo () is a country in western Europe. It has 3 cities.",
        "See the site and too."]


def _dump(tmp_path, pages):
    body = "".join(
        f"<page><title>{t}</title><ns>{ns}</ns><revision><text>{text}"
        f"</text></revision></page>" for t, ns, text in pages)
    path = tmp_path / "dump.xml.bz2"
    path.write_bytes(bz2.compress(
        f'<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/">'
        f"{body}</mediawiki>".encode()))
    return path


def test_dump_reader_keeps_articles_only(tmp_path):
    path = _dump(tmp_path, [
        ("A", "0", "First sentence. Second one."),
        ("B", "0", "#REDIRECT [[A]]"),
        ("Talk:A", "1", "Chatter here."),
        ("C", "0", "{{stub}}"),
    ])
    assert list(d.read_wikipedia_dump(path)) == [
        ["First sentence.", "Second one."], []]


def test_real_wikipedia_sample_is_clean_prose():
    stats = d.CorpusStats()
    docs = list(d.read_documents("sample:wikipedia", stats))
    assert stats.documents == 105 and stats.sentences > 18_000
    text = " ".join(s for doc in docs for s in doc)
    for markup in ("{{", "}}", "[[", "]]", "<ref", "'''", "|-", "&nbsp;"):
        assert markup not in text, markup
    assert docs[0][0].startswith("Anarchism is a political philosophy")


def test_real_lee_sample():
    docs, stats = d.load_documents("sample:lee")
    assert stats.documents == 300 and len(docs[0]) > 3


def test_file_formats_and_empty_documents(tmp_path):
    path = tmp_path / "c.txt"
    path.write_bytes(b"One.\nTwo.\n\n\n\nThree.\n\n")
    stats = d.CorpusStats()
    assert list(d.read_documents(f"sentences:{path}", stats)) == [
        ["One.", "Two."], ["Three."]]
    assert stats.empty_documents == 2 and stats.documents == 2
    para = tmp_path / "p.txt"
    para.write_text("First. Second.\nThird.\n\nOther doc. Yes.\n")
    assert list(d.read_documents(f"paragraphs:{para}")) == [
        ["First.", "Second.", "Third."], ["Other doc.", "Yes."]]
    lines = tmp_path / "l.txt"
    lines.write_text("Doc one. Has two.\n\nDoc three.\n")
    stats = d.CorpusStats()
    assert list(d.read_documents(f"lines:{lines}", stats)) == [
        ["Doc one.", "Has two."], ["Doc three."]]
    assert stats.empty_documents == 1


def test_invalid_utf8_is_replaced_and_counted(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"Caf\xe9 ok.\nFine.\n")
    stats = d.CorpusStats()
    assert list(d.read_documents(str(path), stats)) == [
        ["Caf\ufffd ok.", "Fine."]]
    assert stats.lines_with_invalid_utf8 == 1


def test_empty_and_missing_corpora(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n \n")
    with pytest.raises(ValueError, match="holds no text"):
        d.load_documents(str(empty))
    with pytest.raises(FileNotFoundError, match="Corpus file"):
        d.load_documents(str(tmp_path / "nope.txt"))
    with pytest.raises(ValueError, match="sample:wikipedia, sample:lee or sample:rt_train"):
        d.load_documents("sample:books")


def test_tfds_wikipedia_with_mock_data():
    tfds = pytest.importorskip("tensorflow_datasets")
    with tfds.testing.mock_data(num_examples=6):
        docs, stats = d.load_documents("tfds:wikipedia/20230601.en")
    assert stats.documents + stats.empty_documents == 6
    assert all(isinstance(s, str) and s for doc in docs for s in doc)


def test_rt_train_corpus_is_the_task_training_split_only():
    from bert_tf.tasks.classification.data import load_rt_sentiment

    docs, stats = d.load_documents("sample:rt_train")
    task = load_rt_sentiment()
    assert stats.documents == task.sizes["train"] == 8454
    def texts(split):
        return {" ".join(t.decode().split()) for t in next(iter(
            task.split(split).batch(10000)))["text"].numpy()}
    corpus = {" ".join(doc) for doc in docs}
    assert len(corpus & texts("train")) > 8000
    assert not corpus & texts("test")
