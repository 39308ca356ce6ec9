"""What every bert_tf layer shares: its initializer and a `get_config` that
is its constructor's arguments."""

import keras


def truncated_normal(stddev):
    return keras.initializers.TruncatedNormal(stddev=stddev)


def norm_policy(policy):
    """The dtype policy of a layer norm under `policy`: float32 whenever
    `policy` computes in 16 bits (bf16 or mixed precision), so that its
    statistics and the residual stream it feeds keep float32 precision;
    `policy` itself otherwise.

    Examples:
        >>> norm_policy("bfloat16"), norm_policy("mixed_bfloat16")
        ('float32', 'float32')
        >>> norm_policy("float32").name
        'float32'
    """
    policy = keras.dtype_policies.get(policy)
    if policy.compute_dtype in ("bfloat16", "float16"):
        return "float32"
    return policy


class ConfigLayer(keras.layers.Layer):
    """A Keras layer whose `get_config` echoes its constructor arguments.

    Subclasses name the arguments in `CONFIG_ARGS` and call
    `self.keep_config(locals())` in `__init__`. Each is kept in the attribute
    of the same name, except `dropout`: it is kept in `dropout_rate`, because
    `self.dropout` holds the Dropout sub-layer.
    """

    CONFIG_ARGS = ()

    @staticmethod
    def _attribute(arg):
        return "dropout_rate" if arg == "dropout" else arg

    def keep_config(self, arguments):
        """Keeps each of `CONFIG_ARGS` from `arguments` (the constructor's
        `locals()`) as an attribute."""
        for arg in self.CONFIG_ARGS:
            setattr(self, self._attribute(arg), arguments[arg])

    def get_config(self):
        config = super().get_config()
        config.update({
            arg: getattr(self, self._attribute(arg))
            for arg in self.CONFIG_ARGS})
        return config
