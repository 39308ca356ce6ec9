"""Documents -> NSP sentence pairs as TFRecords of text (offline, parallel).

The original BERT `create_pretraining_data.py` algorithm, with lengths in
WordPiece tokens: the target length is seq_length - 3 (10% of the time a
shorter random one); sentences accumulate until the target; segment A is a
random prefix of them, B the true continuation (IsNext) or, 50% of the time,
text from another document (NotNext) with the unused sentences put back. A
chunk of a single sentence is split at a random word so that it can still
be an IsNext pair (the original always made those NotNext, which biases the
label share).

Records hold text (`text_a`, `text_b`, `next_sentence_label`), not ids:
tokenization, trimming and masking happen in the input graph. Each
(document, duplicate) draws from its own seeded generator, so the output is
the same for any number of worker processes.
"""

import dataclasses
import json
import multiprocessing
import random
import time

import numpy as np

from bert_tf.data.protobuf_wire import field, varint
from bert_tf.safe_io import (check_writable, guarded_write, remove_quietly,
                             write_text_atomic)
from bert_tf.storage import GPath

MANIFEST = "manifest.json"


@dataclasses.dataclass
class PairStats:
    documents: int = 0
    pairs: int = 0
    not_next: int = 0
    tokens: int = 0
    shards: int = 0
    seconds: float = 0.0

    @property
    def not_next_share(self):
        return self.not_next / max(1, self.pairs)

    @property
    def mean_tokens(self):
        return self.tokens / max(1, self.pairs)

    def summary(self):
        return (f"{self.documents:,} documents -> {self.pairs:,} pairs "
                f"(NotNext {self.not_next_share:.1%}, mean "
                f"{self.mean_tokens:.1f} WordPiece tokens per pair) in "
                f"{self.shards} shard(s), {self.seconds:.1f} s")


# --- tf.train.Example without TensorFlow (workers stay light) ---------------

def _feature_entry(key, feature):
    return field(1, field(1, key.encode()) + field(2, feature))


def serialize_pair(text_a, text_b, label):
    """A `tf.train.Example` with text_a, text_b, next_sentence_label.

    Hand-encoded protobuf (three fixed features), byte-identical to
    `tf.train.Example.SerializeToString()` for the same content.
    """
    features = (
        _feature_entry("next_sentence_label",
                       field(3, field(1, varint(label)))) +
        _feature_entry("text_a", field(1, field(1, text_a.encode()))) +
        _feature_entry("text_b", field(1, field(1, text_b.encode()))))
    return field(1, features)


# --- the algorithm -----------------------------------------------------------

def _split_sentence(rng, sentence):
    """Splits one (text, tokens) sentence at a random word boundary."""
    text, tokens = sentence
    words = text.split(" ")
    if len(words) < 2:
        return None
    cut = rng.randint(1, len(words) - 1)
    share = cut / len(words)
    first = max(1, round(tokens * share))
    return [(" ".join(words[:cut]), first),
            (" ".join(words[cut:]), max(1, tokens - first))]


def pair_plans(document, index, document_sizes, seq_length, rng,
               short_seq_prob=0.1):
    """Yields the pairs of document `index` as plans: (segment A sentences,
    segment B sentences or a `(other, start, target_b)` request,
    is_random_next).

    The algorithm needs of the other documents only their sizes
    (`document_sizes`: sentences per document): a NotNext segment B is a
    request for the sentences of document `other` from `start` until
    `target_b` tokens, resolved by `resolve_segment`. So it runs where
    only one document is at hand (the Beam pipeline), with the same random
    draws as with the whole corpus in memory.
    """
    count = len(document_sizes)
    max_tokens = seq_length - 3
    target = max_tokens
    if rng.random() < short_seq_prob:
        target = rng.randint(2, max_tokens)
    chunk, length, i = [], 0, 0
    while i < len(document):
        chunk.append(document[i])
        length += document[i][1]
        if i == len(document) - 1 or length >= target:
            if len(chunk) == 1:
                chunk = _split_sentence(rng, chunk[0]) or chunk
            a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
            segment_a = chunk[:a_end]
            random_next = len(chunk) == 1 or (
                count > 1 and rng.random() < 0.5)
            if random_next and count > 1:
                target_b = target - sum(n for _, n in segment_a)
                for _ in range(10):
                    other = rng.randint(0, count - 1)
                    if other != index:
                        break
                start = rng.randint(0, document_sizes[other] - 1)
                yield segment_a, (other, start, target_b), True
                # The sentences not used for A go back into the document.
                i -= len(chunk) - a_end
            elif chunk[a_end:]:
                yield segment_a, chunk[a_end:], False
            chunk, length = [], 0
        i += 1


