"""Writes the cased NER parity fixture: a tiny random cased
`BertForTokenClassification` saved by transformers, and what HF's
`token-classification` pipeline answers with `aggregation_strategy`
`first` and `simple` on sentences written for it (punctuation beside
entities, quotes, brackets, hyphens, apostrophes, emoji, CJK).

Run in the bench environment (torch + transformers), never in tests:

    .venv-bench/bin/python scripts/make_hf_ner_fixture.py

Writes tests/fixtures/hf_tasks/bert_ner_cased/ (config.json with HF's
own label order, model.safetensors, vocab.txt, the tokenizer's files and
expected.json). Every weight is random, layer norms included.
"""

import json
import sys
from pathlib import Path

import torch
import transformers
from transformers import (BertConfig, BertForTokenClassification,
                          BertTokenizerFast, pipeline)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from make_family_fixtures import SIZE, vocab  # noqa: E402
from make_hf_task_fixtures import labelled, randomize_norms  # noqa: E402

DIRECTORY = ROOT / "tests" / "fixtures" / "hf_tasks" / "bert_ner_cased"
# HF's order, not sorted: a converted run keeps it.
TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
NAMES = ["Paris", "London", "Berlin", "Tokyo", "Japan", "York", "Chicago",
         "Smith", "Ann", "Mary", "Rome", "Oslo", "Dr", "Mr", "Mrs", "St",
         "Louis", "Germany", "France", "Neil"]
PUNCTUATION = ["(", ")", '"', ":", ";", "&", "@", "#", "/", "…", "—",
               "«", "»", "“", "”", "東", "京", "日", "本"]
SENTENCES = [
    "Dr. Smith lives in Paris.",
    "New York, Chicago!",
    "Ann went to Berlin (Germany) yesterday.",
    '"Paris" is in France.',
    "Mary's film was in London.",
    "The Paris-London film was long.",
    "Is it in Tokyo? Yes!",
    "He said: 'London is fine'.",
    "東京 is in 日本.",
    "I love Paris 😀 and Berlin 🎉!",
    "Smith & Mary, in Rome; then Oslo.",
    "(Japan)",
    "Ann@Paris.com and #London",
    "Mr. and Mrs. Smith.",
    "It's a long film — in Paris.",
    "Zoë went to Köln.",
    "«Paris» and “London”.",
    "Paris...London",
    "The film was good... in Paris!!!",
    "Rome/Berlin/Oslo",
    "Ann-Mary O'Neil went to St. Louis.",
    "PARIS, london, Paris",
]


def entities(run, text, strategy):
    return [{"type": e["entity_group"], "score": float(e["score"]),
             "word": e["word"], "start": int(e["start"]),
             "end": int(e["end"])}
            for e in run(text, aggregation_strategy=strategy)]


def main():
    torch.manual_seed(1)
    # Unique tokens: HF saves a vocab with repeats renumbered, and its
    # vocab.txt would then contradict its tokenizer.json.
    tokens = list(dict.fromkeys(vocab(True) + NAMES + PUNCTUATION))
    model = BertForTokenClassification(BertConfig(
        vocab_size=len(tokens), **SIZE, **labelled(TAGS)))
    randomize_norms(model)
    model.eval()
    DIRECTORY.mkdir(parents=True, exist_ok=True)
    (DIRECTORY / "vocab.txt").write_text("\n".join(tokens) + "\n")
    tokenizer = BertTokenizerFast(str(DIRECTORY / "vocab.txt"),
                                  do_lower_case=False)
    model.save_pretrained(DIRECTORY, safe_serialization=True)
    tokenizer.save_pretrained(DIRECTORY)
    run = pipeline("token-classification", model=model, tokenizer=tokenizer,
                   device=-1)
    expected = {"texts": SENTENCES,
                "transformers": transformers.__version__,
                "first": [entities(run, t, "first") for t in SENTENCES],
                "simple": [entities(run, t, "simple") for t in SENTENCES]}
    (DIRECTORY / "expected.json").write_text(json.dumps(
        expected, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {DIRECTORY} (transformers {transformers.__version__})")


if __name__ == "__main__":
    main()
