"""Does pre-training put task signal into the encoder? A linear probe.

Freezes an encoder (our pre-trained checkpoint, and the same architecture
at random init), embeds a task's training and dev texts, fits a logistic
regression on each kind of feature and prints dev accuracy: the pooled
output, the `[CLS]` vector, the mean of the sequence output and the mean
word embedding. Fine-tuning can only gain from pre-training what these
features carry beyond random ones.

    .venv/bin/python benchmarks/transfer_probe.py --init demo_out/pretrain
"""

import argparse
import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from bert_tf import checkpoints
from bert_tf import config as config_lib  # noqa: E402
from bert_tf.models.encoder import BertEncoder  # noqa: E402
from bert_tf.tasks.classification.data import (load_classification,  # noqa: E402
                                               classification_dataset)
from bert_tf.text.preprocessor import BertPreprocessor  # noqa: E402
from bert_tf.text.vocab import read_vocab  # noqa: E402

FEATURES = ("pooled", "cls", "mean", "word_embedding")


def features(encoder, dataset):
    """{feature kind: [examples, H]} and the labels, over a dataset."""
    out, labels = {k: [] for k in FEATURES}, []
    forward = tf.function(lambda x: encoder(x, training=False))
    for x, y in dataset:
        outputs = forward(x)
        mask = tf.cast(x["input_mask"], tf.float32)[..., None]
        count = tf.reduce_sum(mask, 1)
        words = encoder.token_embedding(x["input_word_ids"])
        out["pooled"].append(outputs["pooled_output"])
        out["cls"].append(outputs["sequence_output"][:, 0])
        out["mean"].append(
            tf.reduce_sum(outputs["sequence_output"] * mask, 1) / count)
        out["word_embedding"].append(tf.reduce_sum(words * mask, 1) / count)
        labels.append(y)
    return ({k: np.concatenate(v) for k, v in out.items()},
            np.concatenate(labels))


def probe(train_x, train_y, dev_x, dev_y, classes, epochs=100):
    """Dev accuracy of a softmax regression on standardized features."""
    mean, std = train_x.mean(0), train_x.std(0) + 1e-6
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((train_x.shape[1],)),
                              keras.layers.Dense(classes)])
    model.compile(keras.optimizers.Adam(1e-2),
                  keras.losses.SparseCategoricalCrossentropy(
                      from_logits=True), metrics=["accuracy"])
    model.fit((train_x - mean) / std, train_y, batch_size=1024,
              epochs=epochs, verbose=0)
    return model.evaluate((dev_x - mean) / std, dev_y, verbose=0)[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--init", required=True, type=Path,
                        help="a pre-training model_dir (config.yaml, "
                             "vocab.txt, checkpoints/)")
    parser.add_argument("--task", default="sample:rt_sentiment")
    parser.add_argument("--seq-length", type=int, default=64)
    args = parser.parse_args()
    tf.get_logger().setLevel("ERROR")  # retracing notes for the last batch
    cfg = config_lib.load_config(args.init / checkpoints.CONFIG_FILE)
    vocab = read_vocab(args.init / checkpoints.VOCAB_FILE)
    task = load_classification(args.task)
    preprocessor = BertPreprocessor(vocab, args.seq_length)
    splits = {split: classification_dataset(task, split, preprocessor, 256)
              for split in ("train", "validation")}
    print(f"{args.task}: linear probe dev accuracy on frozen features")
    print(f"  {'features':<16}{'random init':>12}{'pre-trained':>13}")
    results = {}
    for name in ("random init", "pre-trained"):
        keras.utils.set_random_seed(0)
        encoder = BertEncoder.from_config_object(cfg.encoder)
        if name == "pre-trained":
            checkpoints.restore_model(checkpoints.checkpoint_prefix(
                args.init / "checkpoints", (checkpoints.WEIGHTS_PREFIX,)),
                encoder)
        train, train_y = features(encoder, splits["train"])
        dev, dev_y = features(encoder, splits["validation"])
        results[name] = {k: probe(train[k], train_y, dev[k], dev_y,
                                  task.num_classes) for k in FEATURES}
    for kind in FEATURES:
        print(f"  {kind:<16}{results['random init'][kind]:12.1%}"
              f"{results['pre-trained'][kind]:13.1%}")


if __name__ == "__main__":
    main()
