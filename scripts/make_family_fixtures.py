"""Writes the BERT-family fixtures: tiny random HF checkpoints and what HF
computes on them, and HF's fast tokenizer's ids on real multilingual text.

Run in the bench environment (torch + transformers), never in tests:

    make family-fixtures

Writes under tests/fixtures/families/:
- `bert_cased/`, `electra_small/`, `electra_base/`, `distilbert/`: tiny
  random `BertForPreTraining` (cased vocab with accents and CJK),
  `ElectraForPreTraining` (embeddings narrower than the hidden size, as
  ELECTRA-Small; and equal, as ELECTRA-Base), `DistilBertForMaskedLM`:
  config.json, model.safetensors, vocab.txt, tokenizer_config.json, and
  reference.npz (inputs, every hidden state, head logits) from HF in
  PyTorch. The vocabs are generated here: no third-party text.
- `multilingual_tokens.npz`: the ids `BertTokenizerFast` gives for the
  multilingual sample (`bert-tf samples multilingual`, Faker's word lists),
  cased and uncased, with a vocab built from that text by
  `tests/multilingual_vocab.py`; the text itself is not stored, only its
  SHA-256.
"""

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import torch
import transformers
from transformers import (BertConfig, BertForPreTraining, BertTokenizerFast,
                          DistilBertConfig, DistilBertForMaskedLM,
                          ElectraConfig, ElectraForPreTraining)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
from bert_tf.samples.readers import multilingual_sentences  # noqa: E402
from multilingual_vocab import build_vocab, text_digest  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "families"
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
# The toy tasks' words, so that the tests fine-tune on them.
WORDS = ["the", "film", "was", "and", "long", "short", "new", "good",
         "great", "fine", "bad", "awful", "dull", "who", "what", "is", "in",
         "paris", "london", "lives", "city"]
LETTERS = [chr(c) for c in range(ord("a"), ord("z") + 1)]
EXTRA = ["é", "ü", "ß", "ñ", ".", ",", "?", "!", "'", "-"] + \
    [chr(0x4E00 + i) for i in range(12)]  # CJK ideographs, one per piece


def vocab(cased):
    tokens = SPECIAL + WORDS + LETTERS + ["##" + c for c in LETTERS] + EXTRA
    if cased:
        tokens += [w.capitalize() for w in WORDS] + \
            [c.upper() for c in LETTERS]
    return tokens


SIZE = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=64,
            hidden_act="gelu", initializer_range=0.1,
            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def models():
    yield "bert_cased", True, BertForPreTraining(BertConfig(
        vocab_size=len(vocab(True)), **SIZE))
    yield "electra_small", False, ElectraForPreTraining(ElectraConfig(
        vocab_size=len(vocab(False)), embedding_size=16, **SIZE))
    yield "electra_base", False, ElectraForPreTraining(ElectraConfig(
        vocab_size=len(vocab(False)), embedding_size=32, **SIZE))
    yield "distilbert", False, DistilBertForMaskedLM(DistilBertConfig(
        vocab_size=len(vocab(False)), dim=32, n_layers=2, n_heads=2,
        hidden_dim=64, max_position_embeddings=64, activation="gelu",
        initializer_range=0.1, dropout=0.0, attention_dropout=0.0))


def reference(model, vocab_size, types):
    rng = np.random.default_rng(0)
    ids = rng.integers(5, vocab_size, size=(3, 12)).astype("int64")
    mask = np.ones_like(ids)
    mask[1, 7:] = 0
    ids[1, 7:] = 0
    type_ids = np.zeros_like(ids)
    type_ids[:, 6:] = 1 if types else 0
    inputs = {"input_ids": torch.tensor(ids),
              "attention_mask": torch.tensor(mask)}
    if types:
        inputs["token_type_ids"] = torch.tensor(type_ids)
    with torch.no_grad():
        out = model(**inputs, output_hidden_states=True)
    arrays = {"input_word_ids": ids.astype("int32"),
              "input_mask": mask.astype("int32"),
              "input_type_ids": type_ids.astype("int32"),
              "hidden_states": np.stack([h.numpy()
                                         for h in out.hidden_states])}
    logits = out.logits if hasattr(out, "logits") else \
        out.prediction_logits
    arrays["head_logits"] = logits.numpy()
    return arrays


def write_models():
    torch.manual_seed(0)
    for name, cased, model in models():
        directory = FIXTURES / name
        directory.mkdir(parents=True, exist_ok=True)
        model.eval()
        model.save_pretrained(directory, safe_serialization=True)
        tokens = vocab(cased)
        (directory / "vocab.txt").write_text("\n".join(tokens) + "\n")
        (directory / "tokenizer_config.json").write_text(json.dumps(
            {"do_lower_case": not cased, "tokenizer_class": "BertTokenizer"},
            indent=2) + "\n")
        np.savez(directory / "reference.npz", **reference(
            model, len(tokens), types=name != "distilbert"))
        print(f"wrote {directory}")


def write_tokens():
    sentences = multilingual_sentences()
    tokens = build_vocab(sentences)
    path = FIXTURES / "multilingual_vocab.txt.tmp"
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    arrays = {"text_sha256": np.array(text_digest(sentences)),
              "vocab_sha256": np.array(text_digest(tokens))}
    for case, lower in (("cased", False), ("uncased", True)):
        tokenizer = BertTokenizerFast(
            str(path), do_lower_case=lower, tokenize_chinese_chars=True,
            strip_accents=None)
        ids = tokenizer(sentences, add_special_tokens=False)["input_ids"]
        arrays[f"{case}_lengths"] = np.array([len(i) for i in ids], "int32")
        arrays[f"{case}_ids"] = np.concatenate(
            [np.array(i, "int32") for i in ids])
    path.unlink()
    np.savez_compressed(FIXTURES / "multilingual_tokens.npz", **arrays)
    print(f"wrote {FIXTURES / 'multilingual_tokens.npz'}: "
          f"{len(sentences)} sentences, {arrays['cased_ids'].size} cased "
          f"pieces (transformers {transformers.__version__})")


if __name__ == "__main__":
    write_models()
    write_tokens()
