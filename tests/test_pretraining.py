"""The in-graph masking pipeline, measured on the real sample corpus."""

import json

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data import masking
from bert_tf.data.pretraining import (FEATURE_NAMES, pretraining_dataset,
                                      verify_shards)
from bert_tf.text.preprocessor import BertPreprocessor


@pytest.fixture(scope="module")
def packed_corpus(sample_documents, bert_vocab):
    """Real sentences packed as pairs: >= 100k maskable tokens."""
    sentences = [s for doc in sample_documents for s in doc]
    pre = BertPreprocessor(bert_vocab, seq_length=128)
    a, b = sentences[0:9000:2], sentences[1:9000:2]
    return pre((tf.constant(a), tf.constant(b)))


def _mask(packed, vocab, seed=1, whole_word=False):
    return masking.mask_tokens(
        packed["input_word_ids"], packed["input_mask"],
        tf.range(len(packed["input_word_ids"]), dtype=tf.int64) * 7919 + seed,
        vocab_size=vocab.size, mask_id=vocab.mask_id,
        special_ids=(vocab.cls_id, vocab.sep_id, vocab.pad_id),
        max_predictions=20, rate=0.15,
        continuation_table=(masking.continuation_table(vocab)
                            if whole_word else None))


def test_masking_rates_on_real_tokens(packed_corpus, bert_vocab):
    vocab = bert_vocab
    ids = packed_corpus["input_word_ids"].numpy()
    mask = packed_corpus["input_mask"].numpy()
    out = {k: v.numpy() for k, v in _mask(packed_corpus, vocab).items()}
    valid = out["masked_lm_weights"] > 0
    positions = out["masked_lm_positions"]
    maskable = (mask == 1) & ~np.isin(ids, [vocab.cls_id, vocab.sep_id])
    assert maskable.sum() >= 100_000
    # 15% of the maskable positions per row, capped at 20 predictions.
    expected = np.minimum(20, np.maximum(1, np.round(
        0.15 * maskable.sum(1)))).astype(int)
    np.testing.assert_array_equal(valid.sum(1), expected)
    share = valid.sum() / maskable.sum()
    uncapped = expected < 20
    uncapped_share = valid[uncapped].sum() / maskable[uncapped].sum()
    assert abs(uncapped_share - 0.15) <= 0.005, uncapped_share
    assert share <= 0.155
    chosen = np.take_along_axis(ids, positions, 1)[valid]
    assert not np.isin(chosen, [vocab.cls_id, vocab.sep_id,
                                vocab.pad_id]).any()
    assert (np.take_along_axis(mask, positions, 1)[valid] == 1).all()
    # masked_lm_ids hold the original tokens.
    np.testing.assert_array_equal(out["masked_lm_ids"][valid], chosen)
    corrupted = np.take_along_axis(out["input_word_ids"], positions, 1)[
        valid]
    masked = (corrupted == vocab.mask_id).mean()
    unchanged = (corrupted == chosen).mean()
    randomized = 1 - masked - unchanged
    assert abs(masked - 0.8) <= 0.015, masked
    assert abs(randomized - 0.1) <= 0.015, randomized
    assert abs(unchanged - 0.1) <= 0.015, unchanged
    # Nothing else changed.
    untouched = np.ones_like(ids, bool)
    np.put_along_axis(untouched, np.where(valid, positions, 0), False, 1)
    untouched[:, 0] = True
    assert (out["input_word_ids"][untouched] == ids[untouched]).all()
    # Padding slots are zero.
    assert (positions[~valid] == 0).all()
    assert (out["masked_lm_ids"][~valid] == 0).all()


def test_whole_word_masking_never_splits_a_word(packed_corpus, bert_vocab):
    ids = packed_corpus["input_word_ids"].numpy()
    out = {k: v.numpy() for k, v in _mask(packed_corpus, bert_vocab,
                                         whole_word=True).items()}
    is_piece = np.array([t.startswith("##") for t in bert_vocab.tokens])[ids]
    selected = np.zeros_like(ids, bool)
    valid = out["masked_lm_weights"] > 0
    rows = np.nonzero(valid)[0]
    selected[rows, out["masked_lm_positions"][valid]] = True
    # A selected piece's neighbours in the same word are selected too.
    assert not (selected[:, 1:] & is_piece[:, 1:] & ~selected[:, :-1]).any()
    assert not (selected[:, :-1] & is_piece[:, 1:] & ~selected[:, 1:]).any()
    assert (selected & is_piece).sum() > 100  # multi-piece words were hit
    assert 0.12 < valid.sum() / (packed_corpus["input_mask"].numpy().sum() -
                                 3 * len(ids)) <= 0.15


