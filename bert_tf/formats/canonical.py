"""The canonical form every foreign format is read into, and its map onto
our layers.

Canonical weights are a dict from the original TF1 BERT variable names
(`bert/encoder/layer_0/attention/self/query/kernel`,
`cls/predictions/output_bias`, ...) to numpy arrays in the TF1 layouts.
One table (`model_spec`) maps those names onto our layers, in both
directions.
"""

import numpy as np

COPY, TRANSPOSE, QKV = "copy", "transpose", "qkv"
# Kept at its initialization when a checkpoint has none: ELECTRA and
# DistilBERT have no pooler (their classifiers read [CLS] through a fresh
# dense layer, which is what a fine-tuned pooler becomes).
OPTIONAL = frozenset(["bert/pooler/dense/kernel", "bert/pooler/dense/bias"])


def model_spec(encoder, masked_lm=None, next_sentence=None,
               discriminator=None):
    """(canonical names, our variable, how they relate) for every weight."""
    emb = encoder.embeddings
    entries = [
        (["bert/embeddings/word_embeddings"], emb.word_embeddings.embeddings,
         COPY),
        (["bert/embeddings/position_embeddings"],
         emb.position_embeddings.embeddings, COPY),
        (["bert/embeddings/LayerNorm/gamma"], emb.layer_norm.gamma, COPY),
        (["bert/embeddings/LayerNorm/beta"], emb.layer_norm.beta, COPY),
    ]
    if emb.type_embeddings is not None:
        entries.append((["bert/embeddings/token_type_embeddings"],
                        emb.type_embeddings.embeddings, COPY))
    if emb.projection is not None:
        entries += [
            (["bert/embeddings_project/kernel"], emb.projection.kernel, COPY),
            (["bert/embeddings_project/bias"], emb.projection.bias, COPY)]
    for i, block in enumerate(encoder.transformer_layers):
        p = f"bert/encoder/layer_{i}/"
        attn = p + "attention/self/"
        entries += [
            ([attn + n + "/kernel" for n in ("query", "key", "value")],
             block.attention.qkv.kernel, QKV),
            ([attn + n + "/bias" for n in ("query", "key", "value")],
             block.attention.qkv.bias, QKV),
            ([p + "attention/output/dense/kernel"],
             block.attention.output_dense.kernel, COPY),
            ([p + "attention/output/dense/bias"],
             block.attention.output_dense.bias, COPY),
            ([p + "attention/output/LayerNorm/gamma"],
             block.attention_norm.gamma, COPY),
            ([p + "attention/output/LayerNorm/beta"],
             block.attention_norm.beta, COPY),
            ([p + "intermediate/dense/kernel"], block.intermediate.kernel,
             COPY),
            ([p + "intermediate/dense/bias"], block.intermediate.bias, COPY),
            ([p + "output/dense/kernel"], block.output_dense.kernel, COPY),
            ([p + "output/dense/bias"], block.output_dense.bias, COPY),
            ([p + "output/LayerNorm/gamma"], block.output_norm.gamma, COPY),
            ([p + "output/LayerNorm/beta"], block.output_norm.beta, COPY),
        ]
    entries += [
        (["bert/pooler/dense/kernel"], encoder.pooler.kernel, COPY),
        (["bert/pooler/dense/bias"], encoder.pooler.bias, COPY),
    ]
    if masked_lm is not None:
        entries += [
            (["cls/predictions/transform/dense/kernel"],
             masked_lm.transform.kernel, COPY),
            (["cls/predictions/transform/dense/bias"],
             masked_lm.transform.bias, COPY),
            (["cls/predictions/transform/LayerNorm/gamma"],
             masked_lm.layer_norm.gamma, COPY),
            (["cls/predictions/transform/LayerNorm/beta"],
             masked_lm.layer_norm.beta, COPY),
            (["cls/predictions/output_bias"], masked_lm.output_bias, COPY),
        ]
    if discriminator is not None:
        entries += [
            ([f"discriminator_predictions/{dense}/{part}"],
             getattr(getattr(discriminator, dense), part), COPY)
            for dense in ("dense", "dense_prediction")
            for part in ("kernel", "bias")]
    if next_sentence is not None:
        # TF1 stores the NSP weights as [2, H] (used with transpose_b).
        entries += [
            (["cls/seq_relationship/output_weights"],
             next_sentence.dense.kernel, TRANSPOSE),
            (["cls/seq_relationship/output_bias"], next_sentence.dense.bias,
             COPY),
        ]
    return entries


