"""Every private Keras (and TF) API bert_tf relies on, in one place.

Keras 3 has no public way to build a compiled model's losses and metrics
from a dataset spec outside `fit`, nor to replace an optimizer's update of
all variables at once; these thin wrappers name what we use, so a Keras
upgrade breaks here (and in `tests/test_keras_compat.py`, which checks
each of them) rather than deep inside a training run.

Tested with Keras `TESTED_KERAS`. `FusedAdamW` also overrides two private
optimizer hooks, listed in `OPTIMIZER_HOOKS` and checked by the test.
"""

import tensorflow as tf

TESTED_KERAS = "3.15.1"
# Private `keras.optimizers.Optimizer` methods FusedAdamW overrides:
# the per-step update of all variables, and the separate weight-decay pass
# (fused into that update).
OPTIMIZER_HOOKS = ("_backend_update_step", "_apply_weight_decay")


def build_compiled(model, data_spec):
    """Builds a compiled model's losses and metrics from a dataset's
    element spec (Keras builds them lazily, which inside `strategy.run`
    would create variables in a replica context)."""
    model._symbolic_build(data_batch=data_spec)


def uses_weight_decay(optimizer, variable):
    """Whether the optimizer's exclusion rules leave `variable` decayed."""
    return optimizer._use_weight_decay(variable)


def variable_key(optimizer, variable):
    """The optimizer's key of a variable (stable across its copies)."""
    return optimizer._var_key(variable)


def all_reduce_gradients(optimizer, grads_and_vars):
    """Sums gradients over replicas as the optimizer's own step would."""
    return optimizer._all_reduce_sum_gradients(grads_and_vars)


def merge_call(function, optimizer, *args):
    """Runs `function(strategy, *args)` once in cross-replica context
    (directly when already there), as Keras's TF optimizer does."""
    return tf.__internal__.distribute.interim.maybe_merge_call(
        function, optimizer._distribution_strategy, *args)


def is_trackable(value):
    """Whether `tf.train.Checkpoint` can hold `value` (a distributed input
    iterator of some strategies cannot)."""
    return isinstance(value, tf.__internal__.tracking.Trackable)


def replace_sublayer(parent, attribute, layer):
    """Sets `parent.<attribute>` to `layer` in a built layer, and drops
    the layer it held from `parent`'s tracked layers (and so its variables
    from `parent.variables`): Keras has no public way to swap a sub-layer
    once its owner is built and its state locked."""
    old = getattr(parent, attribute)
    locked = parent._tracker.locked
    parent._tracker.unlock()
    try:
        if old in parent._layers:
            parent._layers.remove(old)
        setattr(parent, attribute, layer)
    finally:
        if locked:
            parent._tracker.lock()
