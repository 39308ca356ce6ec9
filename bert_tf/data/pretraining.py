"""The pre-training input pipeline: TFRecord text pairs -> masked batches.

Everything after reading happens in the graph: tokenization and packing by
the same `BertTokenizer`/`BertPacker` layers as fine-tuning and serving,
then masking (`bert_tf.data.masking`). Masks are drawn anew each epoch; a
seed makes a run reproducible.
"""

import json
import os

import tensorflow as tf

from bert_tf.data.masking import continuation_table, mask_tokens
from bert_tf.data.pairs import MANIFEST
from bert_tf.storage import GPath
from bert_tf.text.packer import BertPacker
from bert_tf.text.tokenizer import BertTokenizer
from bert_tf.text.features import INPUT_NAMES
from bert_tf.text.vocab import Vocab, read_vocab

FEATURE_NAMES = (*INPUT_NAMES, "masked_lm_positions", "masked_lm_ids",
                 "masked_lm_weights", "next_sentence_labels")
_RECORD_SPEC = {
    "text_a": tf.io.FixedLenFeature([], tf.string),
    "text_b": tf.io.FixedLenFeature([], tf.string),
    "next_sentence_label": tf.io.FixedLenFeature([], tf.int64),
}


def list_shards(file_pattern):
    """Sorted shard paths for a directory, a glob or a list of them."""
    patterns = [file_pattern] if isinstance(file_pattern, (str, os.PathLike)) \
        else list(file_pattern)
    files = []
    for pattern in patterns:
        pattern = str(pattern)
        if GPath(pattern).is_dir():
            pattern = str(GPath(pattern) / "*.tfrecord")
        files.extend(tf.io.gfile.glob(pattern))
    if not files:
        raise FileNotFoundError(
            f"No TFRecord shards match {file_pattern!r}; create them with "
            "`bert-tf pairs`.")
    return sorted(set(files))


def verify_shards(files, full=False):
    """Checks shards before training, naming the first bad file.

    Sizes are compared with the `manifest.json` written next to the shards
    (catches truncated or missing files at no cost); `full=True` also reads
    every record, checking the CRCs (catches corrupted bytes).
    """
    manifests = {}
    for path in map(GPath, files):
        manifest_path = path.parent / MANIFEST
        if manifest_path not in manifests:
            manifests[manifest_path] = (
                {s["file"]: s for s in json.loads(
                    manifest_path.read_text())["shards"]}
                if manifest_path.is_file() else {})
        expected = manifests[manifest_path].get(path.name)
        if expected and path.stat().st_size != expected["bytes"]:
            raise ValueError(
                f"TFRecord shard {path} has {path.stat().st_size} bytes but "
                f"{manifest_path} records {expected['bytes']}: the file is "
                "truncated or was modified; re-create it with `bert-tf "
                "pairs`.")
        if full:
            try:
                count = sum(1 for _ in tf.data.TFRecordDataset(str(path)))
            except tf.errors.DataLossError as e:
                raise ValueError(
                    f"TFRecord shard {path} is corrupt ({e.message}); "
                    "re-create it with `bert-tf pairs`.") from None
            if expected and count != expected["records"]:
                raise ValueError(
                    f"TFRecord shard {path} holds {count} records, "
                    f"{manifest_path} says {expected['records']}.")


