"""The object layout of every bert_tf checkpoint.

The encoder's variables live under `encoder/...` (for example
`encoder/transformer_layer_0/attention/qkv/kernel`), each head under its
own root, which its model class names: `BertPretrainer.CHECKPOINT_ROOTS`
(`masked_lm/`, `next_sentence/`), a task model's `CHECKPOINT_ROOT`
(`classifier/`, `span_labeler/`, `token_classifier/`). So an encoder
restores from a pre-training checkpoint alone, and a trainer checkpoint
(which adds the optimizer, the step and the input iterator as further
roots) holds the same model paths as a best-weights checkpoint.
"""

import tensorflow as tf

ENCODER_ROOT = "encoder"
# The roots a trainer checkpoint adds beside the model's (see
# `training/trainer.py`), and `tf.train.Checkpoint`'s own counter: every
# other root holds model variables, whichever head a task kind names.
STATE_ROOTS = ("optimizer", "global_step", "dropout_seeds", "train_iterator",
               "save_counter")


def checkpoint_roots(encoder, **heads):
    """{root: trackable} of an encoder and its heads (None heads left out).

    Examples:
        >>> from bert_tf.models.encoder import BertEncoder
        >>> sorted(checkpoint_roots(BertEncoder.from_preset("bert_tiny")))
        ['encoder']
    """
    roots = {ENCODER_ROOT: tf.train.Checkpoint(**encoder.checkpoint_items())}
    roots.update({k: v for k, v in heads.items() if v is not None})
    return roots


def model_checkpoint(encoder, **heads):
    """The `tf.train.Checkpoint` of an encoder and its heads by root."""
    return tf.train.Checkpoint(**checkpoint_roots(encoder, **heads))


def model_roots(model):
    """{root: trackable} of a model with `encoder` and `checkpoint_heads()`
    (and optionally `extra_checkpoint_roots()`, state beside the heads that
    a trainer checkpoint keeps but best weights do not need): what the
    trainer checkpoints, without knowing which model it trains.

    Examples:
        >>> from bert_tf.models.encoder import BertEncoder
        >>> from bert_tf.models.pretrainer import BertPretrainer
        >>> sorted(model_roots(BertPretrainer(BertEncoder.from_preset(
        ...     "bert_tiny"))))
        ['encoder', 'masked_lm', 'next_sentence']
    """
    extra = getattr(model, "extra_checkpoint_roots", dict)()
    return {**checkpoint_roots(model.encoder, **model.checkpoint_heads()),
            **extra}