def export_weights(encoder, masked_lm=None, next_sentence=None):
    """Our weights as a canonical dict (original TF1 names and layouts).

    Examples:
        >>> from bert_tf.models.encoder import BertEncoder
        >>> weights = export_weights(BertEncoder.from_preset("bert_tiny"))
        >>> weights["bert/encoder/layer_0/attention/self/query/kernel"].shape
        (128, 128)
    """
    weights = {}
    for names, variable, transform in model_spec(encoder, masked_lm,
                                                 next_sentence):
        value = np.asarray(variable.numpy())
        if transform == QKV:
            for name, part in zip(names, np.split(value, 3, axis=-1)):
                weights[name] = part
        elif transform == TRANSPOSE:
            weights[names[0]] = value.T
        else:
            weights[names[0]] = value
    return weights


def assign_weights(weights, encoder, masked_lm=None, next_sentence=None,
                   source="checkpoint", discriminator=None):
    """Loads a canonical weight dict into our layers, all-or-nothing.

    Every expected name must be present with the expected shape (but the
    pooler, see `OPTIONAL`); otherwise a ValueError names the variable (and
    `source`) and nothing is assigned.

    Returns:
        the canonical names kept at their initialization (absent pooler).
    """
    values, kept = [], []
    for names, variable, transform in model_spec(
            encoder, masked_lm, next_sentence, discriminator):
        missing = [n for n in names if n not in weights]
        if missing and set(names) <= OPTIONAL:
            kept += names
            continue
        if missing:
            raise ValueError(
                f"{source} has no variable {missing[0]!r}, which a "
                f"{encoder.config.num_layers}-layer encoder"
                f"{' with its pre-training heads' if masked_lm else ''} "
                "needs: the checkpoint and its config do not belong "
                "together.")
        parts = [np.asarray(weights[n]) for n in names]
        if transform == QKV:
            value = np.concatenate(parts, axis=-1)
        elif transform == TRANSPOSE:
            value = parts[0].T
        else:
            value = parts[0]
        if tuple(value.shape) != tuple(variable.shape):
            got = " + ".join(str(tuple(p.shape)) for p in parts)
            raise ValueError(
                f"{source}: variable {names[0]!r} has shape {got}, but the "
                f"config asks for {tuple(variable.shape)} (as {transform}); the "
                "checkpoint and its config do not belong together.")
        values.append((variable, value))
    for variable, value in values:
        variable.assign(value.astype(variable.dtype))
    return kept


def check_sizes(config, weights, source="checkpoint"):
    """Raises a ValueError naming `source` unless the canonical `weights`
    are the trunk an encoder of `config` (an `EncoderConfig`) builds: the
    tensors that carry each size have the shapes it implies, and the
    embeddings and layers hold as many parameters as it does. Run before
    any model is built, so a config that does not describe its weights
    (100,000 layers, a width of 10^9) costs nothing.

    Examples:
        >>> from bert_tf.config import EncoderConfig
        >>> check_sizes(EncoderConfig(num_layers=100_000), {})
        Traceback (most recent call last):
        ...
        ValueError: checkpoint has no variable 'bert/embeddings/word_embeddings', which config.json implies (num_layers = 100,000, hidden_size = 768): the checkpoint and its config do not belong together.
    """
    width = config.embedding_size or config.hidden_size
    hidden, inner = config.hidden_size, config.intermediate_size
    shapes = {"bert/embeddings/word_embeddings": (config.vocab_size, width),
              "bert/embeddings/position_embeddings": (
                  config.max_position_embeddings, width)}
    if config.type_vocab_size:
        shapes["bert/embeddings/token_type_embeddings"] = (
            config.type_vocab_size, width)
    for i in range(config.num_layers):
        layer = f"bert/encoder/layer_{i}/"
        shapes[layer + "attention/self/query/kernel"] = (hidden, hidden)
        shapes[layer + "intermediate/dense/kernel"] = (hidden, inner)
        if layer + "attention/self/query/kernel" not in weights:
            break  # the first missing layer is the one to name
    for name, shape in shapes.items():
        if name not in weights:
            raise ValueError(
                f"{source} has no variable {name!r}, which config.json "
                f"implies (num_layers = {config.num_layers:,}, hidden_size "
                f"= {hidden:,}): the checkpoint and its config do not "
                "belong together.")
        got = tuple(np.shape(weights[name]))
        if got != shape:
            raise ValueError(
                f"{source}: variable {name!r} has shape {got}, but "
                f"config.json implies {shape}; the checkpoint and its "
                "config do not belong together.")
    held = sum(int(np.size(value)) for name, value in weights.items()
               if name.startswith("bert/") and name not in OPTIONAL)
    implied = config.num_parameters(pooler=False)
    if held != implied:
        raise ValueError(
            f"{source} holds {held:,} parameters in its embeddings and "
            f"layers, where config.json implies {implied:,}: the checkpoint "
            "and its config do not belong together.")
