"""Served graphs that read a model's weights as constants of the graph.

A served request that reads variables pays for each weight on every call:
a handle, a read, and a hand-off through each loop and branch around it
(about six nodes a weight in a chunked, row-classed encoder: 490 of the
1,164 nodes a MiniLM sentiment request executed). Constants cost one node
and let Grappler treat the weights as constant (oneDNN keeps a matmul's
reordered weights; layer norms fuse). Keras's stateless scope maps each
variable to a constant made inside the traced function, so the same
layers and code run; the constants are stored once in the SavedModel,
however many graph copies call the function.
"""

import re

import keras
import tensorflow as tf


def with_constant_weights(variables, function, deferred=False):
    """`function` as a `tf.function` whose traces read `variables` (Keras
    variables) as constants, named by the variables' paths.

    Args:
        variables: the Keras variables to read as constants.
        function: a function of tensors that reads them (e.g. runs the
            layers that own them).
        deferred: the constants hold one repeated value, not the weights
            (a few bytes each, where TensorFlow copies a traced function
            into the library of every graph that calls it, nested control
            flow included: a BERT-Base export traced with its weights
            peaked at 14 GB); `fill_constants` writes the weights into
            the SavedModel written from the traces. For exports only.

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
        if deferred:
            constants = [tf.constant(0, v.dtype, v.shape, name=v.path)
                         for v in variables]
        else:
            with tf.init_scope():  # their values, read eagerly
                values = [v.numpy() for v in variables]
            # Named as the variables: the graph reads as the model does.
            constants = [tf.constant(value, name=v.path)
                         for v, value in zip(variables, values)]
        with keras.StatelessScope(state_mapping=list(zip(variables,
                                                         constants))):
            return function(*args)

    return tf.function(traced, autograph=False)


def fill_constants(saved_model_pb, variables):
    """Writes the values of `variables` into the constants of their names
    in the functions of the SavedModel file `saved_model_pb` (traced with
    `deferred=True`). Returns how many constants it filled."""
    from tensorflow.core.protobuf import saved_model_pb2

    values = {v.path: v for v in variables}
    renamed = re.compile("^(" + "|".join(map(re.escape, values)) + ")_[0-9]+$")
    saved = saved_model_pb2.SavedModel()
    with tf.io.gfile.GFile(saved_model_pb, "rb") as f:  # any file system
        saved.ParseFromString(f.read())
    filled = 0
    for meta_graph in saved.meta_graphs:
        for function in meta_graph.graph_def.library.function:
            for node in function.node_def:
                if node.op != "Const":
                    continue
                if node.name in values:
                    node.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(
                        values[node.name].numpy()))
                    filled += 1
                elif values and renamed.match(node.name):
                    raise ValueError(
                        f"{saved_model_pb}: constant {node.name} was renamed "
                        "while traced, so its weights cannot be filled in.")
    # Removed first: not every file system truncates on "wb" (ram://).
    tf.io.gfile.remove(saved_model_pb)
    with tf.io.gfile.GFile(saved_model_pb, "wb") as f:
        f.write(saved.SerializeToString())
    return filled