def resolve_segment(source, start, target_b):
    """The sentences of `source` from `start` until `target_b` tokens."""
    segment_b, b_length = [], 0
    for sentence in source[start:]:
        segment_b.append(sentence)
        b_length += sentence[1]
        if b_length >= target_b:
            break
    return segment_b


def pair_of(segment_a, segment_b, random_next, seq_length):
    """(text_a, text_b, is_random_next, tokens) of two sentence lists."""
    tokens = sum(n for _, n in segment_a + segment_b)
    return (" ".join(t for t, _ in segment_a),
            " ".join(t for t, _ in segment_b), random_next,
            min(tokens, seq_length - 3))


def pairs_from_document(documents, index, seq_length, rng,
                        short_seq_prob=0.1):
    """Yields (text_a, text_b, is_random_next, tokens) for one document.

    `documents` holds every document as a list of (sentence, WordPiece
    length); NotNext segments come from a random other document.
    """
    sizes = _Sizes(documents)
    for segment_a, segment_b, random_next in pair_plans(
            documents[index], index, sizes, seq_length, rng,
            short_seq_prob):
        if random_next:
            other, start, target_b = segment_b
            segment_b = resolve_segment(documents[other], start, target_b)
        if segment_b:
            yield pair_of(segment_a, segment_b, random_next, seq_length)


class _Sizes:
    """`len(documents[i])` by index, without copying the corpus."""

    def __init__(self, documents):
        self.documents = documents

    def __len__(self):
        return len(self.documents)

    def __getitem__(self, index):
        return len(self.documents[index])


_WORKER = {}


def _init_worker(documents, seq_length, short_seq_prob, seed):
    _WORKER.update(documents=documents, seq_length=seq_length,
                   short_seq_prob=short_seq_prob, seed=seed)


def _pairs_for(task):
    """Serialized pairs of one (duplicate, document range)."""
    dupe, start, stop = task
    w = _WORKER
    records, not_next, tokens = [], 0, 0
    for index in range(start, stop):
        rng = random.Random(f"{w['seed']}-{dupe}-{index}")
        for text_a, text_b, random_next, n in pairs_from_document(
                w["documents"], index, w["seq_length"], rng,
                w["short_seq_prob"]):
            records.append(serialize_pair(text_a, text_b, int(random_next)))
            not_next += random_next
            tokens += n
    return records, not_next, tokens


def sentence_lengths(documents, tokenizer, batch_size=8192):
    """WordPiece length of every sentence, tokenized in large batches."""
    import tensorflow as tf

    flat = [s for document in documents for s in document]
    lengths = np.zeros(len(flat), np.int64)
    for start in range(0, len(flat), batch_size):
        ids = tokenizer(tf.constant(flat[start:start + batch_size]))
        lengths[start:start + batch_size] = ids.row_lengths().numpy()
    out, k = [], 0
    for document in documents:
        out.append([(s, max(1, int(n))) for s, n in
                    zip(document, lengths[k:k + len(document)])])
        k += len(document)
    return out


def write_pairs(documents, tokenizer, output_dir, seq_length=128,
                dupe_factor=5, seed=12345, workers=1, num_shards=None,
                short_seq_prob=0.1, eval_share=0.0, log=print):
    """Creates NSP pairs and writes them as TFRecord shards of text.

    Args:
        documents: lists of sentences (see `bert_tf.data.documents`).
        tokenizer: a `BertTokenizer`; lengths are measured in its pieces.
        output_dir: directory for `pairs-SSSSS-of-NNNNN.tfrecord`,
            `manifest.json` and `vocab.txt`.
        seq_length: the sequence length the pairs are made for.
        dupe_factor: passes over the corpus (each with other splits).
        seed: makes the output reproducible.
        workers: processes creating pairs (any number gives the same
            output).
        num_shards: output files (default: 1 per 10,000 pairs, at least 1).
        short_seq_prob: share of shorter random target lengths.
        eval_share: share of whole documents (chosen by `seed`) held out
            and written, once, to `output_dir/eval` for evaluation.
        log: progress lines.

    Returns:
        a `PairStats` (of the training pairs).
    """
    if not 0.0 <= eval_share < 1.0:
        raise ValueError(f"eval_share = {eval_share}: must be in [0, 1).")
    check_writable(output_dir, "the pairs")
    documents = list(documents)
    if eval_share and len(documents) < 2:
        raise ValueError("eval_share needs at least 2 documents.")
    evaluation = []
    if eval_share:
        order = list(range(len(documents)))
        random.Random(f"{seed}-eval").shuffle(order)
        held = set(order[:max(1, round(eval_share * len(documents)))])
        evaluation = [d for i, d in enumerate(documents) if i in held]
        documents = [d for i, d in enumerate(documents) if i not in held]
    stats = _write_split(documents, tokenizer, GPath(output_dir), seq_length,
                         dupe_factor, seed, workers, num_shards,
                         short_seq_prob, log)
    if evaluation:
        _write_split(evaluation, tokenizer, GPath(output_dir) / "eval",
                     seq_length, 1, seed + 1, workers, None, short_seq_prob,
                     lambda line: log(f"eval: {line}"))
    return stats


