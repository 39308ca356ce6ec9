"""The private Keras APIs of `keras_compat.py` still exist with
the signatures we call them with; a Keras upgrade that changes them fails
here, naming the API and the Keras version we tested."""

import inspect

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import keras_compat
from bert_tf.training.optimization import FusedAdamW

PRIVATE = [
    (keras.Model, "_symbolic_build", ("data_batch",)),
    (keras.optimizers.AdamW, "_use_weight_decay", ("variable",)),
    (keras.optimizers.AdamW, "_var_key", ("variable",)),
    (keras.optimizers.AdamW, "_all_reduce_sum_gradients",
     ("grads_and_vars",)),
    (keras.optimizers.AdamW, "_backend_update_step",
     ("grads", "trainable_variables", "learning_rate")),
    (keras.optimizers.AdamW, "_apply_weight_decay", ("variables",)),
]


@pytest.mark.parametrize("owner,name,parameters", PRIVATE,
                         ids=[f"{o.__name__}.{n}" for o, n, _ in PRIVATE])
def test_private_keras_api_is_there(owner, name, parameters):
    where = (f"{owner.__name__}.{name} (bert_tf/keras_compat.py, "
             f"tested with Keras {keras_compat.TESTED_KERAS}, this is Keras "
             f"{keras.__version__})")
    assert hasattr(owner, name), f"{where} is gone"
    found = tuple(inspect.signature(getattr(owner, name)).parameters)[1:]
    assert set(parameters) <= set(found), \
        f"{where} now takes {found}, we pass {parameters}"


def test_every_overridden_hook_is_checked():
    checked = {name for _, name, _ in PRIVATE}
    assert set(keras_compat.OPTIMIZER_HOOKS) <= checked
    for hook in keras_compat.OPTIMIZER_HOOKS:
        assert hook in vars(FusedAdamW)


def test_tf_internals_are_there():
    assert tf.__internal__.distribute.interim.maybe_merge_call
    dataset = tf.data.Dataset.range(3)
    assert keras_compat.is_trackable(iter(dataset))
    assert not keras_compat.is_trackable(object())


def test_wrappers_behave_on_a_real_optimizer_and_model():
    kernel = keras.Variable(np.ones((2, 2), "float32"), name="kernel")
    bias = keras.Variable(np.ones((2,), "float32"), name="bias")
    optimizer = keras.optimizers.AdamW(0.1, weight_decay=0.1)
    optimizer.exclude_from_weight_decay(var_names=["bias"])
    optimizer.build([kernel, bias])
    assert keras_compat.uses_weight_decay(optimizer, kernel)
    assert not keras_compat.uses_weight_decay(optimizer, bias)
    assert keras_compat.variable_key(optimizer, kernel) != \
        keras_compat.variable_key(optimizer, bias)

    inputs = keras.Input((3,))
    model = keras.Model(inputs, keras.layers.Dense(2)(inputs))
    model.compile(optimizer="sgd", loss="mse", metrics=["mae"])
    spec = (tf.TensorSpec((None, 3)), tf.TensorSpec((None, 2)))
    keras_compat.build_compiled(model, spec)
    assert model.compiled_loss is not None or model.compiled
    assert [m.name for m in model.metrics][:1] == ["loss"]


def test_replace_sublayer_drops_the_old_layer_and_its_variables():
    from bert_tf.layers.transformer import TransformerBlock

    block = TransformerBlock(hidden_size=8, num_heads=2, intermediate_size=16)
    block(np.ones((1, 3, 8), "float32"), np.ones((1, 3), "int32"))
    old = block.intermediate
    count = len(block.weights)
    new = keras.layers.Dense(16, name="intermediate")
    new.build((None, 8))
    keras_compat.replace_sublayer(block, "intermediate", new)
    assert block.intermediate is new and len(block.weights) == count
    assert not any(w is old.kernel for w in block.weights)
    assert block._tracker.locked  # as Keras left it
