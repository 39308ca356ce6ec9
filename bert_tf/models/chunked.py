"""Many rows through a model a bounded number at a time, inside the graph.

A long text becomes as many windows as its length needs, and running all
of them through the encoder at once holds every window's activations
(attention scores alone are heads x L x L floats per window): memory grows
with the text. `map_in_chunks` runs the rows in steps of a fixed number of
tokens in a `tf.while_loop` and keeps only each step's small outputs
(logits), so peak memory depends on the step, not on the text.
"""

import tensorflow as tf

from bert_tf.layers.transformer import TokenRows

# Tokens (rows x row length) per step: 64 windows of 128 tokens, whose
# activations in MiniLM-L6 peak at about 220 MB (docs/guides/serving.md);
# every short request, and a batch of 32 short texts, is one step.
TOKENS_PER_STEP = 8192

# The token-row counts (the rows a served encoder multiplies: its kept
# tokens, `TokenRows`) at which oneDNN's fp32 matmuls change their blocked
# weight layout on AVX-512 (AB16b64a below 7 rows and from 81, AB16b32a in
# between; 2 EPYC cores, TF 2.20). A kernel that keeps its reordered
# weights (TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1) keeps one layout only.
ROW_CLASS_BOUNDS = (7, 81)


def row_class(rows, bounds=ROW_CLASS_BOUNDS):
    """The index of the class of `rows` token rows (an int32 scalar
    tensor) among the classes `bounds` separate: class i holds
    `bounds[i - 1] <= rows < bounds[i]`.

    Examples:
        >>> [int(row_class(tf.constant(n))) for n in (6, 7, 80, 81)]
        [0, 1, 1, 2]
    """
    return tf.raw_ops.Bucketize(input=rows, boundaries=[float(b) for b in
                                                        bounds])


def rows_per_step(length, tokens_per_step=TOKENS_PER_STEP):
    """Rows of `length` tokens (a scalar tensor) in one step: at least 1."""
    return tf.maximum(tokens_per_step // tf.maximum(length, 1), 1)


def map_in_chunks(function, inputs, outputs,
                  tokens_per_step=TOKENS_PER_STEP, row_classes=()):
    """`function(inputs)` computed a chunk of rows at a time.

    Args:
        function: inputs -> {name: [n, ...] tensor}; its rows must not
            depend on each other (an encoder's windows, a batch's texts).
        inputs: a nest (e.g. a dict) of tensors that all have the same
            number of rows; a row of the first holds its tokens (a [n, L]
            row has L, a [n, C, L] row C x L).
        outputs: the names of `function`'s outputs to keep; each comes back
            as float32 with all rows.
        tokens_per_step: tokens per step (at least one row).
        row_classes: the row-class bounds of the served model `function`
            runs (`bert_tf.models.served.ServedModel`; `row_classes_of`), if
            any: a request that fits one step then runs in the graph copy
            of its class, and a longer one in steps of equal size (the
            last one overlaps the one before), so each copy's matmuls see
            one row class, with one branch around the encoder instead of
            two.

    Returns:
        {name: float32 tensor} for `outputs`, equal to `function(inputs)`'s.

    Examples:
        >>> x = {"a": tf.reshape(tf.range(12), [6, 2])}
        >>> out = map_in_chunks(lambda c: {"s": tf.reduce_sum(c["a"], 1)},
        ...                     x, ["s"], tokens_per_step=4)
        >>> out["s"].numpy().tolist()
        [1.0, 5.0, 9.0, 13.0, 17.0, 21.0]
    """
    leaves = tf.nest.flatten(inputs)
    shapes = {}  # each output's static shape, as the function traced it

    def run(chunk):
        result = function(chunk)
        shapes.update((name, result[name].shape) for name in outputs)
        return [tf.cast(result[name], tf.float32) for name in outputs]

    def loop():
        return _in_steps(run, inputs, len(outputs), tokens_per_step,
                         full_steps=bool(row_classes))

    # A request that fits one step (most) skips the loop and what it
    # costs per request: a hand-off of each input and weight it reads.
    tokens = tf.size(leaves[0])
    fits = tokens <= tokens_per_step
    if not row_classes:
        values = tf.cond(fits, lambda: run(inputs), loop)
    else:
        values = tf.switch_case(
            tf.where(fits, row_class(_multiplied_rows(inputs, tokens),
                                     row_classes),
                     len(row_classes) + 1),
            [lambda: run(inputs)] * (len(row_classes) + 1) + [loop])
    results = {}
    for value, name in zip(values, outputs):
        results[name] = value
        if shapes[name].rank is not None:
            results[name].set_shape([None] + shapes[name][1:])
    return results


def _multiplied_rows(inputs, tokens):
    """The token rows a served encoder's matmuls take for `inputs`: the
    kept tokens of its `input_mask` (`TokenRows`), else `tokens`."""
    if isinstance(inputs, dict) and "input_mask" in inputs:
        return tf.reduce_sum(tf.cast(
            TokenRows.kept_tokens(inputs["input_mask"]), tf.int32))
    return tokens


def _in_steps(run, inputs, count, tokens_per_step, full_steps):
    """`run` (chunk -> `count` float32 tensors) over `inputs` a step of
    rows at a time in a `tf.while_loop`, the results concatenated; with
    `full_steps`, every step has the same rows (the last one overlaps the
    step before, its overlap dropped)."""
    leaves = tf.nest.flatten(inputs)
    rows = tf.shape(leaves[0])[0]
    step = rows_per_step(tf.size(leaves[0]) // tf.maximum(rows, 1),
                         tokens_per_step)
    # At least one step: an empty batch still gives outputs of its shape.
    steps = tf.maximum((rows + step - 1) // step, 1)

    def body(index, arrays):
        start = index * step
        if full_steps:  # every step full: one row class
            start = tf.minimum(start, rows - step)
        chunk = tf.nest.pack_sequence_as(
            inputs, [leaf[start:start + step] for leaf in leaves])
        new = index * step - start  # rows the step before computed
        return index + 1, [array.write(index, value[new:]) for
                           array, value in zip(arrays, run(chunk))]

    arrays = [tf.TensorArray(tf.float32, size=steps, infer_shape=False)
              for _ in range(count)]
    # One step at a time: parallel iterations would hold several steps'
    # activations at once, which is what the loop is for avoiding.
    _, arrays = tf.while_loop(lambda index, _: index < steps, body,
                              (tf.constant(0), arrays),
                              parallel_iterations=1)
    return [array.concat() for array in arrays]


def row_classes_of(model):
    """The row-class bounds `model` asks `map_in_chunks` for: those of a
    served model (`bert_tf.models.served.ServedModel`), () for a Keras
    model."""
    return tuple(getattr(model, "row_classes", ()))
