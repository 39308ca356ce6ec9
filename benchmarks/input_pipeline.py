"""Masked-LM input pipelines, examples per second, measured in one run.

Every pipeline reads the same sentence-pair shards (real sample corpus:
the Wikipedia sample + Lee news) and produces padded, masked [batch, seq]
examples ready for a model:

  bert_tf         TFRecords -> tf.data: tokenize, trim, pack, mask (ours)
  keras_hub       same tf.data shape with keras-hub's WordPieceTokenizer,
                  MultiSegmentPacker and MaskedLMMaskGenerator
  hf_collator     HF fast BertTokenizer on each batch of text pairs +
                  DataCollatorForLanguageModeling (PyTorch tensors)
  tf_text_plain   floor: FastBertTokenizer + combine_segments + pad, no
                  masking at all

The peers live in a separate environment so the project's pins stay
clean:

    make bench            # creates .venv-bench (keras-hub, torch,
                          # transformers) and runs this script

or by hand: python -m venv .venv-bench && .venv-bench/bin/pip install
-e . keras-hub torch==2.13.0 transformers && .venv-bench/bin/python
benchmarks/input_pipeline.py
"""

import argparse
import os
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402
import tensorflow_text as tf_text  # noqa: E402

from bert_tf.data import documents, pairs, pretraining, samples  # noqa: E402
from bert_tf.text.tokenizer import BertTokenizer  # noqa: E402
from bert_tf.text.vocab import read_vocab  # noqa: E402

SPEC = pretraining._RECORD_SPEC


def _records(files, batch_size):
    return (tf.data.TFRecordDataset(files).repeat()
            .shuffle(10_000, seed=0).batch(batch_size, drop_remainder=True))


def ours(files, vocab, seq, batch_size, predictions):
    return pretraining.pretraining_dataset(
        files, vocab, batch_size, seq_length=seq,
        max_predictions_per_seq=predictions, seed=0)


def keras_hub_pipeline(files, vocab, seq, batch_size, predictions):
    import keras_hub

    tokenizer = keras_hub.tokenizers.WordPieceTokenizer(
        vocabulary=list(vocab.tokens), lowercase=True, strip_accents=True)
    packer = keras_hub.layers.MultiSegmentPacker(
        sequence_length=seq, start_value=vocab.cls_id,
        end_value=vocab.sep_id, pad_value=vocab.pad_id)
    masker = keras_hub.layers.MaskedLMMaskGenerator(
        vocabulary_size=vocab.size, mask_selection_rate=0.15,
        mask_token_id=vocab.mask_id, mask_selection_length=predictions,
        unselectable_token_ids=[vocab.cls_id, vocab.sep_id, vocab.pad_id])

    def transform(records):
        example = tf.io.parse_example(records, SPEC)
        ids, segments = packer((tokenizer(example["text_a"]),
                                tokenizer(example["text_b"])))
        masked = masker(ids)
        return {"input_word_ids": masked["token_ids"],
                "input_mask": tf.cast(ids != vocab.pad_id, tf.int32),
                "input_type_ids": segments,
                "masked_lm_positions": masked["mask_positions"],
                "masked_lm_ids": masked["mask_ids"],
                "masked_lm_weights": masked["mask_weights"],
                "next_sentence_labels": example["next_sentence_label"]}

    return _records(files, batch_size).map(
        transform, num_parallel_calls=tf.data.AUTOTUNE).prefetch(
            tf.data.AUTOTUNE)


def tf_text_plain(files, vocab, seq, batch_size, predictions):
    tokenizer = tf_text.FastBertTokenizer(
        vocab=list(vocab.tokens), token_out_type=tf.int32,
        lower_case_nfd_strip_accents=True)
    trimmer = tf_text.RoundRobinTrimmer(seq - 3)

    def transform(records):
        example = tf.io.parse_example(records, SPEC)
        segments = trimmer.trim([tokenizer.tokenize(example["text_a"]),
                                 tokenizer.tokenize(example["text_b"])])
        ids, types = tf_text.combine_segments(segments, vocab.cls_id,
                                              vocab.sep_id)
        ids, mask = tf_text.pad_model_inputs(ids, seq)
        types, _ = tf_text.pad_model_inputs(types, seq)
        return {"input_word_ids": ids, "input_mask": mask,
                "input_type_ids": types}

    return _records(files, batch_size).map(
        transform, num_parallel_calls=tf.data.AUTOTUNE).prefetch(
            tf.data.AUTOTUNE)


