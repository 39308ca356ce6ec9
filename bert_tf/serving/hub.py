"""TF Hub-format SavedModels: a text preprocessing model and an encoder, in
the layout of TF Hub's BERT models, so the TF Hub BERT tutorials run on
any bert_tf checkpoint.

The preprocessing model (`DIR/preprocess`):
    `preprocess(text)`: strings [batch] -> `input_word_ids`, `input_mask`,
        `input_type_ids`, int32 [batch, seq_length].
    `preprocess.tokenize(text)`: int32 word pieces, ragged
        [batch, (words), (pieces)]; `.tokenize.get_special_tokens_dict()`.
    Texts over the export's limits (`--max-input-chars`,
    `--max-batch-chars`, as for any SavedModel: `bert_tf.serving.limits`)
    are refused with INVALID_ARGUMENT by `preprocess` and `tokenize`.
    `preprocess.bert_pack_inputs(segments, seq_length=...)`: one or two
        tokenized segments ([batch, (words), (pieces)] or [batch, (pieces)])
        -> the three inputs; the longer segment loses pieces first.
The encoder (`DIR/encoder`):
    `encoder(inputs, training=False)`: the three inputs -> `pooled_output`
        [batch, H], `sequence_output` [batch, seq, H], `default` (the pooled
        output) and `encoder_outputs`, a list of L + 1 [batch, seq, H]
        tensors: the embedding output first, then layer i at index i (so
        `encoder_outputs[-1]` is `sequence_output`). It has `variables`,
        `trainable_variables` and `regularization_losses`, so
        `hub.KerasLayer(..., trainable=True)` fine-tunes it.
Both also have a `serve` endpoint (what `keras.layers.TFSMLayer` calls)
and a `serving_default` signature (TF Serving; there `encoder_outputs` is
one tensor [batch, L + 1, seq, H]). Load them after `import
tensorflow_text`.
"""

import json

import tensorflow as tf

from bert_tf import checkpoints
from bert_tf.layers.int8 import served_parameter_count
from bert_tf.models.encoder import INPUT_NAMES
from bert_tf.safe_io import check_writable, guarded_write, replace_directory
from bert_tf import precision as precision_lib
import bert_tf.serving.limits as limits_lib
import bert_tf.serving.quantize as quantize_lib
from bert_tf.serving.export import audit_ops
from bert_tf.tasks.base import check_lengths
from bert_tf.storage import GPath
from bert_tf.text.packer import pack_segments
from bert_tf.text.tokenizer import BertTokenizer

INFO_FILE = "bert_tf.json"
_Trackable = tf.__internal__.tracking.AutoTrackable


def _string_spec(name):
    return tf.TensorSpec([None], tf.string, name=name)


def word_pieces(tokenizer, text):
    """[batch, (words), (pieces)] ids: `tokenizer`'s pieces grouped into
    words (a word starts at every piece that is not a `##` suffix, as
    BERT's basic tokenizer splits words and punctuation)."""
    ids = tokenizer(text)
    suffix = tf.constant([t.startswith("##") for t in tokenizer.vocabulary])
    flat = ids.flat_values
    # A row's first piece starts a word even if it is a suffix.
    first = tf.boolean_mask(ids.row_starts(), ids.row_lengths() > 0)
    row_first = tf.scatter_nd(first[:, None], tf.ones_like(first, tf.bool),
                              tf.shape(flat, out_type=tf.int64))
    starts = tf.logical_or(tf.logical_not(tf.gather(suffix, flat)),
                           row_first)
    words = tf.RaggedTensor.from_row_starts(
        flat, tf.cast(tf.where(starts)[:, 0], tf.int64))
    words_per_row = tf.reduce_sum(
        tf.cast(ids.with_flat_values(starts), tf.int64), axis=1)
    return tf.RaggedTensor.from_row_lengths(words, words_per_row)


