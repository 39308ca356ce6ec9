"""Pair creation as an Apache Beam pipeline: the pairs of `write_pairs`,
made by any Beam runner (DirectRunner here; Dataflow, Flink or Spark on a
cluster) with documents streaming through, never the corpus in memory.

The pipeline runs the same algorithm with the same random draws
(`bert_tf.data.pairs.pair_plans`), so with the same seed its output holds
exactly the pairs the in-process writer makes (as a multiset; the order
within and across shards differs):

1. each corpus (file, sample or TFDS split) is read as a stream of
   documents, numbered within the corpus; a count per corpus gives every
   document its global index (the in-process writer's order);
2. the held-out share (`eval_share`) is drawn from the same seeded
   permutation, and each document gets its index within its split;
3. sentences are measured in WordPiece tokens (the tokenizer in each
   worker);
4. per (document, duplicate) the algorithm plans its pairs; a NotNext
   segment B is a request (other document, first sentence, tokens) that
   needs only the other document's size (a side input of one integer per
   document);
5. requests are grouped with the documents they name and resolved;
6. pairs are reshuffled and written as `pairs-SSSSS-of-NNNNN.tfrecord`
   shards, with the manifest and vocab as `write_pairs` writes them.

Install the extra: `pip install -e .[beam]` (apache-beam==2.77.0).
"""

import bisect
import os
import random
import time

from bert_tf.data import pairs as pairs_lib
from bert_tf.storage import GPath

try:  # an optional extra: the module imports without it
    import apache_beam
except ImportError:
    apache_beam = None

RUNNERS = ("DirectRunner", "DataflowRunner", "FlinkRunner", "SparkRunner")


def _beam():
    if apache_beam is None:
        raise RuntimeError("The Beam pair pipeline needs apache-beam: pip "
                           "install -e .[beam] (apache-beam==2.77.0).")
    return apache_beam


def read_corpus(item, cache=None):
    """Yields ((corpus number, document number), document) of one corpus,
    streaming (`bert_tf.data.documents.read_documents`)."""
    from bert_tf.data.documents import read_documents

    number, corpus = item
    for ordinal, document in enumerate(read_documents(corpus, cache=cache)):
        yield (number, ordinal), document


class _Split:
    """Which split a global document index falls in, and its index there
    (as `write_pairs` splits: the first `eval_share` of a seeded
    permutation is held out)."""

    def __init__(self, counts, eval_share, seed):
        self.offsets, total = {}, 0
        for number in sorted(counts):
            self.offsets[number] = total
            total += counts[number]
        self.held = []
        if eval_share:
            order = list(range(total))
            random.Random(f"{seed}-eval").shuffle(order)
            self.held = sorted(order[:max(1, round(eval_share * total))])
        self.total = total

    def place(self, key):
        index = self.offsets[key[0]] + key[1]
        position = bisect.bisect_left(self.held, index)
        if position < len(self.held) and self.held[position] == index:
            return "eval", position
        return "train", index - position


class _Measure(apache_beam.DoFn if apache_beam else object):
    """DoFn: (index, sentences) -> (index, [(sentence, pieces)])."""

    def __init__(self, vocab_path):
        super().__init__()
        self.vocab_path = str(vocab_path)
        self.tokenizer = None

    def setup(self):
        from bert_tf.text.tokenizer import BertTokenizer
        from bert_tf.text.vocab import read_vocab

        self.tokenizer = BertTokenizer(read_vocab(self.vocab_path))

    def process(self, element):
        index, document = element
        yield index, pairs_lib.sentence_lengths([document],
                                                self.tokenizer)[0]


def _plans(element, sizes, seq_length, dupe_factor, seed, short_seq_prob):
    """Complete pairs (main output) and NotNext requests keyed by the
    document they read (tagged `request`) of one measured document."""
    beam = _beam()
    index, document = element
    for dupe in range(dupe_factor):
        rng = random.Random(f"{seed}-{dupe}-{index}")
        for segment_a, segment_b, random_next in pairs_lib.pair_plans(
                document, index, sizes, seq_length, rng, short_seq_prob):
            if random_next:
                other, start, target_b = segment_b
                yield beam.pvalue.TaggedOutput(
                    "request", (other, (segment_a, start, target_b)))
            else:
                yield pairs_lib.pair_of(segment_a, segment_b, False,
                                        seq_length)


