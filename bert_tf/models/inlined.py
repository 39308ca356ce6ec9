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

import keras
import tensorflow as tf


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
