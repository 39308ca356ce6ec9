"""Masked-LM example creation, in-graph, on packed [batch, seq] ids.

Dense ops and counter-based random numbers only: an example's masks depend
on its own seed alone (not on the batch it lands in or on how a batch is
split across replicas), so a seeded pipeline is reproducible even with
parallel `map`, and the pipeline draws new seeds every epoch (dynamic
masking).
"""

import tensorflow as tf

_MASK32 = 0xFFFFFFFF


def _hash32(x):
    """A 32-bit integer mixer on int64 values in [0, 2^32).

    The multiplier is < 2^31, so every product fits in int64 exactly.
    """
    for _ in range(2):
        x = tf.bitwise.bitwise_and(
            tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, 16)) *
            0x45D9F3B, _MASK32)
    return tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, 16))


def row_uniform(row_seeds, width, stream):
    """[batch, width] floats in [0, 1), a function of each row's seed only.

    Args:
        row_seeds: int64 [batch], one seed per example.
        width: columns to draw.
        stream: a small int that separates independent draws.
    """
    seeds = tf.cast(row_seeds, tf.int64)
    mixed = tf.bitwise.bitwise_xor(
        _hash32(tf.bitwise.bitwise_and(seeds, _MASK32)),
        _hash32(tf.bitwise.bitwise_and(tf.bitwise.right_shift(seeds, 32),
                                       _MASK32)))
    counter = tf.range(width, dtype=tf.int64) + (stream << 16)
    bits = _hash32(tf.bitwise.bitwise_and(
        mixed[:, None] + counter[None] * 0x9E3779B1, _MASK32))
    return tf.cast(tf.bitwise.right_shift(bits, 8), tf.float32) / float(
        1 << 24)


def mask_tokens(word_ids, input_mask, row_seeds, *, vocab_size, mask_id,
                special_ids, max_predictions, rate=0.15,
                continuation_table=None):
    """Chooses and corrupts masked-LM positions.

    Selects `min(max_predictions, max(1, round(rate * n)))` of the n
    maskable positions of each row (never special tokens or padding), then
    replaces 80% of them with `[MASK]`, 10% with a random token and leaves
    10% unchanged, as the original BERT.

    Args:
        word_ids: int32 [batch, seq] packed ids.
        input_mask: int [batch, seq], 1 for real tokens.
        row_seeds: int64 [batch], one random seed per example.
        vocab_size: random replacements are drawn from [0, vocab_size).
        mask_id: id of `[MASK]`.
        special_ids: ids never selected (`[CLS]`, `[SEP]`, `[PAD]`, ...).
        max_predictions: P, the fixed number of prediction slots per row.
        rate: share of maskable positions to select.
        continuation_table: bool [vocab] (True for `##` pieces) to select
            whole words; None selects single pieces.

    Returns:
        dict with `input_word_ids` (corrupted), `masked_lm_positions`,
        `masked_lm_ids` (originals), `masked_lm_weights` (1.0 for used
        slots), each [batch, P] except the first.

    Examples:
        >>> ids = tf.constant([[2, 10, 11, 12, 13, 14, 3, 0]])
        >>> out = mask_tokens(ids, tf.cast(ids > 0, tf.int32), [12345],
        ...                   vocab_size=20, mask_id=4, special_ids=[0, 2, 3],
        ...                   max_predictions=3, rate=0.4)
        >>> int(tf.reduce_sum(out["masked_lm_weights"]))
        2
    """
    word_ids = tf.convert_to_tensor(word_ids, tf.int32)
    batch, length = tf.shape(word_ids)[0], tf.shape(word_ids)[1]
    candidate = tf.cast(input_mask, tf.bool)
    for special in special_ids:
        candidate = tf.logical_and(candidate, word_ids != special)
    num_candidates = tf.reduce_sum(tf.cast(candidate, tf.int32), 1)
    num_to_predict = tf.minimum(max_predictions, tf.maximum(1, tf.cast(
        tf.round(rate * tf.cast(num_candidates, tf.float32)), tf.int32)))
    num_to_predict = tf.where(num_candidates > 0, num_to_predict, 0)

    scores = row_uniform(row_seeds, length, stream=0)
    if continuation_table is None:
        # The lowest-scoring candidates win (non-candidates score 2.0).
        _, chosen = tf.math.top_k(-tf.where(candidate, scores, 2.0),
                                  k=max_predictions)
        chosen_valid = tf.range(max_predictions)[None] < \
            num_to_predict[:, None]
        positions_key = tf.where(chosen_valid, chosen, length + chosen)
    else:
        positions_key = _whole_word_choice(
            word_ids, candidate, scores, num_to_predict, continuation_table)
    # Selected positions in ascending order, padded to P slots.
    positions = tf.sort(positions_key, axis=1)[:, :max_predictions]
    valid = positions < length
    positions = tf.where(valid, positions, 0)
    originals = tf.gather(word_ids, positions, batch_dims=1)

    choice = row_uniform(row_seeds, max_predictions, stream=1)
    random_tokens = tf.cast(
        row_uniform(row_seeds, max_predictions, stream=2) * vocab_size,
        tf.int32)
    replacement = tf.where(choice < 0.8, mask_id,
                           tf.where(choice < 0.9, random_tokens, originals))
    # Unused slots point at position 0 and write back its own value.
    replacement = tf.where(valid, replacement, originals)
    rows = tf.repeat(tf.range(batch), max_predictions)
    corrupted = tf.tensor_scatter_nd_update(
        word_ids, tf.stack([rows, tf.reshape(positions, [-1])], axis=1),
        tf.reshape(replacement, [-1]))
    return {
        "input_word_ids": corrupted,
        "masked_lm_positions": positions,
        "masked_lm_ids": tf.where(valid, originals, 0),
        "masked_lm_weights": tf.cast(valid, tf.float32),
    }