def test_masks_depend_only_on_the_seed(packed_corpus, bert_vocab):
    a = _mask(packed_corpus, bert_vocab, seed=3)
    b = _mask(packed_corpus, bert_vocab, seed=3)
    c = _mask(packed_corpus, bert_vocab, seed=5)
    np.testing.assert_array_equal(a["masked_lm_positions"],
                                  b["masked_lm_positions"])
    assert (a["masked_lm_positions"].numpy() !=
            c["masked_lm_positions"].numpy()).any()


def _take(dataset, n):
    return [{k: v.numpy() for k, v in batch.items()}
            for batch in dataset.take(n)]


@pytest.mark.slow
def test_pipeline_features_and_layout(sample_pairs, bert_vocab):
    directory, _ = sample_pairs
    batch = _take(pretraining_dataset(directory, bert_vocab, batch_size=32,
                                      seed=0), 1)[0]
    assert tuple(batch) == FEATURE_NAMES
    assert batch["input_word_ids"].shape == (32, 128)
    assert batch["masked_lm_positions"].shape == (32, 20)
    assert batch["next_sentence_labels"].shape == (32,)
    for row in range(32):
        mask, types = batch["input_mask"][row], batch["input_type_ids"][row]
        n = mask.sum()
        assert (mask[:n] == 1).all() and (mask[n:] == 0).all()
        # Segment ids are exactly 0...0 1...1 then 0 padding.
        ones = np.nonzero(types)[0]
        assert len(ones) and (ones == np.arange(ones[0], n)).all()
        original = batch["input_word_ids"][row].copy()
        valid = batch["masked_lm_weights"][row] > 0
        original[batch["masked_lm_positions"][row][valid]] = \
            batch["masked_lm_ids"][row][valid]
        assert original[0] == bert_vocab.cls_id
        assert original[n - 1] == bert_vocab.sep_id
        assert original[ones[0] - 1] == bert_vocab.sep_id


@pytest.mark.slow
def test_pipeline_nsp_share_and_rates(sample_pairs, bert_vocab):
    directory, _ = sample_pairs
    batches = _take(pretraining_dataset(directory, bert_vocab,
                                        batch_size=128, seed=1,
                                        repeat=False), 40)
    labels = np.concatenate([b["next_sentence_labels"] for b in batches])
    assert len(labels) >= 5000
    assert abs(labels.mean() - 0.5) <= 0.02, labels.mean()
    weights = np.concatenate([b["masked_lm_weights"] for b in batches])
    maskable = sum(b["input_mask"].sum() - 3 * len(b["input_mask"])
                   for b in batches)
    assert abs(weights.sum() / maskable - 0.15) <= 0.006


@pytest.mark.slow
def test_epochs_differ_and_seeds_reproduce(sample_pairs, bert_vocab):
    directory, _ = sample_pairs
    make = lambda seed: pretraining_dataset(  # noqa: E731
        directory, bert_vocab, batch_size=16, seed=seed, repeat=False,
        shuffle_buffer=100)
    dataset = make(7)
    first = _take(dataset, 3)
    second = _take(dataset, 3)  # a second epoch over the same dataset
    again = _take(make(7), 3)  # a second run with the same seed
    for a, b in zip(first, again):
        for key in FEATURE_NAMES:
            np.testing.assert_array_equal(a[key], b[key])
    assert any((a["masked_lm_positions"] != b["masked_lm_positions"]).any()
               for a, b in zip(first, second))
    other = _take(make(8), 1)[0]
    assert (other["input_word_ids"] != first[0]["input_word_ids"]).any()


@pytest.mark.slow
def test_whole_word_and_seq_512_options(sample_pairs, bert_vocab):
    directory, _ = sample_pairs
    batch = _take(pretraining_dataset(
        directory, bert_vocab, batch_size=8, seq_length=512,
        max_predictions_per_seq=76, whole_word_masking=True, seed=0), 1)[0]
    assert batch["input_word_ids"].shape == (8, 512)
    assert batch["masked_lm_positions"].shape == (8, 76)


