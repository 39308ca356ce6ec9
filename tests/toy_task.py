"""A tiny learnable sentiment task and its fine-tuning config (shared by the
fine-tuning and serving tests)."""

import numpy as np

from bert_tf import config as config_lib
from bert_tf.text.vocab import SPECIAL_TOKENS, Vocab

SPECIAL = list(SPECIAL_TOKENS)

WORDS = ["the", "film", "was", "and", "long", "short", "new", "good",
         "great", "fine", "bad", "awful", "dull"]
VOCAB = SPECIAL + WORDS
ENCODER = dict(vocab_size=len(VOCAB), hidden_size=32, num_layers=1,
               num_heads=2, intermediate_size=64, max_position_embeddings=32)


def write_toy_task(directory, seed=0):
    """A learnable sentiment toy task: the label is the adjective's."""
    rng = np.random.default_rng(seed)
    positive, negative = ["good", "great", "fine"], ["bad", "awful", "dull"]
    for split, n in (("train", 320), ("dev", 64), ("test", 64)):
        lines = ["sentence\tlabel"]
        for _ in range(n):
            good = rng.random() < 0.5
            word = rng.choice(positive if good else negative)
            filler = " ".join(rng.choice(["long", "short", "new"],
                                         int(rng.integers(0, 6))))
            lines.append(f"the film was {word} and {filler}\t"
                         f"{'positive' if good else 'negative'}")
        (directory / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    Vocab(tuple(VOCAB)).save(directory / "vocab.txt")


def toy_config(directory, **overrides):
    data = {
        "task": {"name": "local", "train_file": str(directory / "train.tsv"),
                 "validation_file": str(directory / "dev.tsv"),
                 "test_file": str(directory / "test.tsv"),
                 "text": "sentence"},
        "vocab": str(directory / "vocab.txt"),
        "encoder": dict(ENCODER),
        "seq_length": 16, "batch_size": 32, "epochs": 6,
        "optimizer": {"learning_rate": 3e-3},
        "trainer": {"model_dir": str(directory / "run"),
                    "steps_per_loop": 5, "seed": 1},
    }
    return finetune_config(data, overrides)


def finetune_config(data, overrides):
    """A validated `FinetuneConfig` from a dict and `key=value` overrides
    (dotted keys reach into sections)."""
    for key, value in overrides.items():
        if "." in key:
            data = config_lib.apply_overrides(data, [f"{key}={value}"])
        else:
            data[key] = value
    return config_lib.from_dict(config_lib.FinetuneConfig, data).validate()
