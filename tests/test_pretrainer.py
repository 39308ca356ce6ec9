import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.models.encoder import BertEncoder
from bert_tf.models.pretrainer import BertPretrainer
from conftest import pretraining_batch


def _dataset(steps=8, **kwargs):
    batches = [pretraining_batch(seed=i, **kwargs) for i in range(2)]
    stacked = {k: np.stack([b[k] for b in batches]) for k in batches[0]}
    return tf.data.Dataset.from_tensor_slices(stacked).repeat(steps // 2)


@pytest.mark.slow
def test_fit_in_a_notebook(tiny_config):
    model = BertPretrainer(BertEncoder(**tiny_config))
    model.compile(optimizer=keras.optimizers.Adam(3e-3))
    history = model.fit(_dataset(steps=40), epochs=3, verbose=0).history
    assert set(history) == {"loss", "mlm_loss", "mlm_accuracy", "nsp_loss",
                            "nsp_accuracy"}
    assert history["loss"][-1] < history["loss"][0] * 0.8
    evaluation = model.evaluate(_dataset(steps=2), verbose=0,
                                return_dict=True)
    assert 0.0 <= evaluation["mlm_accuracy"] <= 1.0


def test_losses_match_a_hand_computation(tiny_config):
    model = BertPretrainer(BertEncoder(**tiny_config))
    batch = pretraining_batch()
    batch["masked_lm_weights"][0, 2] = 0.0  # a padding slot
    out = model(batch)
    loss = float(model.compute_loss(x=batch, y_pred=out))

    def xent(logits, labels):
        logits = logits - logits.max(-1, keepdims=True)
        logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        return -np.take_along_axis(logp, labels[..., None], -1)[..., 0]

    w = batch["masked_lm_weights"]
    mlm = (xent(out["mlm_logits"].numpy(), batch["masked_lm_ids"]) * w).sum(
    ) / (w.sum() + 1e-5)
    nsp = xent(out["nsp_logits"].numpy(),
               batch["next_sentence_labels"]).mean()
    assert loss == pytest.approx(mlm + nsp, rel=1e-5)
    # The accuracies: weighted matches of the argmax (the padding slot
    # does not count).
    hits = out["mlm_logits"].numpy().argmax(-1) == batch["masked_lm_ids"]
    assert float(model.mlm_accuracy.result()) == pytest.approx(
        (hits * w).sum() / w.sum(), rel=1e-6)
    assert float(model.nsp_accuracy.result()) == pytest.approx(np.mean(
        out["nsp_logits"].numpy().argmax(-1) ==
        batch["next_sentence_labels"].reshape(-1)), rel=1e-6)


@pytest.mark.slow
def test_mlm_output_is_tied_to_the_token_embedding(tiny_config):
    encoder = BertEncoder(**tiny_config)
    model = BertPretrainer(encoder)
    assert model.masked_lm.token_embedding is encoder.token_embedding
    ids = [id(w) for w in model.weights]
    assert len(ids) == len(set(ids))
    assert model.count_params() == encoder.count_params() + (
        32 * 32 + 32 + 2 * 32 + 120 + 32 * 2 + 2)
    # Training the MLM moves the shared table.
    before = encoder.token_embedding.embeddings.numpy().copy()
    model.compile(optimizer=keras.optimizers.SGD(0.1))
    model.fit(_dataset(steps=2), verbose=0)
    assert np.abs(encoder.token_embedding.embeddings.numpy() -
                  before).max() > 0


@pytest.mark.slow
def test_no_nsp_and_left_to_right_ablations(tiny_config):
    no_nsp = BertPretrainer(BertEncoder(**tiny_config), nsp=False)
    assert set(no_nsp(pretraining_batch())) == {"mlm_logits"}
    no_nsp.compile(optimizer="adam")
    assert "nsp_loss" not in no_nsp.fit(_dataset(steps=2),
                                        verbose=0).history
    ltr = BertPretrainer(BertEncoder(**tiny_config, attention="causal"),
                         nsp=False)
    batch = pretraining_batch()
    later = {k: v.copy() for k, v in batch.items()}
    later["input_word_ids"][:, 10:] = 7
    # Predictions before position 10 cannot see the change.
    batch["masked_lm_positions"][:] = [[1, 2, 3]]
    later["masked_lm_positions"][:] = [[1, 2, 3]]
    np.testing.assert_allclose(ltr(batch)["mlm_logits"],
                               ltr(later)["mlm_logits"], atol=1e-5)


def test_keras_file_round_trip(tiny_config, tmp_path):
    model = BertPretrainer(BertEncoder(**tiny_config), nsp=True)
    model.save(tmp_path / "pretrainer.keras")
    loaded = keras.saving.load_model(tmp_path / "pretrainer.keras")
    batch = pretraining_batch()
    for key in ("mlm_logits", "nsp_logits"):
        np.testing.assert_array_equal(model(batch)[key], loaded(batch)[key])
    assert loaded.masked_lm.token_embedding is loaded.encoder.token_embedding


@pytest.mark.parametrize("policy, jit", [("mixed_bfloat16", False),
                                          ("float32", True),
                                          ("mixed_bfloat16", True)])
@pytest.mark.slow
def test_mixed_precision_and_xla_train(tiny_config, policy, jit):
    keras.mixed_precision.set_global_policy(policy)
    try:
        model = BertPretrainer(BertEncoder(**tiny_config))
    finally:
        keras.mixed_precision.set_global_policy("float32")
    out = model(pretraining_batch())
    assert out["mlm_logits"].dtype == tf.float32
    assert model.encoder.token_embedding.embeddings.dtype == "float32"
    model.compile(optimizer=keras.optimizers.Adam(1e-3), jit_compile=jit)
    history = model.fit(_dataset(steps=6), epochs=2, verbose=0).history
    assert np.isfinite(history["loss"]).all()
    assert history["loss"][-1] < history["loss"][0]
