"""Fill-mask: raw text with mask markers -> the likeliest tokens for each.

The `fill_mask` export kind of a pre-trained model with its masked-LM
head. Text is split on the marker (`[MASK]` unless chosen otherwise) and
the pieces of the parts between markers are joined with the mask id, so
a marker is never tokenized (never `[`, `mask`, `]`). The masked-LM head
scores every kept mask position; the top-k tokens come back with their
probabilities, padded to `max_masks`, with counts:

- `count`: masks answered (0 when the text has no mask, or more than
  `max_masks`);
- `masks`: masks in the text, so a caller sees those that truncation to
  `seq_length` cut off (`masks > count`).
"""

import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf import checkpoints
from bert_tf.models.chunked import map_in_chunks, row_classes_of
from bert_tf.models.pretrainer import BertPretrainer
from bert_tf.tasks.base import (ExportOnlyKind, TaskModule, check_lengths,
                                register, string_batch)
from bert_tf.text.features import INPUT_NAMES, cut_to_longest
from bert_tf.text.tokenizer import BertTokenizer
from bert_tf.tasks.fill_mask.cli import FillMaskCommandLine

OUTPUTS = ("tokens", "token_ids", "probabilities", "count", "masks")


def mask_features(tokenizer, text, marker, seq_length, max_masks):
    """text [B] -> encoder inputs with the mask id at each marker, plus
    `masked_lm_positions` [B, max_masks], `count` and `masks` [B]."""
    vocab = tokenizer.vocab
    parts = tf.strings.split(text, sep=marker)                 # [B, (S)]
    pieces = tokenizer(parts.flat_values)                      # [S, (p)]
    per_text = parts.row_lengths()
    index = tf.ragged.range(per_text).flat_values
    followed = index < tf.repeat(per_text, per_text) - 1  # a marker next
    masks = tf.RaggedTensor.from_row_lengths(
        tf.fill([tf.reduce_sum(tf.cast(followed, tf.int64))],
                tf.cast(vocab.mask_id, pieces.dtype)),
        tf.cast(followed, tf.int64))
    pieces = tf.concat([pieces, masks], axis=1)
    ids = tf.RaggedTensor.from_row_lengths(
        pieces.flat_values, tf.reduce_sum(
            parts.with_flat_values(pieces.row_lengths()), axis=1))
    found = tf.reduce_sum(tf.cast(tf.equal(ids, vocab.mask_id), tf.int32),
                          axis=1)
    packed, segments = tf_text.combine_segments(
        [ids[:, :seq_length - 2]], start_of_sequence_id=vocab.cls_id,
        end_of_segment_id=vocab.sep_id)
    word_ids, mask = tf_text.pad_model_inputs(packed, seq_length,
                                              pad_value=vocab.pad_id)
    word_ids = tf.cast(word_ids, tf.int32)
    is_mask = tf.equal(word_ids, vocab.mask_id)
    kept = tf.reduce_sum(tf.cast(is_mask, tf.int32), axis=1)
    answered = tf.where(found <= max_masks, kept, 0)
    at = tf.cast(tf.where(is_mask), tf.int32)                   # [M, 2]
    rank = tf.cumsum(tf.cast(is_mask, tf.int32), axis=1) - 1
    rank = tf.gather_nd(rank, at)
    keep = rank < max_masks
    positions = tf.scatter_nd(
        tf.stack([tf.boolean_mask(at[:, 0], keep),
                  tf.boolean_mask(rank, keep)], axis=1),
        tf.boolean_mask(at[:, 1], keep),
        tf.stack([tf.shape(word_ids)[0], max_masks]))
    return {"input_word_ids": word_ids,
            "input_mask": tf.cast(mask, tf.int32),
            "input_type_ids": tf.zeros_like(word_ids),
            "masked_lm_positions": positions,
            "count": answered, "masks": found}


def fill_mask_graph(pretrainer, tokenizer, spec, fixed_length=False):
    """text [B] -> the `OUTPUTS` (a plain function)."""
    vocab_tokens = tf.constant(list(tokenizer.vocab.tokens))
    top_k, max_masks = spec["top_k"], spec["max_masks"]

    def fill(text):
        features = mask_features(tokenizer, text, spec["marker"],
                                 spec["seq_length"], max_masks)
        if not fixed_length:
            features = cut_to_longest(features, INPUT_NAMES)
        def best_tokens(chunk):  # only the top k of each chunk's logits
            logits = pretrainer(chunk, training=False)["mlm_logits"]
            probabilities, ids = tf.math.top_k(
                tf.nn.softmax(tf.cast(logits, tf.float32)), top_k)
            return {"probabilities": probabilities, "ids": ids}

        best = map_in_chunks(
            best_tokens,
            {k: features[k] for k in (*INPUT_NAMES, "masked_lm_positions")},
            ("probabilities", "ids"), row_classes=row_classes_of(pretrainer))
        probabilities = best["probabilities"]
        ids = tf.cast(best["ids"], tf.int32)
        real = tf.range(max_masks)[None, :] < features["count"][:, None]
        real = real[..., None]
        return {"tokens": tf.where(real, tf.gather(vocab_tokens, ids), ""),
                "token_ids": tf.where(real, ids, -1),
                "probabilities": tf.where(real, probabilities, 0.0),
                "count": features["count"], "masks": features["masks"]}

    return fill


