"""Start/end logits of QA windows -> answers, in-graph (TF ops only).

The one post-processing of span QA: evaluation and the exported
`serving_default` both call `decode_answers`. The rules are the original
`run_squad.py`'s:

- in each window, the `n_best_size` highest start and end logits are
  paired; a pair is a candidate when both ends are context pieces, the end
  does not come before the start, the span has at most
  `max_answer_length` pieces and the start piece is max-context in this
  window (so a span is scored in one window only);
- a span's score is its start logit plus its end logit, compared across
  all windows of the example;
- candidates with the same answer text are kept once (the best);
- the null score is the lowest `[CLS]` start + end logit over the
  windows; a SQuAD 2.0 model answers "" when null score - best span score
  > `null_threshold` (tuned on dev, stored with the model).

One change from `run_squad.py`: padding positions are left out before the
top-n, so an answer never depends on how long the other rows of the batch
are. The answer text is the exact slice of the caller's context bytes.
"""

import tensorflow as tf

from bert_tf.text.dense import byte_slices, rows_by_example

_NEG = -1e30


def _per_example(values, example_index, num_examples, fill):
    """{name: [W, ...]} window rows -> {name: [B, C + 1]} rows per example
    (window-major; one extra `fill[name]` column, so even an empty request
    has a column), all placed by one scatter (floats by their bits)."""
    names = sorted(values)
    flat = [tf.reshape(values[n], [tf.shape(values[n])[0], -1])
            for n in names]
    bits = tf.stack([tf.bitcast(v, tf.int32) if v.dtype == tf.float32
                     else tf.cast(v, tf.int32) for v in flat], -1)
    fills = tf.stack([tf.bitcast(tf.constant(fill[n], v.dtype), tf.int32)
                      if v.dtype == tf.float32 else tf.constant(fill[n])
                      for n, v in zip(names, flat)])
    rows = rows_by_example(bits, example_index, num_examples, fills)
    shape = tf.shape(rows)
    merged = tf.reshape(rows, [num_examples, shape[1] * shape[2], -1])
    merged = tf.concat([merged, tf.broadcast_to(
        fills, [num_examples, 1, len(names)])], 1)
    return {n: tf.bitcast(merged[..., i], tf.float32)
            if flat[i].dtype == tf.float32 else merged[..., i]
            for i, n in enumerate(names)}


def decode_answers(features, start_logits, end_logits, context,
                   n_best_size=20, max_answer_length=30, null_threshold=0.0,
                   version_2=False):
    """The best answers of each example from its windows' logits.

    Args:
        features: a `QAPreprocessor` output (its offsets, `input_mask`,
            `token_is_max_context` and `example_index`).
        start_logits, end_logits: float [W, L].
        context: tf.string [B], the contexts the windows came from.
        n_best_size: candidates per window side, and answers returned.
        max_answer_length: longest answer, in word pieces.
        null_threshold: SQuAD 2.0: answer "" when null - best > this.
        version_2: the model may answer "no answer".

    Returns:
        dict: `answer` (string [B]), `score` (float32 [B], the best span's
        start + end logit), `start`, `end` (int32 [B], code points into
        `context`, end exclusive; -1 without an answer), `has_answer` (bool
        [B]), `null_score` (float32 [B]), and the top `n_best_size`
        distinct answers, best first, padded: `top_answers` (string
        [B, K]), `top_scores`, `top_starts`, `top_ends`, with `count`
        (int32 [B]) real ones per row.
    """
    num_examples = tf.shape(context)[0]
    start_logits = tf.cast(start_logits, tf.float32)
    end_logits = tf.cast(end_logits, tf.float32)
    score, offsets = _span_candidates(features, start_logits, end_logits,
                                      n_best_size, max_answer_length,
                                      num_examples)
    top = _distinct_answers(score, offsets, context, n_best_size)
    null = tf.math.unsorted_segment_min(
        start_logits[:, 0] + end_logits[:, 0], features["example_index"],
        num_examples)
    found = top["count"] > 0
    has_answer = found
    if version_2:
        has_answer = found & (null - top["best"] <= null_threshold)
    # The texts last, by their offsets (TFLite builtins have no string
    # `where` or slice).
    answered = has_answer[:, None]
    answer = byte_slices(context,
                         tf.where(answered, top["byte_start"][:, :1], 0),
                         tf.where(answered, top["byte_end"][:, :1], 0))
    return {
        "answer": tf.reshape(answer, [-1]),
        "score": tf.where(found, top["best"], 0.0),
        "start": tf.where(has_answer, top["start"][:, 0], -1),
        "end": tf.where(has_answer, top["end"][:, 0], -1),
        "has_answer": has_answer,
        "null_score": null,
        "top_answers": byte_slices(context, top["byte_start"],
                                   top["byte_end"]),
        "top_scores": top["scores"],
        "top_starts": top["start"],
        "top_ends": top["end"],
        "count": top["count"],
    }