class HubPreprocessor(_Trackable):
    """The root object of the preprocessing SavedModel (module docstring).

    Args:
        vocab: the `Vocab`; its file is kept as the `vocab_file` asset.
        seq_length: the length of `preprocess(text)` and the default of
            `bert_pack_inputs`.
        lower_case: see `BertTokenizer` (None: from the vocab).
        max_input_chars, max_batch_chars, max_batch_rows: the limits of a
            text, of a call's texts together and of their number
            (`bert_tf.serving.limits`).
    """

    def __init__(self, vocab, seq_length=128, lower_case=None,
                 max_input_chars=limits_lib.MAX_INPUT_CHARS,
                 max_batch_chars=limits_lib.MAX_BATCH_CHARS,
                 max_batch_rows=limits_lib.MAX_BATCH_ROWS):
        super().__init__()
        limits_lib.check_limits(max_input_chars, max_batch_chars,
                                max_batch_rows)
        tokenizer = BertTokenizer(vocab, lower_case)
        self.vocab_file = tf.saved_model.Asset(str(vocab.path))
        special = {"vocab_size": vocab.size, "start_of_sequence_id":
                   vocab.cls_id, "end_of_segment_id": vocab.sep_id,
                   "padding_id": vocab.pad_id, "mask_id": vocab.mask_id}

        def tokenize(text):
            with tf.control_dependencies(limits_lib.text_checks(
                    text, "text", max_input_chars, max_batch_chars,
                    max_batch_rows)):
                return word_pieces(tokenizer, tf.identity(text))

        def pack(segments, seq_length=seq_length):
            segments = list(segments)
            if not 1 <= len(segments) <= 2:
                raise ValueError("bert_pack_inputs takes one or two "
                                 f"segments, got {len(segments)}.")
            segments = [s.merge_dims(-2, -1) if s.ragged_rank == 2 else s
                        for s in segments]
            checks = [tf.debugging.assert_greater_equal(
                seq_length, len(segments) + 2, message=(
                    "seq_length must leave room for [CLS], each [SEP] and "
                    "one piece"))]
            with tf.control_dependencies(checks):
                seq_length = tf.identity(seq_length)
            return pack_segments(segments, seq_length, vocab.cls_id,
                                 vocab.sep_id, vocab.pad_id)

        def preprocess(text):
            return pack([tokenize(text)])

        self.tokenize = _Trackable()
        self.tokenize.__call__ = tf.function(
            tokenize, input_signature=[_string_spec("text")], autograph=False)
        self.tokenize.get_special_tokens_dict = _Trackable()
        self.tokenize.get_special_tokens_dict.__call__ = tf.function(
            lambda: {k: tf.constant(v, tf.int32) for k, v in special.items()},
            input_signature=[], autograph=False)
        self.bert_pack_inputs = _Trackable()
        self.bert_pack_inputs.__call__ = tf.function(pack, autograph=False)
        for count in (1, 2):
            for ragged_rank in (1, 2):
                spec = tf.RaggedTensorSpec([None] * (ragged_rank + 1),
                                           tf.int32, ragged_rank)
                self.bert_pack_inputs.__call__.get_concrete_function(
                    [spec] * count, tf.TensorSpec([], tf.int32))
        self.__call__ = self.serve = tf.function(
            preprocess, input_signature=[_string_spec("text")],
            autograph=False)

    def signatures(self):
        return {"serving_default": self.serve}


class HubEncoder(_Trackable):
    """The root object of the encoder SavedModel (module docstring).

    Only the plain tf.Variables under the Keras variables are tracked (as
    `bert_tf.tasks.base.TaskModule` explains).

    Args:
        encoder: a `BertEncoder`.
        vocab: its `Vocab`; the file is kept as the `vocab_file` asset.
    """

    def __init__(self, encoder, vocab):
        super().__init__()
        self.vocab_file = tf.saved_model.Asset(str(vocab.path))
        self.variables = [v.value for v in encoder.variables]
        self.trainable_variables = [v.value for v in
                                    encoder.trainable_variables]
        self.regularization_losses = []

        def encode(inputs, training=False):
            outputs = encoder({k: inputs[k] for k in INPUT_NAMES},
                              training=training)
            states = [outputs["embedding_output"], *outputs["encoder_outputs"]]
            pooled = tf.cast(outputs["pooled_output"], tf.float32)
            return {"pooled_output": pooled, "default": pooled,
                    "sequence_output": tf.cast(outputs["sequence_output"],
                                               tf.float32),
                    "encoder_outputs": [tf.cast(s, tf.float32)
                                        for s in states]}

        specs = {k: tf.TensorSpec([None, None], tf.int32, name=k)
                 for k in INPUT_NAMES}
        self.__call__ = tf.function(encode, autograph=False)
        for training in (False, True):
            self.__call__.get_concrete_function(specs, training=training)
        self.serve = tf.function(lambda inputs: encode(inputs),
                                 input_signature=[specs], autograph=False)

        def serving_default(input_word_ids, input_mask, input_type_ids):
            outputs = encode({"input_word_ids": input_word_ids,
                              "input_mask": input_mask,
                              "input_type_ids": input_type_ids})
            outputs["encoder_outputs"] = tf.stack(outputs["encoder_outputs"],
                                                  axis=1)
            return outputs

        self.serving_default = tf.function(
            serving_default, input_signature=[specs[k] for k in INPUT_NAMES],
            autograph=False)

    def signatures(self):
        return {"serving_default": self.serving_default}