class FillMaskModule(TaskModule):
    """The `tf.Module` of `bert-tf export --kind fill_mask`:
    `serving_default(text [B])` -> `tokens` (string [B, K, k]),
    `token_ids` (int32), `probabilities` (float32, best first), padded to
    K = `max_masks` masks of k = `top_k` tokens ("", -1, 0), `count` and
    `masks` (int32 [B])."""

    warmup_inputs = [{"text": ["Paris is the [MASK] of France."]},
                     {"text": [""]}]

    def __init__(self, pretrainer, vocabulary, spec,
                 fixed_length=False):
        super().__init__(pretrainer, vocabulary, "bert_fill_mask",
                         spec["seq_length"], fixed_length)
        fill = fill_mask_graph(pretrainer, BertTokenizer(vocabulary), spec,
                               fixed_length)
        self.serve = tf.function(
            lambda text: fill(string_batch(text, "text")),
            input_signature=[tf.TensorSpec([None], tf.string, name="text")],
            autograph=False)
        self._marker = spec["marker"]

    def filler_request(self, words, batch_size=1):
        text = " ".join(["a"] * max(1, words - 1) + [self._marker])
        return {"text": [text] * batch_size}


@register
class FillMask(FillMaskCommandLine, ExportOnlyKind):
    """The `fill_mask` export kind, as `bert-tf predict` sees it."""

    kind = "fill_mask"

    @classmethod
    def build_export(cls, checkpoint, fixed_length=False, dtype=None,
                     seq_length=128, marker="[MASK]", top_k=5,
                     max_masks=8):
        """(spec, vocab, pretrainer, make_module) of the `fill_mask` export
        of a pre-trained model with its masked-LM head: raw text with
        `marker`s in, the `top_k` tokens of up to `max_masks` masks out
        (`FillMaskModule`).

        Args:
            checkpoint: a bert_tf checkpoint directory holding the
                masked-LM head (`bert-tf convert` output of a model that has
                one, or a pre-training run's model_dir).
            fixed_length: run every request at the full length.
            dtype: the Keras dtype policy to build the model in.
            seq_length: texts are cut to this many pieces.
            marker: the string that marks a mask in the text.
            top_k, max_masks: tokens per mask, masks per text.
        """
        if not marker or not marker.strip():
            raise ValueError(f"marker = {marker!r}: must be a non-blank "
                             "string.")
        if str(checkpoint).partition(":")[0] in checkpoints.SOURCES:
            raise ValueError(f"{checkpoint}: convert it first (`bert-tf "
                             "convert` keeps the masked-LM head), then "
                             "export the converted directory.")
        pretrained = checkpoints.load_encoder(checkpoint, dtype=dtype)
        _, _, prefix = checkpoints.checkpoint_files(pretrained.directory)
        if not checkpoints.has_heads(prefix)[0]:
            raise ValueError(f"{checkpoint} has no masked-LM head (only an "
                             "encoder), so it cannot fill masks.")
        pretrainer = BertPretrainer(pretrained.encoder, nsp=False,
                                    dtype=dtype)
        checkpoints.restore_model(prefix, pretrained.encoder,
                                  pretrainer.masked_lm)
        vocab_size = pretrained.config.vocab_size
        if not 1 <= top_k <= vocab_size or max_masks < 1:
            raise ValueError(f"top_k = {top_k} must be in [1, {vocab_size}] "
                             f"and max_masks = {max_masks} >= 1.")
        check_lengths(pretrained.config, seq_length=seq_length)
        spec = {"kind": cls.kind, "name": str(checkpoint),
                "seq_length": seq_length, "marker": marker,
                "top_k": top_k, "max_masks": max_masks}
        return spec, pretrained.vocab, pretrainer, (
            lambda served, vocab: FillMaskModule(served, vocab, spec,
                                                 fixed_length))


__all__ = ["FillMask", "FillMaskModule", "fill_mask_graph",
           "mask_features"]
