"""Batching shared by every task's input pipeline."""

import tensorflow as tf

from bert_tf.text.features import LENGTH_BUCKETS

# Training groups texts by the export's buckets from 16 up: finer groups at
# the short end would make batches of near-identical texts (and, where
# length tracks the label, of one class; the toy tests learn nothing then).
TRAINING_BOUNDARIES = tuple(b for b in LENGTH_BUCKETS if b >= 16)


def bucket_by_length(dataset, batch_size, seq_length,
                     drop_remainder=False):
    """Batches `(features, labels[, weights])` examples of similar length
    together and cuts each batch to its longest row (a model's outputs do
    not depend on padding). Features hold [L] rows, among them
    `input_mask`; labels and weights may be [L] rows too (cut alike);
    scalars pass unchanged.

    Examples:
        >>> rows = tf.data.Dataset.from_tensor_slices((
        ...     {"input_mask": [[1, 0, 0, 0], [1, 1, 0, 0]]}, [0, 1]))
        >>> x, y = next(iter(bucket_by_length(rows, 2, 4)))
        >>> x["input_mask"].numpy().tolist()
        [[1, 0], [1, 1]]
    """
    boundaries = [b for b in TRAINING_BOUNDARIES if b < seq_length]
    dataset = dataset.bucket_by_sequence_length(
        lambda x, *rest: tf.reduce_sum(x["input_mask"]), boundaries,
        [batch_size] * (len(boundaries) + 1), drop_remainder=drop_remainder)

    def trim(x, *rest):
        longest = tf.reduce_max(tf.reduce_sum(x["input_mask"], axis=1))
        return tf.nest.map_structure(
            lambda v: v[:, :longest] if v.shape.rank == 2 else v,
            (x, *rest))

    return dataset.map(trim)


def _shuffled_windows(examples, size, to_windows, seed, input_context):
    """Endless: this pipeline's shard of `examples`, shuffled each epoch,
    turned into windows 64 examples at a time and mixed."""
    pipelines = input_context.num_input_pipelines if input_context else 1
    if pipelines > 1:
        examples = examples.shard(pipelines, input_context.input_pipeline_id)
    dataset = examples.shuffle(max(1, min(size, 100_000)), seed=seed,
                               reshuffle_each_iteration=True)
    dataset = dataset.repeat().ragged_batch(64).flat_map(to_windows)
    return dataset.shuffle(1024, seed=seed)


def window_batches(examples, size, to_windows, batch_size, seq_length,
                   seed=0, input_context=None, drop_remainder=False,
                   dynamic_length=False):
    """Endless shuffled training batches of windows made from examples.

    Examples are sharded per input pipeline, shuffled each epoch, turned
    into windows 64 at a time by `to_windows` (a batch of examples -> a
    `tf.data.Dataset` of `(features, labels[, weights])` windows), mixed
    (the windows of one long text arrive together) and batched, by length
    when `dynamic_length`.

    Args:
        examples: a `tf.data.Dataset` of example dicts (ragged fields
            allowed).
        size: number of examples (the shuffle buffer).
        to_windows, batch_size, seq_length, seed, input_context,
        drop_remainder, dynamic_length: as described above and in
        `bucket_by_length`.
    """
    dataset = _shuffled_windows(examples, size, to_windows, seed,
                                input_context)
    if dynamic_length:
        dataset = bucket_by_length(dataset, batch_size, seq_length,
                                   drop_remainder)
    else:
        dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
    return dataset.prefetch(tf.data.AUTOTUNE)


def grouped_window_batches(examples, size, to_groups, batch_size,
                           seq_length, seed=0, input_context=None,
                           dynamic_length=False):
    """Endless shuffled training batches of `batch_size` examples with all
    their windows, for losses that compare the windows of one example
    (span QA's `SharedSpanLoss`).

    `to_groups` turns a batch of examples into a `tf.data.Dataset` of one
    element per example: `(features, labels)` with [w, L] features and [w]
    labels for its w windows. A batch holds the windows of `batch_size`
    examples, one after another ([W, L]), each label paired with its
    example's index in the batch: [W, 2]. With `dynamic_length`, examples
    of similar length (their longest window) are batched together;
    batches are cut to their longest window either way.

    Examples:
        >>> examples = tf.data.Dataset.from_tensor_slices(
        ...     {"windows": [1, 2]}).repeat()
        >>> def to_groups(batch):
        ...     w = tf.reduce_sum(batch["windows"])
        ...     index = tf.repeat(tf.range(tf.size(batch["windows"])),
        ...                       batch["windows"])
        ...     ragged = lambda t: tf.RaggedTensor.from_value_rowids(t, index)
        ...     x = {"input_mask": ragged(tf.ones([w, 4], tf.int32))}
        ...     number = tf.ragged.range(batch["windows"]).flat_values + 1
        ...     return tf.data.Dataset.from_tensor_slices((x, ragged(number)))
        >>> x, y = next(iter(grouped_window_batches(examples, 2, to_groups, 2,
        ...                                         4)))
        >>> # Each example's windows (labels 1..w) arrive whole, in order,
        >>> # whichever examples the shuffle picked.
        >>> [y[y[:, 1] == i][:, 0].numpy().tolist() in ([1], [1, 2])
        ...  for i in (0, 1)]
        [True, True]
        >>> x["input_mask"].shape[0] == y.shape[0]
        True
    """
    # Slices of [examples, (windows), ...] ragged tensors come as ragged
    # specs of rank 0; padded batching needs them dense.
    dataset = _shuffled_windows(examples, size, to_groups, seed,
                                input_context).map(
        lambda *e: tf.nest.map_structure(
            lambda v: v.to_tensor() if isinstance(v, tf.RaggedTensor) else v,
            e))
    if dynamic_length:
        boundaries = [b for b in TRAINING_BOUNDARIES if b < seq_length]
        dataset = dataset.bucket_by_sequence_length(
            lambda x, y: tf.reduce_max(tf.reduce_sum(x["input_mask"], 1)),
            boundaries, [batch_size] * (len(boundaries) + 1))
    else:
        dataset = dataset.padded_batch(batch_size)

    def windows(x, y):
        # Padding windows (no real token) go; each label gets its example.
        real = tf.reduce_sum(x["input_mask"], axis=2) > 0
        example = tf.boolean_mask(tf.broadcast_to(
            tf.range(tf.shape(real)[0])[:, None], tf.shape(real)), real)
        longest = tf.reduce_max(tf.reduce_sum(x["input_mask"], axis=2))
        x = {k: tf.boolean_mask(v, real)[:, :longest] for k, v in x.items()}
        y = tf.nest.map_structure(lambda v: tf.stack(
            [tf.cast(tf.boolean_mask(v, real), tf.int32), example], 1), y)
        return x, y

    return dataset.map(windows).prefetch(tf.data.AUTOTUNE)


def split_of(data, name):
    """`data.splits[name]`, or an error naming the splits there are."""
    if name not in data.splits:
        raise ValueError(f"Task {data.name} has no split {name!r}; it has "
                         f"{', '.join(data.splits)}.")
    return data.splits[name]
