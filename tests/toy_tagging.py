"""A tiny learnable NER task in CoNLL format, and its config (shared by the
tagging tests)."""

import numpy as np

from bert_tf.text.vocab import SPECIAL_TOKENS, Vocab
from toy_task import finetune_config

SPECIAL = list(SPECIAL_TOKENS)

PEOPLE = ["ann", "bob", "cleo", "dan"]
PLACES = ["paris", "rome", "oslo", "lima"]
OTHER = ["met", "in", "and", "went", "to", "the", "a", "day", "."]
VOCAB = SPECIAL + PEOPLE + PLACES + OTHER + ["##s"]
ENCODER = dict(vocab_size=len(VOCAB), hidden_size=64, num_layers=2,
               num_heads=4, intermediate_size=128, max_position_embeddings=64)


def toy_sentence(rng):
    """Words and IOB2 tags: people (one or two words) and places."""
    words, tags = [], []
    for _ in range(int(rng.integers(1, 4))):
        if rng.random() < 0.5:
            names = rng.choice(PEOPLE, int(rng.integers(1, 3)))
            words += [n.title() for n in names]
            tags += ["B-PER"] + ["I-PER"] * (len(names) - 1)
        else:
            words.append(rng.choice(PLACES).title())
            tags.append("B-LOC")
        filler = rng.choice(OTHER, int(rng.integers(1, 3))).tolist()
        words += filler
        tags += ["O"] * len(filler)
    return words, tags


def write_toy_tagging(directory, seed=0):
    rng = np.random.default_rng(seed)
    for split, n in (("train", 320), ("dev", 64), ("test", 64)):
        lines = ["-DOCSTART- -X- O O", ""]
        for _ in range(n):
            for word, tag in zip(*toy_sentence(rng)):
                lines.append(f"{word} X {tag}")
            lines.append("")
        (directory / f"{split}.txt").write_text("\n".join(lines))
    Vocab(tuple(VOCAB)).save(directory / "vocab.txt")


def toy_tagging_config(directory, **overrides):
    data = {
        "task": {"kind": "tagging", "name": "local",
                 "train_file": str(directory / "train.txt"),
                 "validation_file": str(directory / "dev.txt"),
                 "test_file": str(directory / "test.txt"),
                 "doc_stride": 8},
        "vocab": str(directory / "vocab.txt"),
        "encoder": dict(ENCODER),
        "seq_length": 16, "batch_size": 32, "epochs": 6,
        "optimizer": {"learning_rate": 2e-3},
        "trainer": {"model_dir": str(directory / "run"),
                    "steps_per_loop": 10, "seed": 1},
    }
    return finetune_config(data, overrides)
