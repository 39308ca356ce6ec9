"""Batching shared by every task's input pipeline."""

import tensorflow as tf

LENGTH_BUCKETS = (16, 24, 32, 48, 64, 96, 128, 192, 256, 384)


def bucket_by_length(dataset, batch_size, sequence_length,
                     drop_remainder=False):
    """Batches `(features, labels[, weights])` examples of similar length
    together and cuts each batch to its longest row (a model's outputs do
    not depend on padding). Features hold [L] rows, among them
    `input_mask`; labels and weights may be [L] rows too (cut alike);
    scalars pass unchanged.

    Example:
    >>> rows = tf.data.Dataset.from_tensor_slices((
    ...     {"input_mask": [[1, 0, 0, 0], [1, 1, 0, 0]]}, [0, 1]))
    >>> x, y = next(iter(bucket_by_length(rows, 2, 4)))
    >>> x["input_mask"].numpy().tolist()
    [[1, 0], [1, 1]]
    """
    boundaries = [b for b in LENGTH_BUCKETS if b < sequence_length]
    dataset = dataset.bucket_by_sequence_length(
        lambda x, *rest: tf.reduce_sum(x["input_mask"]), boundaries,
        [batch_size] * (len(boundaries) + 1), drop_remainder=drop_remainder)

    def trim(x, *rest):
        longest = tf.reduce_max(tf.reduce_sum(x["input_mask"], axis=1))
        return tf.nest.map_structure(
            lambda v: v[:, :longest] if v.shape.rank == 2 else v,
            (x, *rest))

    return dataset.map(trim)
