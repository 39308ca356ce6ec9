"""Token ids of bert_tf's in-graph tokenizer vs the original BERT tokenizer.

The reference is transformers' BertTokenizerLegacy, a faithful Python port
of the original FullTokenizer, on every sentence of the real sample corpus
(Wikipedia sample + Lee news) with the bert-base-uncased vocab. Prints the
share of sentences with identical ids and each kind of difference.

    .venv-bench/bin/python benchmarks/tokenizer_fidelity.py
"""

import collections
import os
import unicodedata

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402

from bert_tf.data import documents, samples  # noqa: E402
from bert_tf.text.tokenizer import BertTokenizer  # noqa: E402


def compare(sentences, vocab_path):
    """(identical count, [(sentence, ours, reference)] differing)."""
    from transformers.models.bert.tokenization_bert_legacy import \
        BertTokenizerLegacy

    reference = BertTokenizerLegacy(str(vocab_path), do_lower_case=True)
    ours = BertTokenizer(vocab_path)
    same, differing = 0, []
    for start in range(0, len(sentences), 4096):
        batch = sentences[start:start + 4096]
        ids = ours(tf.constant(batch)).to_list()
        for sentence, got in zip(batch, ids):
            expected = reference.convert_tokens_to_ids(
                reference.tokenize(sentence))
            if got == expected:
                same += 1
            else:
                differing.append((sentence, got, expected))
    return same, differing


def kind_of_difference(sentence):
    """Names the unusual characters in a sentence, by Unicode category."""
    unusual = {c for c in sentence if ord(c) > 0x2FF}
    return ", ".join(sorted(f"{unicodedata.name(c, hex(ord(c)))} "
                            f"({unicodedata.category(c)})" for c in unusual)
                     ) or "ASCII/Latin-1 only"


def main():
    vocab_path = samples.fetch("minilm") / "vocab.txt"
    docs, _ = documents.load_documents(["sample:wikipedia", "sample:lee"])
    sentences = [s for d in docs for s in d]
    same, differing = compare(sentences, vocab_path)
    print(f"identical token ids on {same:,} of {len(sentences):,} sentences "
          f"({same / len(sentences):.3%})")
    kinds = collections.Counter(kind_of_difference(s) for s, _, _ in
                                differing)
    for kind, count in kinds.most_common():
        print(f"  {count:4d} x {kind}")


if __name__ == "__main__":
    main()
