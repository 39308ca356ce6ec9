"""A tiny learnable multiple-choice task in JSONL (and the SWAG CSV
layout), and its config (shared by the multiple-choice tests)."""

import csv
import json

import numpy as np

from bert_tf.text.vocab import SPECIAL_TOKENS, Vocab
from toy_task import finetune_config

NAMES = ["ann", "bob", "cleo", "dan"]
ANIMALS = ["dog", "cat", "bird", "fish", "horse", "cow"]
FILLER = ["has", "a", "the", "is", "happy", "sleeps", "today", "."]
VOCAB = list(SPECIAL_TOKENS) + NAMES + ANIMALS + FILLER
ENCODER = dict(vocab_size=len(VOCAB), hidden_size=64, num_layers=2,
               num_heads=4, intermediate_size=128, max_position_embeddings=64)


def toy_choices(count, rng, num_choices=4):
    """(context, choices, label): "ann has a dog ." -> the choice about
    the same animal ("the dog sleeps ."), the others about other ones."""
    examples = []
    for _ in range(count):
        animals = rng.choice(ANIMALS, num_choices, replace=False)
        label = int(rng.integers(num_choices))
        context = f"{rng.choice(NAMES)} has a {animals[label]} ."
        choices = [f"the {a} {rng.choice(['is happy', 'sleeps today'])} ."
                   for a in animals]
        examples.append((context, choices, label))
    return examples


def write_toy_choices(directory, seed=0):
    rng = np.random.default_rng(seed)
    for split, n in (("train", 320), ("dev", 64), ("test", 64)):
        with open(directory / f"{split}.jsonl", "w") as f:
            for context, choices, label in toy_choices(n, rng):
                f.write(json.dumps({"context": context, "choices": choices,
                                    "label": label}) + "\n")
    Vocab(tuple(VOCAB)).save(directory / "vocab.txt")


def write_swag_csv(path, examples):
    """`examples` in the original SWAG CSV layout (sent2 = "")."""
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        count = len(examples[0][1])
        writer.writerow(["video-id", "fold-ind", "startphrase", "sent1",
                         "sent2", "gold-source"] +
                        [f"ending{i}" for i in range(count)] + ["label"])
        for i, (context, choices, label) in enumerate(examples):
            writer.writerow([f"v{i}", i, context, context, "", "gold"] +
                            list(choices) + [label])


def toy_choices_config(directory, **overrides):
    data = {
        "task": {"kind": "multiple_choice", "name": "local",
                 "train_file": str(directory / "train.jsonl"),
                 "validation_file": str(directory / "dev.jsonl"),
                 "test_file": str(directory / "test.jsonl")},
        "vocab": str(directory / "vocab.txt"),
        "encoder": dict(ENCODER),
        "seq_length": 16, "batch_size": 16, "epochs": 12,
        "optimizer": {"learning_rate": 2e-3},
        "trainer": {"model_dir": str(directory / "run"),
                    "steps_per_loop": 10, "seed": 1},
    }
    return finetune_config(data, overrides)