def _whole_word_choice(word_ids, candidate, scores, num_to_predict, table):
    """Sort keys that put whole chosen words first (see `mask_tokens`)."""
    batch, length = tf.shape(word_ids)[0], tf.shape(word_ids)[1]
    # A word = a piece plus its following `##` pieces; it shares the score
    # of its first piece so that its pieces are ranked together.
    continues = tf.logical_and(tf.gather(table, word_ids), candidate)
    word_index = tf.cumsum(tf.cast(tf.logical_not(continues), tf.int32),
                           axis=1) - 1
    flat_word = word_index + length * tf.range(batch)[:, None]
    first_scores = tf.where(continues, -1.0, scores)
    token_scores = tf.gather(tf.math.unsorted_segment_max(
        first_scores, flat_word, batch * length), flat_word)
    token_scores = tf.where(candidate, token_scores, 2.0)
    # Rank by score (ties keep position order, so a word's pieces are
    # adjacent), count tokens cumulatively, keep a word only when all of it
    # fits within num_to_predict.
    order = tf.argsort(token_scores, axis=1, stable=True)
    taken = tf.cumsum(tf.gather(tf.cast(candidate, tf.int32), order,
                                batch_dims=1), axis=1)
    count = tf.scatter_nd(
        tf.stack([tf.repeat(tf.range(batch), length),
                  tf.reshape(order, [-1])], axis=1),
        tf.reshape(taken, [-1]), [batch, length])
    count = tf.gather(tf.math.unsorted_segment_max(
        count, flat_word, batch * length), flat_word)
    selected = tf.logical_and(candidate, count <= num_to_predict[:, None])
    return tf.where(selected, tf.range(length)[None],
                    length + tf.range(length)[None])


def continuation_table(vocab):
    """bool [vocab_size]: True for word-continuation pieces (`##...`)."""
    return tf.constant([t.startswith("##") for t in vocab.tokens])
