"""Encoder inference and pre-training step throughput (sequences/s) beside
Model Garden, keras-hub and HF transformers (PyTorch), in one run.

Shapes: BERT-Base at seq 128 / batch 8 and L4/H256 at seq 128 / batch 32.
Every pre-training step computes masked-LM logits only at the 20 masked
positions per sequence (HF gets the same treatment: the trunk and the
prediction head are applied to the gathered positions) plus NSP, and
applies an AdamW update. TF models run as `tf.function`s; ours and
keras-hub with XLA (`jit_compile=True`), whose first step (compile) time is
reported. "peak" is the share of this CPU's measured fp32 matmul rate.

    make bench     # or: .venv-bench/bin/python benchmarks/model_throughput.py
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

SHAPES = {"bert_base": dict(layers=12, hidden=768, heads=12, batch=8),
          "l4_h256": dict(layers=4, hidden=256, heads=4, batch=32)}
SEQ, VOCAB, PREDICTIONS = 128, 30522, 20


def batch_arrays(batch, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1000, VOCAB, (batch, SEQ)).astype("int32")
    positions = np.sort(np.stack([rng.choice(np.arange(1, SEQ), PREDICTIONS,
                                             replace=False)
                                  for _ in range(batch)]), 1).astype("int32")
    return {
        "input_word_ids": ids, "input_mask": np.ones_like(ids),
        "input_type_ids": np.concatenate(
            [np.zeros((batch, SEQ // 2), "int32"),
             np.ones((batch, SEQ // 2), "int32")], 1),
        "masked_lm_positions": positions,
        "masked_lm_ids": np.take_along_axis(ids, positions, 1),
        "masked_lm_weights": np.ones((batch, PREDICTIONS), "float32"),
        "next_sentence_labels": rng.integers(0, 2, batch).astype("int32"),
    }


def encoder_flops(layers, hidden):
    """Forward FLOPs of one sequence through the encoder."""
    inner = 4 * hidden
    per_layer = 2 * SEQ * (4 * hidden * hidden + 2 * hidden * inner) + \
        4 * SEQ * SEQ * hidden
    return layers * per_layer


def timed(fn, seconds=20.0, min_calls=3):
    start = time.perf_counter()
    fn()
    first = time.perf_counter() - start
    calls, start = 0, time.perf_counter()
    while calls < min_calls or time.perf_counter() - start < seconds:
        fn()
        calls += 1
    return first, (time.perf_counter() - start) / calls


# --- bert_tf -------------------------------------------------------------------

def our_steps(shape):
    """Our XLA-compiled encoder forward and pre-training step, each a
    `tf.function` of the feature dict (also profiled by xla_profile.py)."""
    from bert_tf.models.encoder import BertEncoder
    from bert_tf.models.pretrainer import BertPretrainer
    from bert_tf.training.optimization import NO_DECAY, FusedAdamW

    encoder = BertEncoder(num_layers=shape["layers"],
                          hidden_size=shape["hidden"],
                          num_heads=shape["heads"],
                          intermediate_size=4 * shape["hidden"])
    model = BertPretrainer(encoder)
    optimizer = FusedAdamW(1e-4, weight_decay=0.01)  # what `pretrain` uses
    optimizer.exclude_from_weight_decay(var_names=list(NO_DECAY))
    # Built up front, as the trainer and `model.fit` do (a lazy build inside
    # the first step would trace it twice).
    optimizer.build(model.trainable_variables)

    @tf.function(jit_compile=True)
    def infer(x):
        return encoder(x)["sequence_output"]

    @tf.function(jit_compile=True)
    def train(x):
        with tf.GradientTape() as tape:
            loss = model.compute_loss(x=x, y_pred=model(x, training=True))
        variables = model.trainable_variables
        optimizer.apply_gradients(zip(tape.gradient(loss, variables),
                                      variables))
        return loss

    return infer, train


def ours(shape, data):
    infer, train = our_steps(shape)
    x = {k: tf.constant(v) for k, v in data.items()}
    return lambda: infer(x).numpy(), lambda: train(x).numpy()


# --- Model Garden (tf_keras) ---------------------------------------------------

def garden(shape, data):
    import tf_keras
    from official.nlp.modeling import models, networks

    encoder = networks.BertEncoderV2(
        vocab_size=VOCAB, hidden_size=shape["hidden"],
        num_layers=shape["layers"], num_attention_heads=shape["heads"],
        inner_dim=4 * shape["hidden"], max_sequence_length=512,
        type_vocab_size=2)
    model = models.BertPretrainerV2(
        encoder_network=encoder,
        classification_heads=[
            __import__("official.nlp.modeling.layers", fromlist=["x"])
            .ClassificationHead(inner_dim=shape["hidden"], num_classes=2,
                                name="next_sentence")])
    optimizer = tf_keras.optimizers.experimental.AdamW(1e-4,
                                                       weight_decay=0.01)
    x = {k: tf.constant(v) for k, v in data.items()}
    inputs = {k: x[k] for k in ("input_word_ids", "input_mask",
                                "input_type_ids", "masked_lm_positions")}

    @tf.function
    def infer():
        return encoder({k: x[k] for k in ("input_word_ids", "input_mask",
                                          "input_type_ids")})[
            "sequence_output"]

    @tf.function
    def train():
        with tf.GradientTape() as tape:
            out = model(inputs, training=True)
            mlm = tf_keras.losses.sparse_categorical_crossentropy(
                x["masked_lm_ids"], out["mlm_logits"], from_logits=True)
            nsp = tf_keras.losses.sparse_categorical_crossentropy(
                x["next_sentence_labels"], out["next_sentence"],
                from_logits=True)
            loss = tf.reduce_mean(mlm) + tf.reduce_mean(nsp)
        variables = model.trainable_variables
        optimizer.apply_gradients(zip(tape.gradient(loss, variables),
                                      variables))
        return loss

    return lambda: infer().numpy(), lambda: train().numpy()


# --- keras-hub ------------------------------------------------------------------

def keras_hub_peer(shape, data):
    import keras
    import keras_hub

    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=VOCAB, num_layers=shape["layers"],
        num_heads=shape["heads"], hidden_dim=shape["hidden"],
        intermediate_dim=4 * shape["hidden"], max_sequence_length=512)
    model = keras_hub.models.BertMaskedLM(backbone, preprocessor=None)
    model.compile(optimizer=keras.optimizers.AdamW(1e-4, weight_decay=0.01),
                  loss=keras.losses.SparseCategoricalCrossentropy(
                      from_logits=True), jit_compile=True)
    x = {"token_ids": data["input_word_ids"],
         "padding_mask": data["input_mask"].astype(bool),
         "segment_ids": data["input_type_ids"],
         "mask_positions": data["masked_lm_positions"]}
    backbone_x = {k: x[k] for k in ("token_ids", "padding_mask",
                                    "segment_ids")}
    infer = tf.function(lambda: backbone(backbone_x)["sequence_output"],
                        jit_compile=True)
    return (lambda: infer().numpy(),
            lambda: model.train_on_batch(x, data["masked_lm_ids"]))


# --- HF transformers (PyTorch) ---------------------------------------------------

def hf_peer(shape, data):
    import torch
    from transformers import BertConfig, BertForPreTraining

    torch.set_num_threads(os.cpu_count())
    config = BertConfig(vocab_size=VOCAB, hidden_size=shape["hidden"],
                        num_hidden_layers=shape["layers"],
                        num_attention_heads=shape["heads"],
                        intermediate_size=4 * shape["hidden"])
    model = BertForPreTraining(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4,
                                  weight_decay=0.01)
    t = {k: torch.tensor(v).long() for k, v in data.items()
         if k != "masked_lm_weights"}
    rows = torch.arange(len(data["input_word_ids"]))[:, None]

    def infer():
        model.eval()
        with torch.no_grad():
            return model.bert(input_ids=t["input_word_ids"],
                              attention_mask=t["input_mask"],
                              token_type_ids=t["input_type_ids"])[0]

    def train():
        model.train()
        out = model.bert(input_ids=t["input_word_ids"],
                         attention_mask=t["input_mask"],
                         token_type_ids=t["input_type_ids"])
        gathered = out.last_hidden_state[rows, t["masked_lm_positions"]]
        logits = model.cls.predictions(gathered)
        nsp = model.cls.seq_relationship(out.pooler_output)
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, VOCAB), t["masked_lm_ids"].reshape(-1)) + \
            torch.nn.functional.cross_entropy(nsp,
                                              t["next_sentence_labels"])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()

    return infer, train


PEERS = {"bert_tf": ours, "model_garden": garden, "keras_hub": keras_hub_peer,
         "hf_torch": hf_peer}


def matmul_peak():
    a = tf.random.normal((2048, 2048))
    f = tf.function(lambda: tf.matmul(a, a))
    f()
    _, seconds = timed(lambda: f().numpy(), seconds=3.0)
    return 2 * 2048 ** 3 / seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES))
    parser.add_argument("--only", nargs="+", default=list(PEERS))
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    peak = matmul_peak()
    print(f"fp32 matmul peak measured on this CPU: {peak / 1e9:.0f} GFLOP/s")
    for name in args.shapes:
        shape = SHAPES[name]
        data = batch_arrays(shape["batch"])
        flops = encoder_flops(shape["layers"], shape["hidden"])
        print(f"\n{name}: L={shape['layers']} H={shape['hidden']} seq {SEQ} "
              f"batch {shape['batch']}")
        print(f"  {'':<14}{'infer seq/s':>12}{'peak':>7}{'train seq/s':>13}"
              f"{'first step s':>14}")
        rates = {}
        for peer in args.only:
            try:
                infer, train = PEERS[peer](shape, data)
            except ImportError as e:
                print(f"  {peer:<14}skipped ({e}; use .venv-bench)")
                continue
            _, infer_s = timed(infer, args.seconds)
            first, train_s = timed(train, args.seconds)
            rates[peer] = (shape["batch"] / infer_s, shape["batch"] / train_s)
            share = rates[peer][0] * flops / peak
            print(f"  {peer:<14}{rates[peer][0]:12.2f}{share:7.0%}"
                  f"{rates[peer][1]:13.2f}{first:14.1f}")
        peers = {k: v for k, v in rates.items() if k != "bert_tf"}
        if peers and "bert_tf" in rates:
            best_infer = max(peers, key=lambda k: peers[k][0])
            best_train = max(peers, key=lambda k: peers[k][1])
            print(f"  bert_tf / fastest peer: inference "
                  f"{rates['bert_tf'][0] / peers[best_infer][0]:.2f}x "
                  f"({best_infer}), training "
                  f"{rates['bert_tf'][1] / peers[best_train][1]:.2f}x "
                  f"({best_train})")


if __name__ == "__main__":
    main()