def write_manifest(output_dir, stats, shards, **settings):
    """Writes `output_dir/manifest.json`: the record format, `settings`
    (seq_length, dupe_factor, ...), the shards and the `PairStats`."""
    manifest = {
        "format": "bert_tf sentence pairs v1",
        "features": {"text_a": "bytes", "text_b": "bytes",
                     "next_sentence_label": "int64 (0 IsNext, 1 NotNext)"},
        **settings, "shards": shards, "stats": dataclasses.asdict(stats),
    }
    # Written last and whole: shards without it are not read as pairs.
    write_text_atomic(GPath(output_dir) / MANIFEST,
                      json.dumps(manifest, indent=2) + "\n", "the manifest")


def _write_split(documents, tokenizer, output_dir, seq_length, dupe_factor,
                 seed, workers, num_shards, short_seq_prob, log):
    import tensorflow as tf

    if seq_length < 8:
        raise ValueError(f"seq_length = {seq_length}: pairs need room for "
                         "[CLS] A [SEP] B [SEP]; use at least 8.")
    if not documents:
        raise ValueError("No documents to make pairs from: the corpus is "
                         "empty.")
    start_time = time.time()
    output_dir = GPath(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    for old in output_dir.glob("pairs-*.tfrecord"):
        old.unlink()
    measured = sentence_lengths(documents, tokenizer)
    # About four tasks per worker, at most 256 documents each.
    step = max(1, min(256, len(measured) // (4 * workers)))
    tasks = [(dupe, s, min(s + step, len(measured)))
             for dupe in range(dupe_factor)
             for s in range(0, len(measured), step)]
    args = (measured, seq_length, short_seq_prob, seed)
    if workers > 1:
        # fork: workers run pure Python (no TensorFlow), and fork needs no
        # `if __name__ == "__main__"` guard in the caller's script.
        pool = multiprocessing.get_context("fork").Pool(
            workers, initializer=_init_worker, initargs=args)
        results = pool.imap(_pairs_for, tasks)
    else:
        pool = None
        _init_worker(*args)
        results = map(_pairs_for, tasks)
    stats = PairStats(documents=len(measured))
    records = []
    try:
        for chunk, not_next, tokens in results:
            records.extend(chunk)
            stats.not_next += not_next
            stats.tokens += tokens
    finally:
        if pool is not None:
            pool.close()
            pool.join()
    stats.pairs = len(records)
    # Deterministic global shuffle, then round-robin into shards.
    random.Random(seed).shuffle(records)
    num_shards = num_shards or max(1, min(256, len(records) // 10_000))
    shards = []
    # Rewriting a directory: its old manifest goes first, so shards half
    # rewritten are never read as a complete set.
    remove_quietly(output_dir / MANIFEST)
    for shard in range(num_shards):
        path = output_dir / f"pairs-{shard:05d}-of-{num_shards:05d}.tfrecord"
        part = records[shard::num_shards]
        with guarded_write(path, "a pair shard", cleanup=(path,)), \
                tf.io.TFRecordWriter(str(path)) as writer:
            for record in part:
                writer.write(record)
        shards.append({"file": path.name, "records": len(part),
                       "bytes": path.stat().st_size})
    stats.shards = num_shards
    stats.seconds = time.time() - start_time
    write_manifest(output_dir, stats, shards, seq_length=seq_length,
                   dupe_factor=dupe_factor, seed=seed,
                   short_seq_prob=short_seq_prob)
    # The vocab the lengths were measured with (any vocab can read the text).
    tokenizer.vocab.save(output_dir / "vocab.txt")
    log(stats.summary())
    log(f"wrote {num_shards} shard(s), {MANIFEST} and vocab.txt to "
        f"{output_dir}")
    return stats