def export_hub(checkpoint, out, log=print, overwrite=False, seq_length=128,
               lower_case=None, precision="fp32", calibration_texts=None,
               max_input_chars=limits_lib.MAX_INPUT_CHARS,
               max_batch_chars=limits_lib.MAX_BATCH_CHARS,
               max_batch_rows=limits_lib.MAX_BATCH_ROWS):
    """Writes `out/preprocess` and `out/encoder`, the TF Hub-format
    SavedModels of any checkpoint's encoder (module docstring).

    Args:
        checkpoint: `hf:PATH`, `tf1:PATH`, `garden:PATH` or a bert_tf
            checkpoint directory (`bert_tf.checkpoints.load_encoder`).
        out: the directory to write (it must not exist unless `overwrite`).
        log: where the report goes.
        overwrite: replace an existing `out`.
        seq_length: the preprocessing model's default sequence length.
        lower_case: see `BertTokenizer` (None: from the vocab).
        precision: the encoder's, as in `export_model` (its outputs stay
            float32).
        calibration_texts: int8: a file of texts to calibrate on.
        max_input_chars, max_batch_chars, max_batch_rows: the
            preprocessing model's limits, as in `export_model`.

    Returns:
        {"preprocess": path, "encoder": path, "ops": {name: op audit}}.
    """
    out = GPath(out)
    if out.exists() and not overwrite:
        raise ValueError(f"{out} already exists; choose a new directory or "
                         "pass --overwrite.")
    limits = limits_lib.export_fields(max_input_chars, max_batch_chars,
                                      max_batch_rows)
    check_writable(out.parent, "the hub export")
    precision = precision_lib.Precision.parse(precision, log)
    pretrained = checkpoints.load_encoder(checkpoint, dtype=precision.policy)
    quantize_lib.quantize(pretrained.encoder, precision,
                           {"seq_length": seq_length}, pretrained.vocab,
                           texts_file=calibration_texts, log=log)
    check_lengths(pretrained.config, seq_length=seq_length)
    staging = out.with_name(out.name + ".partial")
    staging.rmtree(ignore_errors=True)
    with guarded_write(out, "the hub export", cleanup=(staging,)):
        ops = _write_hub_modules(staging, pretrained, seq_length, lower_case,
                                 checkpoint, precision, limits)
    replace_directory(staging, out, "the hub export")
    _log_hub_export(log, out, checkpoint, pretrained, seq_length, ops,
                    limits, precision)
    return {"preprocess": out / "preprocess", "encoder": out / "encoder",
            "ops": ops}


def _write_hub_modules(staging, pretrained, seq_length, lower_case,
                       checkpoint, precision, limits):
    """Writes the preprocess and encoder SavedModels into `staging`;
    returns their op audits."""
    staging.mkdir(parents=True)
    vocab = pretrained.vocab.saved(staging / "vocab.txt")
    modules = {
        "preprocess": HubPreprocessor(
            vocab, seq_length, lower_case, **{
                k: v for k, v in limits.items() if k != "pads_to_longest"}),
        "encoder": HubEncoder(pretrained.encoder, vocab)}
    info = {"kind": "hub", "checkpoint": str(checkpoint),
            "seq_length": seq_length, "precision": precision.name,
            **limits, **{k: getattr(pretrained.config, k) for k in (
                "num_layers", "hidden_size", "vocab_size")}}
    ops = {}
    for name, module in modules.items():
        path = staging / name
        tf.saved_model.save(module, str(path),
                            signatures=module.signatures())
        (path / "assets.extra").mkdir(exist_ok=True)
        (path / "assets.extra" / INFO_FILE).write_text(
            json.dumps({**info, "part": name}, indent=2) + "\n")
        ops[name] = audit_ops(path)
    (staging / "vocab.txt").unlink()
    return ops


def _log_hub_export(log, out, checkpoint, pretrained, seq_length, ops,
                    limits, precision):
    encoder, config = pretrained.encoder, pretrained.config
    info = {"num_layers": config.num_layers,
            "hidden_size": config.hidden_size}
    log(f"wrote TF Hub-format SavedModels of {checkpoint} "
        f"({precision}, {served_parameter_count(encoder):,} parameters, "
        f"{info['num_layers']} layers, hidden {info['hidden_size']}):")
    log(f"  {out / 'preprocess'}: strings -> input_word_ids, input_mask, "
        f"input_type_ids [batch, {seq_length}]; .tokenize, "
        ".bert_pack_inputs(segments, seq_length=...); at most "
        f"{limits['max_input_chars']:,} characters per text, "
        f"{limits['max_batch_chars']:,} per call and "
        f"{limits['max_batch_rows']:,} texts (larger ones get "
        "INVALID_ARGUMENT)")
    log(f"  {out / 'encoder'}: those inputs -> pooled_output, "
        "sequence_output, default, encoder_outputs (embedding output + "
        f"{info['num_layers']} layers)")
    for name, audit in ops.items():
        log(f"  ops of {name}: {len(audit['core'])} TensorFlow core op "
            f"types, tf-text {', '.join(sorted(audit['tf_text'])) or '-'}; "
            "no PyFunc")
    log("load with `import tensorflow_text` first, then "
        "tf.saved_model.load, hub.KerasLayer or keras.layers.TFSMLayer")


__all__ = ["HubEncoder", "HubPreprocessor", "export_hub", "word_pieces"]
