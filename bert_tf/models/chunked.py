"""Many rows through a model a bounded number at a time, inside the graph.

A long text becomes as many windows as its length needs, and running all
of them through the encoder at once holds every window's activations
(attention scores alone are heads x L x L floats per window): memory grows
with the text. `map_in_chunks` runs the rows in steps of a fixed number of
tokens in a `tf.while_loop` and keeps only each step's small outputs
(logits), so peak memory depends on the step, not on the text.
"""

import tensorflow as tf

# Tokens (rows x row length) per step: 64 windows of 128 tokens, whose
# activations in MiniLM-L6 peak at about 220 MB (docs/guides/serving.md);
# every short request, and a batch of 32 short texts, is one step.
TOKENS_PER_STEP = 8192


def rows_per_step(length, tokens_per_step=TOKENS_PER_STEP):
    """Rows of `length` tokens (a scalar tensor) in one step: at least 1."""
    return tf.maximum(tokens_per_step // tf.maximum(length, 1), 1)


def map_in_chunks(function, inputs, outputs,
                  tokens_per_step=TOKENS_PER_STEP):
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
        rows = tf.shape(leaves[0])[0]
        step = rows_per_step(tf.size(leaves[0]) // tf.maximum(rows, 1),
                             tokens_per_step)
        # At least one step: an empty batch still gives outputs of its
        # shape.
        steps = tf.maximum((rows + step - 1) // step, 1)

        def body(index, arrays):
            start = index * step
            chunk = tf.nest.pack_sequence_as(
                inputs, [leaf[start:start + step] for leaf in leaves])
            return index + 1, [array.write(index, value) for array, value
                               in zip(arrays, run(chunk))]

        arrays = [tf.TensorArray(tf.float32, size=steps, infer_shape=False)
                  for _ in outputs]
        # One step at a time: parallel iterations would hold several
        # steps' activations at once, which is what the loop is for
        # avoiding.
        _, arrays = tf.while_loop(lambda index, _: index < steps, body,
                                  (tf.constant(0), arrays),
                                  parallel_iterations=1)
        return [array.concat() for array in arrays]

    # A request that fits one step (most) skips the loop and what it
    # costs per request: a hand-off of each input and weight it reads.
    values = tf.cond(tf.size(leaves[0]) <= tokens_per_step,
                     lambda: run(inputs), loop)
    results = {}
    for value, name in zip(values, outputs):
        results[name] = value
        if shapes[name].rank is not None:
            results[name].set_shape([None] + shapes[name][1:])
    return results
