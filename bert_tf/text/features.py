"""The encoder inputs every preprocessor produces, by their TF Hub BERT
names (int32 [batch, seq]); models, pipelines and exports all use these."""

INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")


def input_specs(batch_shape, seq_length):
    """{name: KerasTensor} of the encoder inputs a layer returns for inputs
    of `batch_shape` (its `compute_output_spec`)."""
    import keras

    shape = tuple(batch_shape) + (seq_length,)
    return {name: keras.KerasTensor(shape, dtype="int32")
            for name in INPUT_NAMES}


def legacy_seq_length(kwargs, seq_length, owner):
    """`seq_length`, or the deprecated `sequence_length` keyword popped from
    `kwargs` (the name before one word per idea; old saved layer configs
    and callers still pass it), with a warning.

    Examples:
        >>> import warnings
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     legacy_seq_length({"sequence_length": 64}, 128, "BertPacker")
        64
    """
    if "sequence_length" not in kwargs:
        return seq_length
    import warnings

    warnings.warn(f"{owner}(sequence_length=...) is deprecated: it is now "
                  "seq_length.", FutureWarning, stacklevel=3)
    return kwargs.pop("sequence_length")


# Sequence lengths of batches: training groups texts of similar length by
# these (Keras retraces per shape), and an export's warm-up requests run
# at each of them.
LENGTH_BUCKETS = (8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)


def bucket_lengths(seq_length):
    """The buckets of `seq_length` (the last is `seq_length` itself).

    Examples:
        >>> bucket_lengths(64), bucket_lengths(100)
        ((8, 16, 24, 32, 48, 64), (8, 16, 24, 32, 48, 64, 96, 100))
    """
    return tuple(b for b in LENGTH_BUCKETS if b < seq_length) + (
        seq_length,)


def cut_to_longest(features, keys=INPUT_NAMES):
    """`features` with the [batch, seq_length] entries named in `keys` cut
    to the longest row (by `input_mask`). A model's outputs at real
    positions do not depend on padding, so only the work changes.

    Exported graphs cut every request this way. Rounding up to a length
    bucket instead cost 8% at batch 1 and 20% at batch 32 on real RT
    sentences (27 tokens go to 32; `benchmarks/bucket_rounding.py`); new
    shapes cost nothing to trace in a SavedModel's graph.

    Examples:
        >>> import tensorflow as tf
        >>> mask = tf.constant([[1] * 10 + [0] * 22, [1] * 7 + [0] * 25])
        >>> cut = cut_to_longest({"input_mask": mask}, ["input_mask"])
        >>> cut["input_mask"].shape.as_list()
        [2, 10]
    """
    import tensorflow as tf

    # An empty batch keeps one position, so every shape stays valid.
    longest = tf.maximum(tf.reduce_max(tf.reduce_sum(
        tf.cast(features["input_mask"], tf.int32), axis=1)), 1)
    return {k: v[:, :longest] if k in keys else v
            for k, v in features.items()}
