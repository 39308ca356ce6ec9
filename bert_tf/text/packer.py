"""Packing token ids into BERT's fixed-length model inputs (tf-text, in-graph).

`[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`, segment ids 0 for `[CLS]`, A and
the first `[SEP]`, 1 for B and the last `[SEP]`, then padding to a fixed
length. Pairs too long are trimmed like the original BERT's
`_truncate_seq_pair`: tokens come off the end of the longer segment
(`round_robin`); `waterfall` trims the last segment first instead.
"""

import keras
import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf.text.features import input_specs, legacy_seq_length

TRUNCATORS = ("round_robin", "waterfall")


def _as_ragged(ids):
    if isinstance(ids, tf.RaggedTensor):
        return ids
    ids = tf.convert_to_tensor(ids)
    return tf.RaggedTensor.from_tensor(ids)


def pack_segments(segments, seq_length, cls_id, sep_id, pad_id=0,
                  truncator="round_robin"):
    """`BertPacker`'s packing as a function: `segments` (a list of one or
    two [batch, (tokens)] id tensors) -> the three int32 encoder inputs
    [batch, seq_length]. `seq_length` may be a scalar tensor
    (the TF Hub-format `bert_pack_inputs(..., seq_length=)`)."""
    segments = [tf.cast(_as_ragged(s), tf.int32) for s in segments]
    budget = seq_length - (len(segments) + 1)
    trimmer_cls = (tf_text.RoundRobinTrimmer if truncator == "round_robin"
                   else tf_text.WaterfallTrimmer)
    segments = trimmer_cls(budget).trim(segments)
    ids, type_ids = tf_text.combine_segments(
        segments, start_of_sequence_id=cls_id, end_of_segment_id=sep_id)
    word_ids, mask = tf_text.pad_model_inputs(ids, seq_length,
                                              pad_value=pad_id)
    type_ids, _ = tf_text.pad_model_inputs(type_ids, seq_length)
    return {"input_word_ids": tf.cast(word_ids, tf.int32),
            "input_mask": tf.cast(mask, tf.int32),
            "input_type_ids": tf.cast(type_ids, tf.int32)}


def pack_dense(segments, seq_length, cls_id, sep_id, pad_id=0):
    """`pack_segments` (round robin) with dense ops only (gather, where,
    min), for runtimes without ragged kernels such as TFLite builtins.

    Args:
        segments: one or two ragged [batch, (tokens)] int32 ids.

    Returns:
        the three int32 encoder inputs [batch, seq_length].
    """
    if not 1 <= len(segments) <= 2:
        raise ValueError(f"pack_dense takes one or two segments, got "
                         f"{len(segments)}.")
    if len(segments) == 1:
        return _pack_one_dense(segments[0], seq_length, cls_id, sep_id,
                               pad_id)
    length = seq_length
    budget = length - (len(segments) + 1)
    dense = [s.to_tensor(default_value=pad_id, shape=[None, length])
             for s in segments]
    sizes = [tf.cast(s.row_lengths(), tf.int32)[:, None] for s in segments]
    if len(segments) == 1:
        kept = [tf.minimum(sizes[0], budget)]
    else:
        # Round robin: a, b, a, b, ... until the budget is spent.
        kept_b = tf.minimum(sizes[1], tf.maximum(budget // 2,
                                                 budget - sizes[0]))
        kept = [tf.minimum(sizes[0], budget - kept_b), kept_b]
    position = tf.range(length)[None, :] + tf.zeros_like(sizes[0])
    word_ids = tf.where(position == 0, cls_id, pad_id)
    type_ids = tf.zeros_like(position)
    start = 1
    for index, (ids, count) in enumerate(zip(dense, kept)):
        inside = (position >= start) & (position < start + count)
        taken = tf.gather(ids, tf.clip_by_value(position - start, 0,
                                                length - 1), batch_dims=1)
        word_ids = tf.where(inside, taken, word_ids)
        word_ids = tf.where(position == start + count, sep_id, word_ids)
        if index:
            type_ids = tf.where(inside | (position == start + count), 1,
                                type_ids)
        start = start + count + 1
    return {"input_word_ids": word_ids,
            "input_mask": tf.cast(position < start, tf.int32),
            "input_type_ids": type_ids}