def _span_candidates(features, start_logits, end_logits, n_best_size,
                     max_answer_length, num_examples):
    """(score [B, C], offsets) of every candidate span of each example:
    the top `n_best_size` starts times ends of each of its windows (an
    invalid span scores `_NEG`), with their char and byte offsets
    (`char_start`, `char_end`, `byte_start`, `byte_end`, each [B, C])."""
    real = features["input_mask"] > 0
    k = tf.minimum(n_best_size, tf.shape(start_logits)[1])
    start_value, start_index = tf.math.top_k(
        tf.where(real, start_logits, _NEG), k)
    end_value, end_index = tf.math.top_k(tf.where(real, end_logits, _NEG), k)

    def at(name, index):
        return tf.gather(features[name], index, batch_dims=1)

    in_context_start = at("token_char_start", start_index) >= 0
    in_context_end = at("token_char_start", end_index) >= 0
    max_context = at("token_is_max_context", start_index)
    span = tf.expand_dims(end_index, 1) - tf.expand_dims(start_index, 2)
    valid = tf.expand_dims(in_context_start & max_context, 2) & \
        tf.expand_dims(in_context_end, 1) & (span >= 0) & \
        (span < max_answer_length)
    score = tf.expand_dims(start_value, 2) + tf.expand_dims(end_value, 1)

    def grid(name, index, axis):
        return tf.broadcast_to(tf.expand_dims(at(name, index), axis),
                               tf.shape(span))

    grids, fill = {"score": tf.where(valid, score, _NEG)}, {"score": _NEG}
    for unit in ("char", "byte"):
        for side, index, axis in (("start", start_index, 2),
                                  ("end", end_index, 1)):
            name = f"{unit}_{side}"
            grids[name] = grid(f"token_{name}", index, axis)
            fill[name] = -1 if unit == "char" else 0
    rows = _per_example(grids, features["example_index"], num_examples,
                        fill)
    return rows.pop("score"), rows


def _distinct_answers(score, offsets, context, n_best_size):
    """The best `n_best_size` candidates of distinct texts per example,
    padded to `n_best_size` columns: `scores`, `start`, `end` (code
    points; -1 padding), `byte_start`, `byte_end`, `count` real ones and
    `best` (the first one's score)."""
    # The best few candidates per example, then distinct texts among them
    # (4x the answers returned is ample: duplicates need the same text at
    # another place in the context).
    pool = tf.minimum(4 * n_best_size, tf.shape(score)[1])
    top_score, top = tf.math.top_k(score, pool)
    offsets = {name: tf.gather(values, top, batch_dims=1)
               for name, values in offsets.items()}
    candidate = top_score > _NEG / 2
    # Only candidates have real offsets (the rest point outside context).
    byte_start = tf.where(candidate, offsets["byte_start"], 0)
    byte_end = tf.where(candidate, tf.maximum(offsets["byte_end"],
                                              byte_start), 0)
    text = byte_slices(context, byte_start, byte_end)
    same = tf.equal(tf.expand_dims(text, 2), tf.expand_dims(text, 1))
    order = tf.range(pool)
    earlier = order[None, :] < order[:, None]
    repeated = tf.reduce_any(
        same & earlier[None] & tf.expand_dims(candidate, 1), axis=2)
    keep = candidate & ~repeated
    answers = tf.minimum(n_best_size, pool)
    kept_score, order = tf.math.top_k(tf.where(keep, top_score, _NEG),
                                      answers)
    kept = kept_score > _NEG / 2

    def picked(values, fill):  # always K = n_best_size columns
        values = tf.where(kept, tf.gather(values, order, batch_dims=1), fill)
        return tf.pad(values, [[0, 0], [0, n_best_size - answers]],
                      constant_values=fill)

    return {"byte_start": picked(byte_start, 0),
            "byte_end": picked(byte_end, 0),
            "start": picked(offsets["char_start"], -1),
            "end": picked(offsets["char_end"], -1),
            "scores": tf.pad(tf.where(kept, kept_score, 0.0),
                             [[0, 0], [0, n_best_size - answers]]),
            "count": tf.reduce_sum(tf.cast(kept, tf.int32), axis=1),
            "best": kept_score[:, 0]}
