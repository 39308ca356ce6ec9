"""The weights an export holds: its tracked variables, and any constants
its graphs read weights as (an export's served form reads its vectors as
constants: `bert_tf.models.served`), which keep their variables' paths as
names."""

def graph_constants(export_dir, names):
    """{name: NumPy value} of the SavedModel's constants named in `names`
    (e.g. variable paths such as `transformer_layer_0/attention/qkv/
    kernel`), from its functions; a name no constant has is left out."""
    import tensorflow as tf

    from bert_tf.serving.export import read_saved_model

    wanted = set(names)
    saved = read_saved_model(export_dir)
    found = {}
    for meta_graph in saved.meta_graphs:
        for function in meta_graph.graph_def.library.function:
            for node in function.node_def:
                if node.op == "Const" and node.name in wanted and \
                        node.name not in found:
                    found[node.name] = tf.make_ndarray(
                        node.attr["value"].tensor)
    return found


def joined_kernel_parts(variables):
    """`variables` with each run of a kernel's column slices (named
    `<kernel path>_part<i>`), row slices (`<kernel path>_rows<i>`) or
    head groups' query/key/value columns (`<kernel path>_heads<i>`: each
    [in, 3 * W] of its heads' query, key and value columns; `bert_tf.
    models.split_matmuls.SplitMatmuls`) joined back into one tensor, in
    order."""
    import re

    import tensorflow as tf

    joined, run, run_key = [], [], None
    for variable in [*variables, None]:
        match = variable is not None and re.fullmatch(
            r"(.*)_(part|rows|heads)\d+(:\d+)?", variable.name)
        key = match.group(1, 2) if match else None
        if run and key != run_key:
            joined.append(_joined(run, run_key[1]))
            run = []
        if match:
            run.append(variable)
            run_key = key
        elif variable is not None:
            joined.append(variable)
    return joined


def _joined(parts, kind):
    """One kernel from its `parts` of `kind` (`joined_kernel_parts`)."""
    import tensorflow as tf

    if kind == "heads":  # [in, 3, W] each: query, key, value side by side
        rows = tf.shape(parts[0])[0]
        return tf.reshape(tf.concat([tf.reshape(part, (rows, 3, -1))
                                     for part in parts], axis=-1), (rows, -1))
    return tf.concat(parts, axis=0 if kind == "rows" else -1)


def restore_exported_weights(model, loaded, export_dir):
    """Assigns `model` (built as the export describes) the export's
    weights: each variable from the constant of its path, or else, in
    order, from the export's tracked variables (`model_variables`).
    Returns False when they do not fit the model."""
    import tensorflow as tf

    # Weights only: dropout's seed states are neither read nor saved.
    weights = [v for v in model.variables if "float" in str(v.dtype)]
    saved = joined_kernel_parts(
        [v for v in getattr(loaded, "model_variables", [])
         if v.dtype.is_floating])
    # An export keeps every weight as a variable, though its graphs read
    # the vectors as constants (`bert_tf.models.served`).
    constants = {} if len(saved) == len(weights) else graph_constants(
        export_dir, [v.path for v in weights])
    rest = [v for v in weights if v.path not in constants]
    if len(saved) != len(rest) or any(
            tuple(a.shape) != tuple(b.shape) for a, b in zip(saved, rest)) \
            or any(tuple(constants[v.path].shape) != tuple(v.shape)
                   for v in weights if v.path in constants):
        return False
    for variable in weights:
        if variable.path in constants:
            variable.assign(tf.cast(constants[variable.path],
                                    variable.dtype))
    for variable, value in zip(rest, saved):
        variable.assign(tf.cast(value, variable.dtype))
    return True