def pretraining_dataset(file_pattern, vocab, batch_size, seq_length=128,
                        max_predictions_per_seq=20, masking_rate=0.15,
                        whole_word_masking=False, seed=None,
                        input_context=None, shuffle_buffer=10_000,
                        repeat=True, lower_case=None, verify="size",
                        num_parallel_calls=tf.data.AUTOTUNE, skip_batches=0):
    """Masked-LM + NSP batches from pair shards.

    Usable directly or from `strategy.distribute_datasets_from_function`
    (pass the `tf.distribute.InputContext`: files are sharded per input
    pipeline and `batch_size` is the global batch).

    Args:
        file_pattern: shard directory, glob, or list of them.
        vocab: a vocab.txt path or `Vocab`.
        batch_size: global batch size.
        seq_length: packed length (128 and 512 in the paper's schedule).
        max_predictions_per_seq: prediction slots per sequence.
        masking_rate: share of maskable tokens to predict.
        whole_word_masking: mask all pieces of a chosen word together.
        seed: int for a reproducible run (order and masks); None: random.
        input_context: a `tf.distribute.InputContext` or None.
        shuffle_buffer: examples in the shuffle buffer.
        repeat: loop forever (training) or stop after one pass.
        lower_case: tokenizer casing (None: from the vocab).
        verify: `size` (check against manifest.json), `full` (also read
            every record) or `none`.
        num_parallel_calls: parallelism of the batch transform.
        skip_batches: start after this many batches (a resumed run's
            position); skipped before tokenizing and masking, with the
            same draws, so the batches after are those of an unbroken
            pass.

    Returns:
        a `tf.data.Dataset` of dicts with `FEATURE_NAMES`, each
        [batch, seq_length] or [batch, max_predictions_per_seq] or [batch].

    Examples:
        >>> records, vocab_path = example_files.pairs()
        >>> dataset = pretraining_dataset(records, vocab_path, batch_size=4,
        ...                               seq_length=32, max_predictions_per_seq=5)
        >>> tuple(next(iter(dataset))["masked_lm_positions"].shape)
        (4, 5)
    """
    vocab = vocab if isinstance(vocab, Vocab) else read_vocab(vocab)
    if max_predictions_per_seq > seq_length:
        raise ValueError(
            f"max_predictions_per_seq = {max_predictions_per_seq} exceeds "
            f"seq_length = {seq_length}.")
    if not 0.0 < masking_rate < 1.0:
        raise ValueError(f"masking_rate = {masking_rate}: must be in (0, 1).")
    files = list_shards(file_pattern)
    if verify != "none":
        verify_shards(files, full=verify == "full")
    pipeline_id, num_pipelines = 0, 1
    if input_context is not None:
        pipeline_id = input_context.input_pipeline_id
        num_pipelines = input_context.num_input_pipelines
        batch_size = input_context.get_per_replica_batch_size(batch_size)
    dataset = _seeded_records(files, pipeline_id, num_pipelines, seed,
                              repeat, shuffle_buffer)
    dataset = dataset.batch(batch_size, drop_remainder=True)
    dataset = dataset.skip(skip_batches)
    transform = _masked_lm_batch(vocab, seq_length, max_predictions_per_seq,
                                 masking_rate, whole_word_masking,
                                 lower_case)
    dataset = dataset.map(transform, num_parallel_calls=num_parallel_calls,
                          deterministic=True)
    return dataset.prefetch(tf.data.AUTOTUNE)


def _seeded_records(files, pipeline_id, num_pipelines, seed, repeat,
                    shuffle_buffer):
    """(mask seed, serialized pair record) of this input pipeline's
    shards, shuffled: the stage before batching."""
    dataset = tf.data.Dataset.from_tensor_slices(files)
    if num_pipelines > 1:
        if len(files) < num_pipelines:
            raise ValueError(
                f"{len(files)} shard(s) for {num_pipelines} input pipelines: "
                "write at least one shard per pipeline (`bert-tf pairs "
                "--shards N`).")
        dataset = dataset.shard(num_pipelines, pipeline_id)
    dataset = dataset.shuffle(len(files), seed=seed,
                              reshuffle_each_iteration=True)
    if repeat:
        dataset = dataset.repeat()
    # Parallel reads pay off on remote storage; on local disks they cost
    # ~20% of throughput in per-record overhead.
    parallel = (dict(num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
                if any("://" in f for f in files) else {})
    dataset = dataset.interleave(tf.data.TFRecordDataset,
                                 cycle_length=min(len(files), 8), **parallel)
    # Every record gets its own random seed for its masks, drawn anew each
    # epoch; masks so do not depend on batching or replica splits.
    randoms = tf.data.Dataset.random(
        seed=None if seed is None else seed + 1_000_003 * pipeline_id,
        rerandomize_each_iteration=True)
    dataset = tf.data.Dataset.zip((randoms, dataset))
    return dataset.shuffle(shuffle_buffer, seed=seed,
                           reshuffle_each_iteration=True)


def _masked_lm_batch(vocab, seq_length, max_predictions_per_seq,
                     masking_rate, whole_word_masking, lower_case):
    """The batch transform: (row seeds, records) -> the pre-training
    features (tokenized, packed and masked in-graph)."""
    tokenizer = BertTokenizer(vocab, lower_case=lower_case)
    packer = BertPacker(seq_length, vocab.cls_id, vocab.sep_id, vocab.pad_id)
    table = continuation_table(vocab) if whole_word_masking else None
    # As the original: every piece but [CLS] and [SEP] may be predicted
    # ([PAD] is excluded by the input mask).
    special_ids = (vocab.cls_id, vocab.sep_id, vocab.pad_id)

    def transform(row_seeds, records):
        example = tf.io.parse_example(records, _RECORD_SPEC)
        packed = packer((tokenizer(example["text_a"]),
                         tokenizer(example["text_b"])))
        masked = mask_tokens(
            packed["input_word_ids"], packed["input_mask"], row_seeds,
            vocab_size=vocab.size, mask_id=vocab.mask_id,
            special_ids=special_ids,
            max_predictions=max_predictions_per_seq, rate=masking_rate,
            continuation_table=table)
        return {
            "input_word_ids": masked["input_word_ids"],
            "input_mask": packed["input_mask"],
            "input_type_ids": packed["input_type_ids"],
            "masked_lm_positions": masked["masked_lm_positions"],
            "masked_lm_ids": masked["masked_lm_ids"],
            "masked_lm_weights": masked["masked_lm_weights"],
            "next_sentence_labels": tf.cast(example["next_sentence_label"],
                                            tf.int32),
        }

    return transform
