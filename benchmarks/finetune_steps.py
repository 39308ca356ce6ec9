"""Fine-tuning steps for `model_throughput.py`: a sentence classifier at
seq 128 with the demo's batch (32), one AdamW step on cross-entropy, timed
per step. Each builder takes the shape, the arrays and `bf16` and returns
`train(steps)`, which trains that many steps and returns the seconds per
step. A `fit` call costs about a second of its own (its epoch iterator and
callbacks), which a notebook pays once per call, not per step: `fit` rows
time the steps inside one call, from batch end to batch end.

- `bert_tf_fit`: `BertClassifier` through `model.fit` (Keras 3 compiles the
  train step with XLA where it can, `jit_compile="auto"`), as a notebook
  user fine-tunes;
- `bert_tf_fit_keras_adamw`: the same through `model.fit` with Keras's own
  AdamW instead of our `FusedAdamW` (what the optimizer's fused update
  saves, the first step included);
- `bert_tf_trainer`: the same model through our `Trainer`, as
  `bert-tf finetune` runs it (its default: no XLA);
- `keras_hub`: `BertTextClassifier` (no preprocessor) through `fit`;
- `hf_torch`: `BertForSequenceClassification` with `torch.optim.AdamW`,
  under `torch.autocast("cpu", torch.bfloat16)` for bf16.
"""

import contextlib
import os
import tempfile
import time

import numpy as np
import tensorflow as tf

FINETUNE_BATCH = 32
VOCAB = 30522


def finetune_arrays(seq, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1000, VOCAB, (FINETUNE_BATCH, seq)).astype("int32")
    return {"input_word_ids": ids, "input_mask": np.ones_like(ids),
            "input_type_ids": np.zeros_like(ids),
            "labels": rng.integers(0, 2, FINETUNE_BATCH).astype("int32")}


@contextlib.contextmanager
def keras_policy(bf16, keras_module=None):
    """The global dtype policy of `keras_module` (default Keras 3; tf_keras
    for Model Garden) set for what is built inside."""
    if keras_module is None:
        import keras as keras_module
    precision = keras_module.mixed_precision
    previous = precision.global_policy()
    precision.set_global_policy("mixed_bfloat16" if bf16 else "float32")
    try:
        yield
    finally:
        precision.set_global_policy(previous)


def _our_classifier(shape, optimizer=None):
    import keras
    from bert_tf.models.encoder import BertEncoder
    from bert_tf.tasks.classification.model import BertClassifier

    model = BertClassifier(BertEncoder(
        num_layers=shape["layers"], hidden_size=shape["hidden"],
        num_heads=shape["heads"], intermediate_size=4 * shape["hidden"]), 2)
    model.compile(optimizer=optimizer,
                  loss=keras.losses.SparseCategoricalCrossentropy(
                      from_logits=True))
    return model


def _optimizer(fused=True):
    import keras

    from bert_tf.training.optimization import NO_DECAY, FusedAdamW
    optimizer = (FusedAdamW if fused else keras.optimizers.AdamW)(
        2e-5, weight_decay=0.01)
    optimizer.exclude_from_weight_decay(var_names=list(NO_DECAY))
    return optimizer


def _repeated(data):
    x = {k: data[k] for k in ("input_word_ids", "input_mask",
                              "input_type_ids")}
    return tf.data.Dataset.from_tensors((x, data["labels"])).repeat()


def _timed_fit(model, dataset):
    """`train(steps)` through `model.fit`: the median time between batch
    ends within one call (the first step alone: the call's time)."""
    import keras

    ends = []
    clock = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: ends.append(
            time.perf_counter()))

    def train(steps):
        ends.clear()
        start = time.perf_counter()
        model.fit(dataset, steps_per_epoch=steps, epochs=1, verbose=0,
                  shuffle=False,
                  callbacks=[clock])
        if steps == 1:
            return time.perf_counter() - start
        return float(np.median(np.diff(ends)))

    return train


def _timed_calls(step, per_call=1):
    """`train(steps)` of a function that trains `per_call` steps a call."""
    def train(steps):
        calls = max(1, steps // per_call)
        start = time.perf_counter()
        for _ in range(calls):
            step()
        return (time.perf_counter() - start) / (calls * per_call)
    return train


def bert_tf_fit(shape, data, bf16):
    with keras_policy(bf16):
        model = _our_classifier(shape, _optimizer())
    return _timed_fit(model, _repeated(data))


def bert_tf_fit_keras_adamw(shape, data, bf16):
    with keras_policy(bf16):
        model = _our_classifier(shape, _optimizer(fused=False))
    return _timed_fit(model, _repeated(data))


def bert_tf_trainer(shape, data, bf16):
    from bert_tf.config_runs import TrainerConfig
    from bert_tf.training.trainer import Trainer

    model_dir = tempfile.mkdtemp(prefix="finetune_steps_")
    with keras_policy(bf16):
        trainer = Trainer(
            tf.distribute.get_strategy(), lambda: _our_classifier(shape),
            _optimizer, lambda context: _repeated(data),
            TrainerConfig(model_dir=model_dir), log=lambda line: None)

    def train(steps):
        # The loop `Trainer.train` calls between its log lines.
        start = time.perf_counter()
        trainer._train_loop(trainer.iterator, tf.constant(steps)).numpy()
        return (time.perf_counter() - start) / steps

    return train


def keras_hub(shape, data, bf16):
    import keras
    import keras_hub as hub

    backbone = hub.models.BertBackbone(
        vocabulary_size=VOCAB, num_layers=shape["layers"],
        num_heads=shape["heads"], hidden_dim=shape["hidden"],
        intermediate_dim=4 * shape["hidden"], max_sequence_length=512,
        dtype="mixed_bfloat16" if bf16 else "float32")
    model = hub.models.BertTextClassifier(backbone, num_classes=2,
                                          preprocessor=None)
    model.compile(optimizer=keras.optimizers.AdamW(2e-5, weight_decay=0.01),
                  loss=keras.losses.SparseCategoricalCrossentropy(
                      from_logits=True))
    x = {"token_ids": data["input_word_ids"],
         "padding_mask": data["input_mask"].astype(bool),
         "segment_ids": data["input_type_ids"]}
    return _timed_fit(model, tf.data.Dataset.from_tensors(
        (x, data["labels"])).repeat())


def hf_torch(shape, data, bf16):
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    torch.set_num_threads(os.cpu_count())
    model = BertForSequenceClassification(BertConfig(
        vocab_size=VOCAB, hidden_size=shape["hidden"],
        num_hidden_layers=shape["layers"],
        num_attention_heads=shape["heads"],
        intermediate_size=4 * shape["hidden"], num_labels=2))
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5,
                                  weight_decay=0.01)
    t = {k: torch.tensor(v).long() for k, v in data.items()}

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(input_ids=t["input_word_ids"],
                         attention_mask=t["input_mask"],
                         token_type_ids=t["input_type_ids"],
                         labels=t["labels"]).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()

    return _timed_calls(step)


FINETUNE_PEERS = {"bert_tf_fit": bert_tf_fit,
                  "bert_tf_fit_keras_adamw": bert_tf_fit_keras_adamw,
                  "bert_tf_trainer": bert_tf_trainer,
                  "keras_hub": keras_hub, "hf_torch": hf_torch}