def _resolve(element, seq_length):
    """The NotNext pairs of the requests grouped with their document."""
    _, grouped = element
    documents = list(grouped["document"])
    for segment_a, start, target_b in grouped["request"]:
        segment_b = pairs_lib.resolve_segment(documents[0], start, target_b)
        yield pairs_lib.pair_of(segment_a, segment_b, True, seq_length)


class _Sizes(dict):
    """{index: sentences} that `pair_plans` reads like a list."""


def _split_pipeline(beam, documents, name, seq_length, dupe_factor, seed,
                    short_seq_prob, vocab_path, output_dir, num_shards):
    documents_counter = beam.metrics.Metrics.counter("pairs",
                                                     f"{name}_documents")

    def count(element):
        documents_counter.inc()
        return element

    measured = (documents | f"{name}: count" >> beam.Map(count)
                | f"{name}: measure" >> beam.ParDo(_Measure(vocab_path)))
    sizes = beam.pvalue.AsDict(measured | f"{name}: sizes" >> beam.Map(
        lambda kv: (kv[0], len(kv[1]))))
    planned = measured | f"{name}: plan" >> beam.FlatMap(
        lambda element, sizes: _plans(element, _Sizes(sizes), seq_length,
                                      dupe_factor, seed, short_seq_prob),
        sizes).with_outputs("request", main="pairs")
    resolved = ({"document": measured, "request": planned.request}
                | f"{name}: group requests" >> beam.CoGroupByKey()
                | f"{name}: resolve" >> beam.FlatMap(_resolve, seq_length))
    counter = {k: beam.metrics.Metrics.counter("pairs", f"{name}_{k}")
               for k in ("pairs", "not_next", "tokens")}

    def serialize(pair):
        text_a, text_b, random_next, tokens = pair
        counter["pairs"].inc()
        counter["not_next"].inc(int(random_next))
        counter["tokens"].inc(tokens)
        return pairs_lib.serialize_pair(text_a, text_b, int(random_next))

    return ((planned.pairs, resolved)
            | f"{name}: flatten" >> beam.Flatten()
            | f"{name}: serialize" >> beam.Map(serialize)
            | f"{name}: reshuffle" >> beam.Reshuffle()
            | f"{name}: write" >> beam.io.WriteToTFRecord(
                str(GPath(output_dir) / "pairs"),
                coder=beam.coders.BytesCoder(), file_name_suffix=".tfrecord",
                num_shards=num_shards, shard_name_template="-SSSSS-of-NNNNN"))


