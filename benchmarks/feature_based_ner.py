"""The paper's Table 7 in miniature: the feature-based approach on WNUT-16.

all-MiniLM-L6-v2 stays frozen. Each word's hidden states (at its first
piece; `bert_tf.tasks.embeddings.extract.FeatureExtractor`) are computed once, and
a small two-layer BiLSTM tagger is trained on each of the paper's feature
choices: the embeddings, the second-to-last and the last hidden layer, a
learned weighted sum of the last four, their concatenation, and a learned
weighted sum of all layers. Beside them, fine-tuning the whole model
(`configs/finetune/wnut_ner_minilm.yaml`, shortened by the flags below).
Prints dev and test entity F1 (seqeval's default mode) with the paper's
CoNLL-2003 dev F1 (BERT-Base) for each row, and writes a bar plot.

    python benchmarks/feature_based_ner.py --out table7.png
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from bert_tf import checkpoints, finetune  # noqa: E402
from bert_tf.samples import readers as wnut  # noqa: E402
from bert_tf import samples  # noqa: E402
from bert_tf.tasks.embeddings.extract import FeatureExtractor  # noqa: E402
from bert_tf.tasks.tagging import data as conll  # noqa: E402
from bert_tf.tasks.tagging.metrics import entity_scores  # noqa: E402

CONFIG = os.path.join(os.path.dirname(__file__), "..", "configs",
                      "finetune", "wnut_ner_minilm.yaml")

# (row, which hidden states (0 = embeddings), how they are combined, the
# paper's Table 7 CoNLL-2003 dev F1 for BERT-Base).
ROWS = [
    ("Embeddings", [0], "single", 91.0),
    ("Second-to-last hidden", [-2], "single", 95.6),
    ("Last hidden", [-1], "single", 94.9),
    ("Weighted sum last four hidden", [-4, -3, -2, -1], "weighted", 95.9),
    ("Concat last four hidden", [-4, -3, -2, -1], "concat", 96.1),
    ("Weighted sum all layers", None, "weighted", 95.5),
]
PAPER_FINETUNE = 96.4


@keras.saving.register_keras_serializable(package="bench")
class ScalarMix(keras.layers.Layer):
    """gamma * sum_j softmax(w)_j * state_j over [B, N, S, H] (ELMo's
    learned layer weighting)."""

    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-2],),
                                 initializer="zeros", name="w")
        self.gamma = self.add_weight(shape=(), initializer="ones",
                                     name="gamma")

    def call(self, states):
        mix = keras.ops.softmax(self.w)
        return self.gamma * keras.ops.einsum("s,bnsh->bnh", mix, states)


def extract(sentences, batch_size):
    """Per sentence: float16 [words, L + 1, H] (MiniLM, frozen)."""
    pretrained = checkpoints.load_encoder(f"hf:{samples.fetch('minilm')}")
    extractor = FeatureExtractor(pretrained.encoder, pretrained.vocab, "all")
    records = extractor([" ".join(words) for words, _ in sentences],
                        batch_size, progress=True)
    for (words, _), record in zip(sentences, records):
        assert record["words"] == words, (words, record["words"])
    return [r["features"].astype(np.float16) for r in records]


def batches(states, tags, layers, batch_size, shuffle, seed=0):
    """(states [B, N, S, H], mask [B, N]) -> tag ids [B, N] batches."""
    order = np.random.default_rng(seed).permutation(len(states)) if shuffle \
        else np.arange(len(states))
    for start in range(0, len(order), batch_size):
        chosen = order[start:start + batch_size]
        width = max(max(len(states[i]) for i in chosen), 1)
        x = np.zeros((len(chosen), width, len(layers),
                      states[0].shape[-1]), np.float32)
        y = np.zeros((len(chosen), width), np.int32)
        mask = np.zeros((len(chosen), width), np.float32)
        for row, i in enumerate(chosen):
            n = len(states[i])
            x[row, :n] = states[i][:, layers]
            y[row, :n] = tags[i]
            mask[row, :n] = 1
        yield x, mask, y


def bilstm_tagger(num_states, hidden, combine, num_labels, units):
    states = keras.Input((None, num_states, hidden))
    mask = keras.Input((None,))
    if combine == "weighted":
        x = ScalarMix()(states)
    else:
        x = keras.layers.Reshape((-1, num_states * hidden))(states)
    x = keras.layers.Dropout(0.2)(x)
    keep = keras.ops.cast(mask, "bool")
    for _ in range(2):
        x = keras.layers.Bidirectional(keras.layers.LSTM(
            units, return_sequences=True))(x, mask=keep)
    logits = keras.layers.Dense(num_labels)(keras.layers.Dropout(0.2)(x))
    return keras.Model([states, mask], logits)


def spans(tag_rows, labels):
    return {(i, kind, first, last) for i, row in enumerate(tag_rows)
            for kind, first, last in wnut.entity_spans(
                [labels[t] for t in row])}


def train_row(splits, labels, layers, combine, args):
    train_states, train_tags = splits["train"]
    model = bilstm_tagger(len(layers), train_states[0].shape[-1], combine,
                          len(labels), args.units)
    optimizer = keras.optimizers.Adam(args.lr)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function(reduce_retracing=True)
    def step(x, mask, y):
        with tf.GradientTape() as tape:
            logits = model([x, mask], training=True)
            loss = loss_fn(y, logits, sample_weight=mask)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    @tf.function(reduce_retracing=True)
    def predict(x, mask):
        return tf.argmax(model([x, mask], training=False), -1)

    def evaluate(split):
        states, tags = splits[split]
        predicted = []
        for x, mask, _ in batches(states, tags, layers, 128, False):
            out = predict(x, mask).numpy()
            predicted += [out[r, :int(mask[r].sum())] for r in range(len(x))]
        gold = spans(tags, labels)
        return 100 * entity_scores(gold, spans(predicted, labels))["f1"]

    best = (-1.0, 0.0, 0)
    for epoch in range(args.epochs):
        for x, mask, y in batches(train_states, train_tags, layers,
                                  args.batch_size, True, seed=epoch):
            step(x, mask, y)
        dev = evaluate("dev")
        if dev > best[0]:
            best = (dev, evaluate("test"), epoch + 1)
    return best


def finetuned_row(args):
    cfg = finetune.load(CONFIG, [
        f"init=hf:{samples.fetch('minilm')}",
        f"trainer.model_dir={args.finetune_dir}", f"epochs={args.ft_epochs}",
        f"batch_size={args.ft_batch_size}",
        f"optimizer.learning_rate={args.ft_lr}"])
    result = finetune.run(cfg, log=lambda *a: None)
    return 100 * result.best["value"], 100 * result.test["f1"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="table7_wnut.png")
    parser.add_argument("--epochs", type=int, default=10,
                        help="BiLSTM epochs (the best dev epoch is kept)")
    parser.add_argument("--units", type=int, default=64,
                        help="LSTM units per direction")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--ft-epochs", type=float, default=3)
    parser.add_argument("--ft-batch-size", type=int, default=16)
    parser.add_argument("--ft-lr", type=float, default=3e-4)
    parser.add_argument("--finetune-dir", default="runs/table7_finetune")
    args = parser.parse_args()
    started = time.time()
    tf.get_logger().setLevel("ERROR")  # one retrace per batch width is fine
    keras.utils.set_random_seed(0)
    data = conll.load_wnut_ner()
    labels = sorted({t for _, tags in data.split("train") for t in tags},
                    key=lambda t: (t != "O", t[2:], t))
    index = {t: i for i, t in enumerate(labels)}
    names = {"train": "train", "dev": "validation", "test": "test"}
    sentences = {k: data.split(v) for k, v in names.items()}
    all_states = extract([s for k in names for s in sentences[k]], 32)
    splits, at = {}, 0
    for k in names:
        n = len(sentences[k])
        splits[k] = (all_states[at:at + n],
                     [np.array([index.get(t, 0) for t in tags], np.int32)
                      for _, tags in sentences[k]])
        at += n
    print(f"features of {sum(len(s) for s in all_states):,} words "
          f"({all_states[0].shape[1]} states of {all_states[0].shape[2]}) "
          f"in {time.time() - started:.0f} s")
    num_states = all_states[0].shape[1]
    results = []
    for name, layers, combine, paper in ROWS:
        chosen = [i % num_states for i in (layers or range(num_states))]
        start = time.time()
        dev, test, epoch = train_row(splits, labels, chosen, combine, args)
        results.append((name, dev, test, paper))
        print(f"{name:<32} dev {dev:5.1f} test {test:5.1f} (epoch {epoch}, "
              f"{time.time() - start:.0f} s)", flush=True)
    start = time.time()
    dev, test = finetuned_row(args)
    results.append(("Fine-tuning (all layers)", dev, test, PAPER_FINETUNE))
    print(f"fine-tuning: dev {dev:.1f} test {test:.1f} "
          f"({time.time() - start:.0f} s)")

    print(f"\nWNUT-16, all-MiniLM-L6-v2 frozen + 2-layer BiLSTM "
          f"({args.units} units), entity F1; the paper's CoNLL-2003 dev F1 "
          f"(BERT-Base, Table 7) beside")
    print(f"{'features':<32} {'dev F1':>7} {'test F1':>8} {'paper':>7}")
    for name, dev, test, paper in results:
        print(f"{name:<32} {dev:>7.1f} {test:>8.1f} {paper:>7.1f}")
    by = {name: (dev, test) for name, dev, test, _ in results}
    concat, embed = by["Concat last four hidden"], by["Embeddings"]
    tuned = by["Fine-tuning (all layers)"]
    best = max(results[:-1], key=lambda r: r[1])[0]
    print(f"\nconcat last four vs fine-tuning: {concat[0] - tuned[0]:+.1f} "
          f"dev F1 (paper {96.1 - PAPER_FINETUNE:+.1f}); embeddings vs "
          f"concat last four: {embed[0] - concat[0]:+.1f} (paper "
          f"{91.0 - 96.1:+.1f}); best feature row on dev: {best} (paper: "
          "Concat last four hidden)")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot written")
    else:
        figure, axis = plt.subplots(figsize=(10, 4))
        positions = np.arange(len(results))
        axis.bar(positions - 0.2, [r[1] for r in results], 0.4,
                 label="ours: WNUT-16 dev F1 (MiniLM)")
        axis.bar(positions + 0.2, [r[3] for r in results], 0.4,
                 label="paper: CoNLL-2003 dev F1 (BERT-Base)")
        axis.set_xticks(positions, [r[0] for r in results], rotation=20,
                        ha="right", fontsize=8)
        axis.set(ylabel="entity F1", ylim=(0, 118),
                 title="Table 7 in miniature: feature-based vs fine-tuning")
        axis.legend(fontsize=8, loc="upper center", ncol=2)
        figure.tight_layout()
        figure.savefig(args.out, dpi=100)
        print(f"wrote {args.out}")
    print(f"{(time.time() - started) / 60:.1f} minutes")


if __name__ == "__main__":
    main()
