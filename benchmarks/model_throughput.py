"""Encoder inference and pre-training step throughput (sequences/s) beside
Model Garden, keras-hub and HF transformers (PyTorch), in one run.

Shapes: BERT-Base at seq 128 / batch 8 and L4/H256 at seq 128 / batch 32.
Every pre-training step computes masked-LM logits only at the 20 masked
positions per sequence (HF gets the same treatment: the trunk and the
prediction head are applied to the gathered positions) plus NSP, and
applies an AdamW update. TF models run as `tf.function`s; ours
(`bert_tf`) and keras-hub with XLA (`jit_compile=True`), ours also without
(`bert_tf_no_xla`, the trainer's default). The first step's time (trace and
compile) is reported. "peak" is the share of this CPU's measured fp32 matmul
rate.

bf16 rows: ours and keras-hub under Keras's `mixed_bfloat16` policy, Model
Garden under tf_keras's, HF PyTorch under `torch.autocast("cpu",
torch.bfloat16)`. They run only where the CPU computes bf16 natively
(AVX512_BF16 or AMX); elsewhere oneDNN emulates it and they are skipped.
Fine-tuning rows (`finetune_steps.py`): a classifier at seq 128 with the
demo's batch of 32, through `model.fit` and through our trainer.

On a CPU with AVX2 and no AVX-512 the TensorFlow rows (ours, keras-hub,
Model Garden; one process) run with oneDNN's rewrites on, as `bert-tf
pretrain` and `bert-tf finetune` turn them on there (the first line says
so); `TF_ENABLE_ONEDNN_OPTS=0` measures TensorFlow's own default.

    make bench     # or: .venv-bench/bin/python benchmarks/model_throughput.py
"""

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from bert_tf.precision import onednn_for_training  # noqa: E402

ONEDNN_LINE = onednn_for_training()  # before TensorFlow loads

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from finetune_steps import (FINETUNE_PEERS, finetune_arrays,  # noqa: E402
                            keras_policy)

SHAPES = {"bert_base": dict(layers=12, hidden=768, heads=12, batch=8),
          "l4_h256": dict(layers=4, hidden=256, heads=4, batch=32),
          "minilm_l6": dict(layers=6, hidden=384, heads=12, batch=32)}
PRETRAIN_SHAPES = ("bert_base", "l4_h256")
FINETUNE_STEPS = 6  # per timed call; its median step is the figure
FINETUNE_SHAPES = ("l4_h256", "minilm_l6")
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

def our_steps(shape, bf16=False, jit_compile=True):
    """Our encoder forward and pre-training step, each a `tf.function` of
    the feature dict, XLA-compiled by default (also profiled by
    xla_profile.py); without AutoGraph, as the trainer traces its steps
    (`bert_tf.training.trainer`: nothing in them needs converting)."""
    from bert_tf.models.encoder import BertEncoder
    from bert_tf.models.pretrainer import BertPretrainer
    from bert_tf.training.optimization import NO_DECAY, FusedAdamW

    with keras_policy(bf16):
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

    @tf.function(jit_compile=jit_compile, autograph=False)
    def infer(x):
        return encoder(x)["sequence_output"]

    @tf.function(jit_compile=jit_compile, autograph=False)
    def train(x):
        with tf.GradientTape() as tape:
            loss = model.compute_loss(x=x, y_pred=model(x, training=True))
        variables = model.trainable_variables
        optimizer.apply_gradients(zip(tape.gradient(loss, variables),
                                      variables))
        return loss

    return infer, train


def ours(shape, data, bf16, jit_compile=True):
    infer, train = our_steps(shape, bf16, jit_compile)
    x = {k: tf.constant(v) for k, v in data.items()}
    return lambda: infer(x).numpy(), lambda: train(x).numpy()


def ours_no_xla(shape, data, bf16):
    return ours(shape, data, bf16, jit_compile=False)


# --- Model Garden (tf_keras) ---------------------------------------------------

def garden(shape, data, bf16):
    import tf_keras
    with keras_policy(bf16, tf_keras):
        return _garden(shape, data)


def _garden(shape, data):
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

def keras_hub_peer(shape, data, bf16):
    import keras
    import keras_hub

    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=VOCAB, num_layers=shape["layers"],
        num_heads=shape["heads"], hidden_dim=shape["hidden"],
        intermediate_dim=4 * shape["hidden"], max_sequence_length=512,
        dtype="mixed_bfloat16" if bf16 else "float32")
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

def hf_peer(shape, data, bf16):
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

    def autocast():
        return torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16)

    def infer():
        model.eval()
        with torch.no_grad(), autocast():
            return model.bert(input_ids=t["input_word_ids"],
                              attention_mask=t["input_mask"],
                              token_type_ids=t["input_type_ids"])[0]

    def train():
        model.train()
        with autocast():
            out = model.bert(input_ids=t["input_word_ids"],
                             attention_mask=t["input_mask"],
                             token_type_ids=t["input_type_ids"])
            gathered = out.last_hidden_state[rows, t["masked_lm_positions"]]
            logits = model.cls.predictions(gathered)
            nsp = model.cls.seq_relationship(out.pooler_output)
            loss = torch.nn.functional.cross_entropy(
                logits.reshape(-1, VOCAB).float(),
                t["masked_lm_ids"].reshape(-1)) + \
                torch.nn.functional.cross_entropy(nsp.float(),
                                                  t["next_sentence_labels"])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()

    return infer, train


