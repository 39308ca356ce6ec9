"""FusedAdamW against Keras's own AdamW: same numbers, fewer kernels."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.training.optimization import NO_DECAY, FusedAdamW

SHAPES = {"embeddings": (50, 8), "kernel": (8, 6), "bias": (6,),
          "gamma": (6,), "beta": (6,), "other_kernel": (6, 3)}


def _variables(seed=0):
    rng = np.random.default_rng(seed)
    return [keras.Variable(rng.normal(size=shape).astype("float32"),
                           name=name) for name, shape in SHAPES.items()]


def _gradients(variables, step, rows=(3, 7, 41, 12)):
    rng = np.random.default_rng(100 + step)
    grads = [tf.constant(rng.normal(size=v.shape).astype("float32"))
             for v in variables]
    # The embedding's gradient comes as IndexedSlices.
    rows = tf.constant(rows)
    grads[0] = tf.IndexedSlices(
        tf.constant(rng.normal(size=(4, 8)).astype("float32")), rows,
        tf.constant([50, 8]))
    return grads


def _train(optimizer_cls, steps=6, skip=None, **kwargs):
    variables = _variables()
    optimizer = optimizer_cls(learning_rate=0.01, weight_decay=0.1,
                              epsilon=1e-6, **kwargs)
    optimizer.exclude_from_weight_decay(var_names=list(NO_DECAY))
    optimizer.build(variables)
    for step in range(steps):
        pairs = [(g, v) for i, (g, v) in enumerate(
            zip(_gradients(variables, step), variables)) if i != skip]
        optimizer.apply_gradients(pairs)
    return variables, optimizer


@pytest.mark.parametrize("kwargs", [
    {}, {"global_clipnorm": 0.5}, {"gradient_accumulation_steps": 2}],
    ids=["plain", "clipnorm", "accumulation"])
def test_fused_adamw_matches_keras_adamw(kwargs):
    fused, _ = _train(FusedAdamW, **kwargs)
    reference, _ = _train(keras.optimizers.AdamW, **kwargs)
    for name, a, b in zip(SHAPES, fused, reference):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=0, atol=1e-6,
                                   err_msg=name)
    assert all(np.abs(a.numpy() - s.numpy()).max() > 1e-3
               for a, s in zip(fused, _variables()))


@pytest.mark.parametrize("skip", [1, 2, 5])
def test_a_variable_without_gradient_is_left_alone(skip):
    """Variables left out of a step (a pooler under MLM-only pre-training)
    keep their value and moments, the others match Keras's AdamW."""
    fused, optimizer = _train(FusedAdamW, skip=skip)
    reference, _ = _train(keras.optimizers.AdamW, skip=skip)
    np.testing.assert_array_equal(fused[skip].numpy(),
                                  _variables()[skip].numpy())
    for a, b in zip(fused, reference):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=0, atol=1e-6)
    decay, start, size = optimizer._slices[
        optimizer._var_key(fused[skip])]
    m, v = optimizer._flat_moments[decay]
    assert not np.any(m.numpy()[start:start + size])
    assert not np.any(v.numpy()[start:start + size])


def test_repeated_embedding_rows_are_summed_before_squaring():
    """A token seen twice in a batch: the second moment takes the square of
    its summed gradient, as for a dense gradient (Keras's AdamW squares
    each IndexedSlices row before summing)."""
    def train(densify, optimizer_cls=FusedAdamW):
        variables = _variables()
        optimizer = optimizer_cls(learning_rate=0.01, weight_decay=0.1)
        for step in range(3):
            grads = _gradients(variables, step, rows=(3, 7, 3, 41))
            if densify:
                grads = [tf.convert_to_tensor(g) for g in grads]
            optimizer.apply_gradients(zip(grads, variables))
        return variables[0].numpy()

    fused = train(densify=False)
    np.testing.assert_allclose(fused, train(True, keras.optimizers.AdamW),
                               rtol=0, atol=1e-6)
    assert np.abs(fused - train(False, keras.optimizers.AdamW)).max() > 1e-3


def test_fused_adamw_under_xla_matches_eager():
    variables = _variables()
    optimizer = FusedAdamW(learning_rate=0.01, weight_decay=0.1)
    optimizer.build(variables)

    @tf.function(jit_compile=True)
    def step(grads):
        optimizer.apply_gradients(zip(grads, variables))

    for i in range(3):
        step([tf.convert_to_tensor(g) for g in _gradients(variables, i)])
    eager = _variables()
    eager_opt = FusedAdamW(learning_rate=0.01, weight_decay=0.1)
    for i in range(3):
        eager_opt.apply_gradients(zip(_gradients(eager, i), eager))
    for a, b in zip(variables, eager):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=0, atol=1e-6)


def test_fused_adamw_rejects_amsgrad_and_serializes():
    with pytest.raises(ValueError, match="amsgrad"):
        FusedAdamW(amsgrad=True)
    optimizer = FusedAdamW(learning_rate=3e-4, weight_decay=0.02)
    clone = keras.optimizers.deserialize(
        keras.optimizers.serialize(optimizer))
    assert isinstance(clone, FusedAdamW)
    assert clone.get_config()["weight_decay"] == 0.02


@pytest.mark.slow
def test_fit_save_and_load_a_pretrainer_with_fused_adamw(tmp_path):
    from conftest import TINY, pretraining_batch
    from bert_tf.models.encoder import BertEncoder
    from bert_tf.models.pretrainer import BertPretrainer

    batch = pretraining_batch()
    data = tf.data.Dataset.from_tensors(batch).repeat(8)
    # No dropout: the saved and the loaded model must step identically.
    model = BertPretrainer(BertEncoder(**TINY, hidden_dropout=0.0,
                                       attention_dropout=0.0))
    model.compile(optimizer=FusedAdamW(3e-3, weight_decay=0.01))
    losses = model.fit(data, epochs=3, verbose=0).history["loss"]
    assert losses[-1] < losses[0]
    path = tmp_path / "pretrainer.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded.optimizer, FusedAdamW)
    for a, b in zip(model.optimizer.variables, loaded.optimizer.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    # Both continue identically from the saved state.
    model.fit(data.take(1), verbose=0)
    loaded.fit(data.take(1), verbose=0)
    for a, b in zip(model.weights, loaded.weights):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=0, atol=1e-6)