@pytest.mark.slow
def test_input_context_shards_files_and_splits_the_batch(sample_pairs,
                                                         bert_vocab):
    directory, _ = sample_pairs
    contexts = [tf.distribute.InputContext(2, i, 2) for i in range(2)]
    batches = [_take(pretraining_dataset(directory, bert_vocab,
                                         batch_size=16, seed=0,
                                         input_context=c), 1)[0]
               for c in contexts]
    assert batches[0]["input_word_ids"].shape == (8, 128)
    assert (batches[0]["input_word_ids"] !=
            batches[1]["input_word_ids"]).any()
    strategy = tf.distribute.get_strategy()
    distributed = strategy.distribute_datasets_from_function(
        lambda ctx: pretraining_dataset(directory, bert_vocab,
                                        batch_size=16, seed=0,
                                        input_context=ctx))
    assert next(iter(distributed))["input_word_ids"].shape == (16, 128)


@pytest.mark.slow
def test_fit_on_the_pipeline(sample_pairs, bert_vocab):
    import keras

    from bert_tf.models.encoder import BertEncoder
    from bert_tf.models.pretrainer import BertPretrainer
    directory, _ = sample_pairs
    model = BertPretrainer(BertEncoder(vocab_size=bert_vocab.size,
                                       hidden_size=32, num_layers=1,
                                       num_heads=2, intermediate_size=64))
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    history = model.fit(pretraining_dataset(directory, bert_vocab,
                                            batch_size=16, seed=0),
                        steps_per_epoch=3, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"]).all()


# --- bad input ----------------------------------------------------------------

def _copy(directory, tmp_path):
    import shutil
    target = tmp_path / "copy"
    shutil.copytree(directory, target)
    return target


def test_truncated_shard_names_the_file(sample_pairs, bert_vocab, tmp_path):
    directory = _copy(sample_pairs[0], tmp_path)
    shard = sorted(directory.glob("pairs-*"))[1]
    shard.write_bytes(shard.read_bytes()[:-100])
    with pytest.raises(ValueError, match=f"{shard.name} has .* bytes but"):
        pretraining_dataset(directory, bert_vocab, batch_size=8)


def test_corrupt_shard_names_the_file(sample_pairs, bert_vocab, tmp_path):
    directory = _copy(sample_pairs[0], tmp_path)
    shard = sorted(directory.glob("pairs-*"))[2]
    data = bytearray(shard.read_bytes())
    data[5000:5010] = b"\xff" * 10
    shard.write_bytes(bytes(data))
    verify_shards([directory / p.name for p in
                   sorted(directory.glob("pairs-*"))])  # sizes still agree
    with pytest.raises(ValueError, match=f"{shard.name} is corrupt"):
        pretraining_dataset(directory, bert_vocab, batch_size=8,
                            verify="full")


def test_bad_arguments_and_files(sample_pairs, bert_vocab, tmp_path):
    directory = sample_pairs[0]
    with pytest.raises(FileNotFoundError, match="No TFRecord shards"):
        pretraining_dataset(tmp_path / "none", bert_vocab, batch_size=8)
    with pytest.raises(ValueError, match="max_predictions_per_seq = 200"):
        pretraining_dataset(directory, bert_vocab, batch_size=8,
                            max_predictions_per_seq=200)
    with pytest.raises(ValueError, match="4 shard.*for 8 input pipelines"):
        pretraining_dataset(directory, bert_vocab, batch_size=8,
                            input_context=tf.distribute.InputContext(8, 0,
                                                                     1))
    no_mask = tmp_path / "vocab.txt"
    no_mask.write_text("\n".join(t for t in bert_vocab.tokens
                                 if t != "[MASK]") + "\n")
    with pytest.raises(ValueError, match=r"lacks the special token\(s\) "
                                         r"\[MASK\]"):
        pretraining_dataset(directory, no_mask, batch_size=8)


@pytest.mark.slow
def test_long_sentence_documents_are_truncated_to_the_sequence(bert_vocab,
                                                               tmp_path):
    from bert_tf.data import pairs
    from bert_tf.text.tokenizer import BertTokenizer
    docs = [[" ".join(["antidisestablishmentarianism"] * 300)],
            ["Short one.", "Another short one."]]
    pairs.write_pairs(docs, BertTokenizer(bert_vocab), tmp_path,
                      seq_length=64, dupe_factor=5, seed=0,
                      log=lambda *a: None)
    batch = _take(pretraining_dataset(tmp_path, bert_vocab, batch_size=4,
                                      seq_length=64, seed=0), 1)[0]
    assert batch["input_word_ids"].shape == (4, 64)
    assert (batch["input_mask"].sum(1) <= 64).all()
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["stats"]["pairs"] > 0