def _pack_one_dense(ids, seq_length, cls_id, sep_id, pad_id):
    """`[CLS] ids [SEP]` padded, in a dozen ops (a request's share of a
    classifier): the first seq_length - 1 ids after [CLS] (pad after a
    short row), [SEP] written over the position after the last one kept."""
    words = tf.pad(ids.to_tensor(default_value=pad_id,
                                 shape=[None, seq_length - 1]),
                   [[0, 0], [1, 0]], constant_values=cls_id)
    sep_at = tf.minimum(tf.cast(ids.row_lengths(), tf.int32),
                        seq_length - 2)[:, None] + 1
    position = tf.range(seq_length)[None, :]
    return {"input_word_ids": tf.where(position == sep_at, sep_id, words),
            "input_mask": tf.cast(position <= sep_at, tf.int32),
            "input_type_ids": tf.zeros_like(words)}


@keras.saving.register_keras_serializable(package="bert_tf")
class BertPacker(keras.layers.Layer):
    """One or two segments of ids -> `input_word_ids/input_mask/input_type_ids`.

    Args:
        seq_length: the fixed output length (special tokens included).
        cls_id: id of `[CLS]`.
        sep_id: id of `[SEP]`.
        pad_id: id of `[PAD]`.
        truncator: `round_robin` (trim the longer segment first, as the
            original BERT) or `waterfall` (trim the last segment first).

    Call args:
        segments: int ids [batch, (tokens)] (Ragged or dense) or a tuple/list
            of one or two of them; a 1-D tensor (one unbatched example) is
            accepted too.

    Returns:
        a dict of int32 tensors [batch, seq_length] (or
        [seq_length] for an unbatched example).

    Examples:
        >>> packer = BertPacker(seq_length=8, cls_id=101, sep_id=102)
        >>> out = packer((tf.ragged.constant([[7, 8, 9]]),
        ...               tf.ragged.constant([[5, 6]])))
        >>> out["input_word_ids"].numpy().tolist()
        [[101, 7, 8, 9, 102, 5, 6, 102]]
        >>> out["input_type_ids"].numpy().tolist()
        [[0, 0, 0, 0, 0, 1, 1, 1]]
    """

    def __init__(self, seq_length=None, cls_id=None, sep_id=None, pad_id=0,
                 truncator="round_robin", **kwargs):
        seq_length = legacy_seq_length(kwargs, seq_length, "BertPacker")
        if seq_length is None or cls_id is None or sep_id is None:
            raise TypeError("BertPacker needs seq_length, cls_id and sep_id.")
        kwargs.pop("dtype", None)
        super().__init__(dtype="int32", **kwargs)
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        if seq_length < 3:
            raise ValueError(
                f"seq_length = {seq_length}: must be >= 3 to hold "
                "[CLS] and [SEP] and at least one token.")
        if truncator not in TRUNCATORS:
            raise ValueError(f"truncator = {truncator!r}: must be one of "
                             f"{', '.join(TRUNCATORS)}.")
        # === Config ===
        self.seq_length = int(seq_length)
        self.cls_id = int(cls_id)
        self.sep_id = int(sep_id)
        self.pad_id = int(pad_id)
        self.truncator = truncator
        self.built = True

    def call(self, segments):
        if not isinstance(segments, (tuple, list)):
            segments = [segments]
        if not 1 <= len(segments) <= 2:
            raise ValueError(
                f"BertPacker takes one or two segments, got {len(segments)}.")
        unbatched = not isinstance(segments[0], tf.RaggedTensor) and \
            tf.convert_to_tensor(segments[0]).shape.rank == 1
        if unbatched:
            segments = [tf.convert_to_tensor(s)[None] for s in segments]
        if self.truncator == "round_robin":
            # The same numbers as tf-text's trimmer, combiner and padder in
            # a few dense ops: no ragged concatenations or their checks.
            outputs = pack_dense(
                [tf.cast(_as_ragged(s), tf.int32) for s in segments],
                self.seq_length, self.cls_id, self.sep_id, self.pad_id)
        else:
            outputs = pack_segments(segments, self.seq_length, self.cls_id,
                                    self.sep_id, self.pad_id, self.truncator)
        if unbatched:
            outputs = {k: v[0] for k, v in outputs.items()}
        return outputs

    def compute_output_spec(self, segments):
        first = segments[0] if isinstance(segments, (tuple, list)) else \
            segments
        return input_specs(first.shape[:-1], self.seq_length)

    def get_config(self):
        config = super().get_config()
        config.pop("dtype", None)
        config.update({
            "seq_length": self.seq_length,
            "cls_id": self.cls_id,
            "sep_id": self.sep_id,
            "pad_id": self.pad_id,
            "truncator": self.truncator,
        })
        return config
