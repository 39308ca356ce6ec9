"""Per-piece tag logits -> entities with offsets, in-graph (TF ops only).

The one post-processing of token tagging: evaluation and the exported
`serving_default` both call `decode_entities`. Each word takes the tag of
its first piece in the window where that piece is max-context; BIO tags
become entities as seqeval's default mode reads them: B-X always opens an
entity, I-X continues one of type X and otherwise opens one, O closes. So
two adjacent B-PER B-PER are two entities (tf-text's
`boise_tags_to_offsets` would merge them).
"""

import tensorflow as tf

from bert_tf.text.dense import byte_slices, rows_by_example
from bert_tf.text.windows import word_values

# What the tagging signature returns per text, padded to its entities.
OUTPUTS = ("type", "text", "start", "end", "score", "count")


def tag_tables(labels):
    """(prefix, type) id per label: prefix 0 = O, 1 = B, 2 = I; type an
    index into the sorted entity types (-1 for O)."""
    types = sorted({t[2:] for t in labels if t != "O"})
    prefix = [0 if t == "O" else (1 if t.startswith("B-") else 2)
              for t in labels]
    kind = [-1 if t == "O" else types.index(t[2:]) for t in labels]
    return types, prefix, kind


def entity_spans(tags, num_words, labels):
    """Word spans of BIO tag ids.

    Args:
        tags: int [B, N] label ids (positions >= `num_words` ignored).
        num_words: int [B].
        labels: the label names in id order.

    Returns:
        (row, type id, first word, last word): int32 [E] each, entities in
        row-major order.

    Examples:
        >>> labels = ("O", "B-PER", "I-PER", "B-LOC", "I-LOC")
        >>> spans = entity_spans(tf.constant([[1, 1, 2, 0, 4, 3]]),
        ...                      tf.constant([6]), labels)
        >>> [s.numpy().tolist() for s in spans]
        [[0, 0, 0, 0], [1, 1, 0, 0], [0, 1, 4, 5], [0, 2, 4, 5]]
    """
    _, prefix_of, kind_of = tag_tables(labels)
    tags = tf.cast(tags, tf.int32)
    valid = tf.range(tf.shape(tags)[1])[None, :] < num_words[:, None]
    prefix = tf.where(valid, tf.gather(prefix_of, tags), 0)
    kind = tf.where(valid, tf.gather(kind_of, tags), -1)
    before_prefix = tf.pad(prefix[:, :-1], [[0, 0], [1, 0]])
    before_kind = tf.pad(kind[:, :-1], [[0, 0], [1, 0]], constant_values=-1)
    after_prefix = tf.pad(prefix[:, 1:], [[0, 0], [0, 1]])
    after_kind = tf.pad(kind[:, 1:], [[0, 0], [0, 1]], constant_values=-1)
    opens = (prefix == 1) | ((prefix == 2) & (
        (before_prefix == 0) | (before_kind != kind)))
    goes_on = (after_prefix == 2) & (after_kind == kind)
    closes = (prefix > 0) & ~goes_on
    starts = tf.cast(tf.where(opens), tf.int32)
    ends = tf.cast(tf.where(closes), tf.int32)
    return (starts[:, 0], tf.gather_nd(kind, starts), starts[:, 1],
            ends[:, 1])


def word_predictions(features, logits):
    """(tag id, probability) per word: int32 / float32 [B, N]."""
    probabilities = word_values(
        features, tf.nn.softmax(tf.cast(logits, tf.float32)))
    return (tf.argmax(probabilities, -1, output_type=tf.int32),
            tf.reduce_max(probabilities, -1))


def decode_entities(features, logits, text, labels, max_entities=32):
    """The entities of each sentence from its windows' tag logits.

    Args:
        features: a `TaggingPreprocessor` output.
        logits: float [W, L, len(labels)].
        text: tf.string [B], the sentences.
        labels: the label names in id order.
        max_entities: K, entities returned per sentence (the first K).

    Returns:
        dict: `type`, `text` (string [B, K]), `start`, `end` (int32
        [B, K], code points into the sentence, end exclusive), `score`
        (float32 [B, K], the mean probability of the entity's word tags),
        all padded ("", -1, 0), and `count` (int32 [B]); plus `tags`
        (int32 [B, N], each word's tag id) for evaluation.
    """
    # Type names by type id + 1 ("" at 0, for no entity).
    type_names = tf.constant([""] + tag_tables(labels)[0], tf.string)
    tags, scores = word_predictions(features, logits)
    num_words = features["num_words"]
    row, kind, first, last = entity_spans(tags, num_words, labels)
    # Mean word probability over each span (exclusive running sums).
    running = tf.pad(tf.math.cumsum(scores, axis=1), [[0, 0], [1, 0]])
    total = tf.gather_nd(running, tf.stack([row, last + 1], 1)) - \
        tf.gather_nd(running, tf.stack([row, first], 1))
    score = total / tf.cast(last - first + 1, tf.float32)

    def word_value(name, index):
        return tf.gather_nd(features[name], tf.stack([row, index], 1))

    # The first K entities of each row, as indices into the entity lists
    # (E: a padding entity), then every output by a gather: no ragged
    # kernels and no string scatter, so TFLite builtins run it too.
    num_rows = tf.shape(text)[0]
    entity = rows_by_example(tf.range(tf.size(row)), row, num_rows, -1,
                             width=max_entities)
    found = entity >= 0
    entity = tf.where(found, entity, tf.size(row))

    def padded(values, fill):
        values = tf.concat([values, [tf.cast(fill, values.dtype)]], 0)
        return tf.gather(values, entity)

    return {
        "type": tf.gather(type_names, padded(kind + 1, 0)),
        "text": byte_slices(text, padded(word_value("word_byte_start",
                                                    first), 0),
                            padded(word_value("word_byte_end", last), 0)),
        "start": padded(word_value("word_char_start", first), -1),
        "end": padded(word_value("word_char_end", last), -1),
        "score": padded(score, 0.0),
        "count": tf.reduce_sum(tf.cast(found, tf.int32), axis=1),
        "tags": tags,
    }
