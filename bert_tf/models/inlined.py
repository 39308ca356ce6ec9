"""Served graphs that read a model's weights as constants of the graph.

A served request that reads variables pays for each weight on every call:
a handle, a read, and a hand-off through each loop and branch around it
(about six nodes a weight in a chunked, row-classed encoder: 490 of the
1,164 nodes a MiniLM sentiment request executed). Constants cost one node
and let Grappler treat the weights as constant (oneDNN keeps a matmul's
reordered weights; layer norms fuse). Keras's stateless scope maps each
variable to a constant made inside the traced function, so the same
layers and code run. For graphs run in the process that traced them:
TensorFlow's runtime copies a function's constants with each copy of its
function library and at each call site it inlines (a loaded BERT-Base
SavedModel held 18 GB), so exports keep their weights as variables.
"""

import contextlib
import threading

import keras
import tensorflow as tf

from bert_tf.layers.folding import values_read_as

_vectors = threading.local()


def with_constant_weights(variables, function):
    """`function` as a `tf.function` whose traces read `variables` (Keras
    variables) as constants, named by the variables' paths.

    Args:
        variables: the Keras variables to read as constants.
        function: a function of tensors that reads them (e.g. runs the
            layers that own them).

    Examples:
        >>> dense = keras.layers.Dense(2)
        >>> dense.build((None, 3))
        >>> x = tf.ones((1, 3))
        >>> served = with_constant_weights(dense.variables, dense)
        >>> bool(tf.reduce_all(served(x) == dense(x)))
        True
        >>> ops = {n.type for n in served.get_concrete_function(x).graph.get_operations()}
        >>> "ReadVariableOp" in ops
        False
    """
    variables = list(variables)

    def traced(*args):
        with tf.init_scope():  # their values, read eagerly
            values = [v.numpy() for v in variables]
        # Named as the variables: the graph reads as the model does.
        constants = [tf.constant(value, name=v.path)
                     for v, value in zip(variables, values)]
        with keras.StatelessScope(state_mapping=list(zip(variables,
                                                         constants))):
            return function(*args)

    return tf.function(traced, autograph=False)


@contextlib.contextmanager
def vectors_as_constants(variables):
    """Within it, traced layers read the float weights of rank 0 or 1
    among `variables` (biases, layer-norm gammas and betas) as constants
    of the graph being traced, named by the variables' paths; the others
    stay variables. What a served graph does: a variable costs a request
    a handle, a read and a hand-off into each function and branch around
    it (five nodes in an fp32 export), a constant one node, and the
    vectors are small enough to copy with each branch and function
    library (which made whole-model constants cost 18 GB for BERT-Base).
    Eagerly, or inside another such scope, it does nothing.

    Examples:
        >>> dense = keras.layers.Dense(2, name="head")
        >>> dense.build((None, 3))
        >>> _ = dense.bias.assign([0.5, -0.5])  # all-zero: a variable
        >>> @tf.function
        ... def served(x):
        ...     with vectors_as_constants(dense.variables):
        ...         return dense(x)
        >>> x = tf.ones((1, 3))
        >>> graph = served.get_concrete_function(x).graph
        >>> sorted(n.name for n in graph.as_graph_def().node
        ...        if n.op == "Const" and "bias" in n.name)
        ['head/bias']
        >>> bool(tf.reduce_all(served(x) == dense(x)))
        True
    """
    if tf.executing_eagerly() or getattr(_vectors, "active", False):
        yield
        return
    variables = [v for v in variables if len(v.shape) <= 1 and
                 "float" in str(v.dtype)]
    with tf.init_scope():  # their values, read eagerly
        values = [v.numpy() for v in variables]
    read = {id(v): value for v, value in zip(variables, values)}
    # An all-zero bias as a constant is folded away by Grappler, and its
    # matmul then loses the fusion with bias and GELU that oneDNN runs (a
    # random BERT-Base's batch-1 p50 rose from 48 to 56 ms): such vectors
    # stay variables.
    kept = [i for i, value in enumerate(values) if value.any()]
    variables = [variables[i] for i in kept]
    values = [values[i] for i in kept]
    # At the graph's top scope, so that they are named as the variables
    # (`bert_tf.serving.weights.graph_constants` finds them by path).
    with tf.compat.v1.get_default_graph().name_scope(""):
        constants = [tf.constant(value, name=v.path)
                     for v, value in zip(variables, values)]
    _vectors.active = True
    try:
        with keras.StatelessScope(state_mapping=list(zip(
                variables, constants))), values_read_as(read):
            yield
    finally:
        _vectors.active = False