def run_pairs_pipeline(corpora, vocab_path, output_dir, seq_length=128,
                       dupe_factor=5, seed=12345, num_shards=1,
                       short_seq_prob=0.1, eval_share=0.0,
                       runner="DirectRunner", pipeline_args=(), cache=None,
                       log=print):
    """Runs pair creation on Beam (see the module docstring).

    Args:
        corpora: corpora (`bert_tf.data.documents`), one per file or
            sample; each is read by one worker as a stream.
        vocab_path: vocab.txt (lengths are measured in its pieces).
        output_dir: directory for the shards, `manifest.json` and
            `vocab.txt` (and `eval/` with `eval_share`); local or any
            filesystem Beam writes (gs://...) for the shards.
        seq_length, dupe_factor, seed, short_seq_prob, eval_share: as in
            `bert_tf.data.pairs.write_pairs`.
        num_shards: output files (0: the runner decides).
        runner: a Beam runner name.
        pipeline_args: further Beam pipeline options (e.g.
            `--direct_num_workers=2 --direct_running_mode=multi_processing`,
            or a Dataflow project and region).
        log: progress lines.

    Returns:
        a `PairStats` of the training pairs.
    """
    beam = _beam()
    from apache_beam.options.pipeline_options import PipelineOptions

    if seq_length < 8:
        raise ValueError(f"seq_length = {seq_length}: pairs need room for "
                         "[CLS] A [SEP] B [SEP]; use at least 8.")
    if not 0.0 <= eval_share < 1.0:
        raise ValueError(f"eval_share = {eval_share}: must be in [0, 1).")
    corpora = [str(c) for c in ([corpora] if isinstance(
        corpora, (str, os.PathLike)) else corpora)]
    output_dir = GPath(output_dir)
    for directory in (output_dir, output_dir / "eval"):
        for old in directory.glob("pairs-*.tfrecord"):
            old.unlink()
    start = time.time()
    options = PipelineOptions(["--runner", runner, *pipeline_args])
    pipeline = beam.Pipeline(options=options)
    documents = (pipeline
                 | "corpora" >> beam.Create(list(enumerate(corpora)))
                 | "read" >> beam.FlatMap(read_corpus, cache))
    counts = beam.pvalue.AsDict(
        documents
        | "count" >> beam.Map(lambda kv: (kv[0][0], 1))
        | "per corpus" >> beam.CombinePerKey(sum))

    def place(element, counts):
        split, index = _split_for(counts, eval_share, seed).place(
            element[0])
        return beam.pvalue.TaggedOutput(split, (index, element[1]))

    placed = documents | "place" >> beam.Map(place, counts).with_outputs(
        "train", "eval")
    _split_pipeline(beam, placed.train, "train", seq_length, dupe_factor,
                    seed, short_seq_prob, vocab_path, output_dir,
                    num_shards)
    if eval_share:
        _split_pipeline(beam, placed.eval, "eval", seq_length, 1, seed + 1,
                        short_seq_prob, vocab_path, output_dir / "eval", 1)
    result = pipeline.run()
    result.wait_until_finish()
    stats = {}
    for split in ("train", "eval") if eval_share else ("train",):
        stats[split] = _finish(result, split, output_dir if split ==
                               "train" else output_dir / "eval", vocab_path,
                               seq_length, dupe_factor if split == "train"
                               else 1, seed if split == "train" else
                               seed + 1, short_seq_prob, time.time() - start)
        log(("eval: " if split == "eval" else "") + stats[split].summary())
    log(f"wrote the shards, {pairs_lib.MANIFEST} and vocab.txt to "
        f"{output_dir} ({runner})")
    return stats["train"]


_SPLITS = {}


def _split_for(counts, eval_share, seed):
    """One `_Split` per worker and input (the permutation is O(documents))."""
    key = (tuple(sorted(counts.items())), eval_share, seed)
    if key not in _SPLITS:
        _SPLITS.clear()
        _SPLITS[key] = _Split(counts, eval_share, seed)
    return _SPLITS[key]


def _finish(result, split, output_dir, vocab_path, seq_length, dupe_factor,
            seed, short_seq_prob, seconds):
    """The split's `PairStats` (from the pipeline's counters) and its
    manifest and vocab, as `write_pairs` writes them."""
    from apache_beam.metrics.metric import MetricsFilter

    from bert_tf.text.vocab import read_vocab

    values = {}
    for counter in result.metrics().query(MetricsFilter().with_namespace(
            "pairs"))["counters"]:
        name = counter.key.metric.name
        if name.startswith(f"{split}_"):
            values[name[len(split) + 1:]] = counter.committed or \
                counter.attempted
    shards = sorted(GPath(output_dir).glob("pairs-*.tfrecord"))
    stats = pairs_lib.PairStats(
        documents=values.get("documents", 0), pairs=values.get("pairs", 0),
        not_next=values.get("not_next", 0), tokens=values.get("tokens", 0),
        shards=len(shards), seconds=seconds)
    pairs_lib.write_manifest(
        output_dir, stats, [{"file": p.name, "bytes": p.stat().st_size}
                            for p in shards],
        seq_length=seq_length, dupe_factor=dupe_factor, seed=seed,
        short_seq_prob=short_seq_prob, made_by="apache_beam")
    read_vocab(vocab_path).save(GPath(output_dir) / "vocab.txt")
    return stats


__all__ = ["RUNNERS", "read_corpus", "run_pairs_pipeline"]
