"""`bert_tf.layers.dropout.Dropout`: 16-bit draws drop the rate's share of
units, keep the expectation, pass gradients through the kept units only,
and follow the seed generator as Keras's layer does."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from bert_tf.layers.dropout import Dropout

SETTINGS = settings(max_examples=20, deadline=None, derandomize=True)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("rate", [0.1, 0.5])
def test_drops_the_rate_and_keeps_the_mean(dtype, rate):
    layer = Dropout(rate, seed=3, dtype=dtype)
    out = np.asarray(tf.cast(layer(tf.ones([512, 2048], dtype),
                                   training=True), tf.float32))
    dropped = float(np.mean(out == 0))
    # 1M units: the binomial's standard deviation is at most 5e-4.
    assert abs(dropped - rate) < 3e-3
    kept = np.unique(out[out != 0])
    assert len(kept) == 1
    # The kept units' scale is 1/(1 - rate) in the layer's dtype.
    assert kept[0] == pytest.approx(1 / (1 - rate), rel=4e-3)
    assert float(out.mean()) == pytest.approx(1.0, abs=1e-2)


def test_gradient_flows_through_the_kept_units_only():
    layer = Dropout(0.3, seed=5)
    x = tf.random.normal([64, 33])
    with tf.GradientTape() as tape:
        tape.watch(x)
        out = layer(x, training=True)
        total = tf.reduce_sum(out)
    grad = tape.gradient(total, x).numpy()
    kept = out.numpy() != 0
    np.testing.assert_allclose(grad[~kept], 0)
    np.testing.assert_allclose(grad[kept], 1 / (1 - 0.3), rtol=1e-4)
    np.testing.assert_allclose(out.numpy()[kept], x.numpy()[kept] * grad[kept],
                               rtol=1e-6)


def test_the_seed_generator_decides_and_advances():
    x = tf.ones([40, 50])
    first, second = Dropout(0.5, seed=7), Dropout(0.5, seed=7)
    a, b = first(x, training=True), second(x, training=True)
    np.testing.assert_array_equal(a, b)  # same seed, same draw
    assert not np.array_equal(a, first(x, training=True))  # advanced
    # The state the trainer checkpoints (`Trainer._state`).
    assert [v.path.rsplit("/", 1)[-1] for v in first.variables] == [
        "seed_generator_state"]


def test_identity_outside_training_and_at_rate_zero_zeros_at_one():
    x = tf.random.normal([3, 5])
    np.testing.assert_array_equal(Dropout(0.4)(x, training=False), x)
    np.testing.assert_array_equal(Dropout(0.0)(x, training=True), x)
    np.testing.assert_array_equal(Dropout(1.0)(x, training=True),
                                  np.zeros([3, 5]))


def test_noise_shape_is_refused_and_config_round_trips():
    with pytest.raises(ValueError, match="noise_shape is not supported"):
        Dropout(0.1, noise_shape=(None, 1))
    layer = Dropout(0.2, seed=4, name="drop")
    again = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(layer))
    assert type(again) is Dropout
    assert (again.rate, again.seed, again.name) == (0.2, 4, "drop")


def test_runs_under_xla_with_a_dynamic_batch():
    layer = Dropout(0.25, seed=2)
    step = tf.function(lambda x: layer(x, training=True), jit_compile=True,
                       input_signature=[tf.TensorSpec([None, 301])])
    out = step(tf.ones([100, 301])).numpy()
    assert abs(float(np.mean(out == 0)) - 0.25) < 0.01


@SETTINGS
@given(st.lists(st.integers(1, 7), min_size=1, max_size=4),
       st.floats(0.01, 0.9))
def test_every_unit_is_dropped_or_scaled(shape, rate):
    x = tf.random.stateless_normal(shape, seed=[1, 2])
    out = Dropout(rate, seed=1)(x, training=True).numpy()
    assert out.shape == tuple(shape)
    kept = out != 0
    threshold = round(rate * 65536)
    np.testing.assert_allclose(out[kept], x.numpy()[kept] * 65536 /
                               (65536 - threshold), rtol=1e-6)
