"""A tiny learnable extractive QA task in SQuAD JSON, and its config (shared
by the span QA tests)."""

import json

import numpy as np

from bert_tf.text.vocab import SPECIAL_TOKENS, Vocab
from toy_task import finetune_config

SPECIAL = list(SPECIAL_TOKENS)

NAMES = ["ann", "bob", "cleo", "dan", "eve", "finn"]
PLACES = ["paris", "rome", "oslo", "lima"]
FILLER = ["the", "film", "was", "made", "by", "in", "a", "day", "and",
          "it", "rained", "later", "who", "where", "saw", "?", "."]
VOCAB = SPECIAL + NAMES + PLACES + FILLER
ENCODER = dict(vocab_size=len(VOCAB), hidden_size=64, num_layers=2,
               num_heads=4, intermediate_size=128, max_position_embeddings=64)


def toy_examples(count, rng, version_2=True):
    """SQuAD-style examples: "who made the film?" -> the name; "where was
    the film made?" -> the place (unanswerable without one). Filler text
    before and after moves the answer about the windows."""
    examples = []
    for i in range(count):
        name, place = rng.choice(NAMES), rng.choice(PLACES)
        noise = " ".join(rng.choice(["and it rained later", "a day", ""],
                                    int(rng.integers(1, 3))))
        # Filler before the answer too, so answers move about the windows.
        lead = " ".join(rng.choice(["a day .", "it rained later ."],
                                   int(rng.integers(0, 4))))
        has_place = not version_2 or rng.random() < 0.7
        where = f" in {place}" if has_place else ""
        context = (f"{lead} The film was made by {name.title()}{where} . "
                   f"{noise}").strip()
        if rng.random() < 0.5:
            question, answer = "Who made the film?", name.title()
        else:
            question = "Where was the film made?"
            answer = place if has_place else None
        qa = {"id": f"q{i}", "question": question, "answers": [],
              "is_impossible": answer is None}
        if answer is not None:
            qa["answers"] = [{"text": answer,
                              "answer_start": context.index(answer)}]
        examples.append({"context": context, "qas": [qa]})
    return examples


def write_toy_qa(directory, seed=0, version_2=True):
    rng = np.random.default_rng(seed)
    for split, n in (("train", 384), ("dev", 64), ("test", 64)):
        data = {"version": "v2.0" if version_2 else "1.1", "data": [
            {"title": "toy", "paragraphs": toy_examples(n, rng, version_2)}]}
        (directory / f"{split}.json").write_text(json.dumps(data))
    Vocab(tuple(VOCAB)).save(directory / "vocab.txt")


def toy_qa_config(directory, **overrides):
    data = {
        "task": {"kind": "span_qa", "name": "local",
                 "train_file": str(directory / "train.json"),
                 "validation_file": str(directory / "dev.json"),
                 "test_file": str(directory / "test.json"),
                 "max_query_length": 8, "doc_stride": 8},
        "vocab": str(directory / "vocab.txt"),
        "encoder": dict(ENCODER),
        "seq_length": 32, "batch_size": 32, "epochs": 8,
        "optimizer": {"learning_rate": 2e-3},
        "trainer": {"model_dir": str(directory / "run"),
                    "steps_per_loop": 6, "seed": 1},
    }
    return finetune_config(data, overrides)