PEERS = {"bert_tf": ours, "bert_tf_no_xla": ours_no_xla,
         "model_garden": garden, "keras_hub": keras_hub_peer,
         "hf_torch": hf_peer}
OURS = ("bert_tf", "bert_tf_no_xla", "bert_tf_fit", "bert_tf_fit_keras_adamw",
        "bert_tf_trainer")


def matmul_peak():
    a = tf.random.normal((2048, 2048))
    f = tf.function(lambda: tf.matmul(a, a))
    f()
    _, seconds = timed(lambda: f().numpy(), seconds=3.0)
    return 2 * 2048 ** 3 / seconds


def compare(rates, column):
    """`ours / fastest peer` at `column` of `rates` ({name: figures})."""
    ours = {k: v for k, v in rates.items() if k in OURS}
    peers = {k: v for k, v in rates.items() if k not in OURS}
    if not ours or not peers:
        return ""
    best_ours = max(ours, key=lambda k: ours[k][column])
    best_peer = max(peers, key=lambda k: peers[k][column])
    return (f"{ours[best_ours][column] / peers[best_peer][column]:.2f}x "
            f"({best_ours} / {best_peer})")


def pretraining_table(name, bf16, only, seconds, peak):
    shape = SHAPES[name]
    data = batch_arrays(shape["batch"])
    flops = encoder_flops(shape["layers"], shape["hidden"])
    print(f"\npre-training, {name} ({'bf16' if bf16 else 'fp32'}): "
          f"L={shape['layers']} H={shape['hidden']} seq {SEQ} "
          f"batch {shape['batch']}")
    print(f"  {'':<16}{'infer seq/s':>12}{'peak':>7}{'train seq/s':>13}"
          f"{'first step s':>14}")
    rates = {}
    for peer in only:
        try:
            infer, train = PEERS[peer](shape, data, bf16)
        except ImportError as e:
            print(f"  {peer:<16}skipped ({e}; use .venv-bench)")
            continue
        try:
            _, infer_s = timed(infer, seconds)
            first, train_s = timed(train, seconds)
        except Exception as e:  # a peer that cannot run this precision
            lines = [line for line in str(e).splitlines() if "Error" in line]
            print(f"  {peer:<16}failed: {(lines or [repr(e)])[-1].strip()}")
            continue
        rates[peer] = (shape["batch"] / infer_s, shape["batch"] / train_s)
        share = rates[peer][0] * flops / peak
        print(f"  {peer:<16}{rates[peer][0]:12.2f}{share:7.0%}"
              f"{rates[peer][1]:13.2f}{first:14.1f}")
    if compare(rates, 0):
        print(f"  ours / fastest peer: inference {compare(rates, 0)}, "
              f"training {compare(rates, 1)}")


def finetuning_table(name, bf16, only, seconds):
    shape = SHAPES[name]
    data = finetune_arrays(SEQ)
    print(f"\nfine-tuning a classifier, {name} ({'bf16' if bf16 else 'fp32'})"
          f": L={shape['layers']} H={shape['hidden']} seq {SEQ} "
          f"batch {len(data['labels'])}")
    print(f"  {'':<24}{'train seq/s':>13}{'first step s':>14}")
    rates = {}
    for peer in only:
        try:
            train = FINETUNE_PEERS[peer](shape, data, bf16)
        except ImportError as e:
            print(f"  {peer:<24}skipped ({e}; use .venv-bench)")
            continue
        first = train(1)
        step_s, start = [], time.perf_counter()
        while len(step_s) < 3 or time.perf_counter() - start < seconds:
            step_s.append(train(FINETUNE_STEPS))
        rates[peer] = (len(data["labels"]) / float(np.median(step_s)),)
        print(f"  {peer:<24}{rates[peer][0]:13.2f}{first:14.1f}")
    if compare(rates, 0):
        print(f"  ours / fastest peer: {compare(rates, 0)}")


def main():
    from bert_tf.precision import cpu_bf16_flags

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", nargs="*", default=list(PRETRAIN_SHAPES),
                        help="pre-training shapes")
    parser.add_argument("--only", nargs="+", default=list(PEERS))
    parser.add_argument("--finetune-shapes", nargs="*",
                        default=list(FINETUNE_SHAPES))
    parser.add_argument("--finetune-only", nargs="+",
                        default=list(FINETUNE_PEERS))
    parser.add_argument("--precisions", nargs="+", default=["fp32", "bf16"],
                        choices=["fp32", "bf16"])
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    if ONEDNN_LINE:
        print(ONEDNN_LINE)
    peak = matmul_peak()
    print(f"fp32 matmul peak measured on this CPU: {peak / 1e9:.0f} GFLOP/s")
    flags = cpu_bf16_flags()
    for precision in args.precisions:
        bf16 = precision == "bf16"
        if bf16 and not flags:
            print("\nbf16 skipped: this CPU has neither AVX512_BF16 nor AMX, "
                  "so oneDNN would emulate it")
            continue
        for name in args.shapes:
            pretraining_table(name, bf16, args.only, args.seconds, peak)
        for name in args.finetune_shapes:
            finetuning_table(name, bf16, args.finetune_only, args.seconds)


if __name__ == "__main__":
    main()