def hf_collator(files, vocab, seq, batch_size, predictions):
    from transformers import BertTokenizerFast, DataCollatorForLanguageModeling

    tokenizer = BertTokenizerFast(vocab.path, do_lower_case=True)
    collator = DataCollatorForLanguageModeling(tokenizer,
                                               mlm_probability=0.15)
    texts = _records(files, batch_size).map(
        lambda r: tf.io.parse_example(r, SPEC))

    def batches():
        for example in texts.as_numpy_iterator():
            encoded = tokenizer(
                [t.decode() for t in example["text_a"]],
                [t.decode() for t in example["text_b"]], truncation=True,
                max_length=seq, padding="max_length")
            features = [{k: encoded[k][i] for k in encoded}
                        for i in range(len(example["text_a"]))]
            yield collator(features)

    return batches()


PIPELINES = {"bert_tf": ours, "keras_hub": keras_hub_pipeline,
             "hf_collator": hf_collator, "tf_text_plain": tf_text_plain}


def real_pairs(out, seq_length=128, vocab=None):
    """Writes sentence pairs of the real sample corpus (Wikipedia sample +
    Lee, dupe 2) to `out` with the MiniLM vocab; returns `PairStats`."""
    vocab = vocab or read_vocab(samples.fetch("minilm") / "vocab.txt")
    docs, _ = documents.load_documents(["sample:wikipedia", "sample:lee"])
    return pairs.write_pairs(docs, BertTokenizer(vocab), out,
                             seq_length=seq_length, dupe_factor=2, seed=1,
                             num_shards=4, log=lambda *a: None)


def measure(dataset, batch_size, batches, warmup=5):
    iterator = iter(dataset)
    for _ in range(warmup):
        next(iterator)
    start = time.perf_counter()
    for _ in range(batches):
        next(iterator)
    return batches * batch_size / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--batches", type=int, default=150)
    parser.add_argument("--seq", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--only", nargs="*", default=list(PIPELINES))
    args = parser.parse_args()

    vocab = read_vocab(samples.fetch("minilm") / "vocab.txt")
    docs, _ = documents.load_documents(["sample:wikipedia", "sample:lee"])
    tokenizer = BertTokenizer(vocab)
    print(f"{tf.config.threading.get_inter_op_parallelism_threads() or os.cpu_count()}"
          f" CPU threads; batch {args.batch_size}; real sample corpus")
    with tempfile.TemporaryDirectory() as tmp:
        for seq in args.seq:
            out = os.path.join(tmp, f"pairs{seq}")
            pairs.write_pairs(docs, tokenizer, out, seq_length=seq,
                              dupe_factor=2, seed=0, log=lambda *a: None)
            files = pretraining.list_shards(out)
            predictions = max(20, round(seq * 0.15))
            results = {}
            for name in args.only:
                try:
                    dataset = PIPELINES[name](files, vocab, seq,
                                              args.batch_size, predictions)
                except ImportError as e:
                    print(f"  {name}: skipped ({e}; run it in .venv-bench)")
                    continue
                results[name] = measure(dataset, args.batch_size,
                                        args.batches)
            peers = {k: v for k, v in results.items()
                     if k not in ("bert_tf", "tf_text_plain")}
            print(f"\nseq {seq} (max {predictions} predictions):")
            for name, rate in results.items():
                print(f"  {name:<14} {rate:9,.0f} examples/s")
            if peers and "bert_tf" in results:
                best = max(peers, key=peers.get)
                print(f"  bert_tf / fastest peer ({best}): "
                      f"{results['bert_tf'] / peers[best]:.2f}x")


if __name__ == "__main__":
    main()
