"""Sentence-pair creation: `bert-tf pairs` vs a straight single-process
port of the original BERT `create_pretraining_data.py` algorithm.

The port does what the original script does, in pure Python: tokenize
every sentence with the Python BERT tokenizer (transformers'
BertTokenizerLegacy, a faithful port of the original FullTokenizer),
build instances document by document, mask them, shuffle, convert to ids
and write tf.train.Examples. `bert-tf pairs` measures sentences with the
in-graph tokenizer and writes text pairs (masking happens later, in the
input pipeline, fresh every epoch).

Both run on the same real corpus (Wikipedia sample + Lee news) with the
same dupe factor and sequence length.

    .venv-bench/bin/python benchmarks/pair_creation.py   # or make bench
"""

import argparse
import collections
import os
import random
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402

from bert_tf.data import documents, pairs, samples  # noqa: E402
from bert_tf.text.tokenizer import BertTokenizer  # noqa: E402
from bert_tf.text.vocab import read_vocab  # noqa: E402

Instance = collections.namedtuple(
    "Instance", "tokens segment_ids is_random_next positions labels")


def _truncate_pair(tokens_a, tokens_b, max_tokens, rng):
    while len(tokens_a) + len(tokens_b) > max_tokens:
        longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()


def _mask(tokens, vocab_words, rng, rate=0.15, max_predictions=20):
    candidates = [i for i, t in enumerate(tokens)
                  if t not in ("[CLS]", "[SEP]")]
    rng.shuffle(candidates)
    output = list(tokens)
    count = min(max_predictions, max(1, int(round(len(tokens) * rate))))
    chosen = sorted(candidates[:count])
    for i in chosen:
        if rng.random() < 0.8:
            output[i] = "[MASK]"
        elif rng.random() < 0.5:
            output[i] = vocab_words[rng.randint(0, len(vocab_words) - 1)]
    return output, chosen, [tokens[i] for i in chosen]


def _instances(all_documents, index, seq_length, vocab_words, rng):
    document = all_documents[index]
    max_tokens = seq_length - 3
    target = max_tokens if rng.random() >= 0.1 else rng.randint(2,
                                                                max_tokens)
    instances, chunk, length, i = [], [], 0, 0
    while i < len(document):
        chunk.append(document[i])
        length += len(document[i])
        if i == len(document) - 1 or length >= target:
            if chunk:
                a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 \
                    else 1
                tokens_a = [t for s in chunk[:a_end] for t in s]
                tokens_b, random_next = [], False
                if len(chunk) == 1 or rng.random() < 0.5:
                    random_next = True
                    for _ in range(10):
                        other = rng.randint(0, len(all_documents) - 1)
                        if other != index:
                            break
                    source = all_documents[other]
                    for sentence in source[rng.randint(0, len(source) - 1):]:
                        tokens_b.extend(sentence)
                        if len(tokens_b) >= target - len(tokens_a):
                            break
                    i -= len(chunk) - a_end
                else:
                    tokens_b = [t for s in chunk[a_end:] for t in s]
                _truncate_pair(tokens_a, tokens_b, max_tokens, rng)
                if tokens_a and tokens_b:
                    tokens = ["[CLS]"] + tokens_a + ["[SEP]"] + tokens_b + \
                        ["[SEP]"]
                    segments = [0] * (len(tokens_a) + 2) + [1] * (
                        len(tokens_b) + 1)
                    tokens, positions, labels = _mask(tokens, vocab_words,
                                                      rng)
                    instances.append(Instance(tokens, segments, random_next,
                                              positions, labels))
            chunk, length = [], 0
        i += 1
    return instances


def original_port(docs, vocab_path, out_path, seq_length, dupe_factor,
                  seed):
    from transformers.models.bert.tokenization_bert_legacy import \
        BertTokenizerLegacy

    tokenizer = BertTokenizerLegacy(str(vocab_path), do_lower_case=True)
    all_documents = [[tokenizer.tokenize(s) for s in d] for d in docs]
    all_documents = [d for d in all_documents if d]
    rng = random.Random(seed)
    rng.shuffle(all_documents)
    vocab_words = list(tokenizer.vocab.keys())
    instances = []
    for _ in range(dupe_factor):
        for index in range(len(all_documents)):
            instances.extend(_instances(all_documents, index, seq_length,
                                        vocab_words, rng))
    rng.shuffle(instances)

    def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

    with tf.io.TFRecordWriter(out_path) as writer:
        for inst in instances:
            ids = tokenizer.convert_tokens_to_ids(inst.tokens)
            pad = seq_length - len(ids)
            positions = list(inst.positions) + [0] * (20 - len(inst.positions))
            labels = tokenizer.convert_tokens_to_ids(inst.labels)
            weights = [1.0] * len(labels) + [0.0] * (20 - len(labels))
            labels += [0] * (20 - len(labels))
            example = tf.train.Example(features=tf.train.Features(feature={
                "input_ids": ints(ids + [0] * pad),
                "input_mask": ints([1] * len(ids) + [0] * pad),
                "segment_ids": ints(inst.segment_ids + [0] * pad),
                "masked_lm_positions": ints(positions),
                "masked_lm_ids": ints(labels),
                "masked_lm_weights": tf.train.Feature(
                    float_list=tf.train.FloatList(value=weights)),
                "next_sentence_labels": ints([int(inst.is_random_next)]),
            }))
            writer.write(example.SerializeToString())
    return len(instances)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dupe-factor", type=int, default=5)
    parser.add_argument("--seq-length", type=int, default=128)
    args = parser.parse_args()

    vocab = read_vocab(samples.fetch("minilm") / "vocab.txt")
    docs, stats = documents.load_documents(["sample:wikipedia",
                                            "sample:lee"])
    words = sum(len(s.split()) for d in docs for s in d)
    print(f"corpus: {stats.documents} documents, {stats.sentences:,} "
          f"sentences, {words:,} words; dupe factor {args.dupe_factor}, "
          f"seq {args.seq_length}")
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        count = original_port(docs, vocab.path, os.path.join(tmp, "o.tfr"),
                              args.seq_length, args.dupe_factor, 12345)
        port_seconds = time.perf_counter() - start
        print(f"original algorithm, single-process port: {count:,} "
              f"instances in {port_seconds:.1f} s")
        tokenizer = BertTokenizer(vocab)
        for workers in (1, 4):
            start = time.perf_counter()
            result = pairs.write_pairs(
                docs, tokenizer, os.path.join(tmp, f"w{workers}"),
                seq_length=args.seq_length, dupe_factor=args.dupe_factor,
                seed=12345, workers=workers, log=lambda *a: None)
            seconds = time.perf_counter() - start
            print(f"bert-tf pairs, {workers} worker(s): {result.pairs:,} "
                  f"pairs in {seconds:.1f} s  ({port_seconds / seconds:.1f}x"
                  " faster)")


if __name__ == "__main__":
    main()
