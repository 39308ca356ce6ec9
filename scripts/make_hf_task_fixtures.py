"""Writes the fine-tuned HF task fixtures: tiny random task checkpoints
written by transformers, and what HF's pipelines answer on raw text.

Run in the bench environment (torch + transformers), never in tests:

    .venv-bench/bin/python scripts/make_hf_task_fixtures.py

Writes under tests/fixtures/hf_tasks/, one directory per layout, each with
config.json (its `architectures` and `id2label`), model.safetensors,
vocab.txt, the tokenizer's files and expected.json (the pipeline's
answers; for the headless `distilbert_model`, its last hidden state):

- `bert_classifier`, `distilbert_classifier` (`pre_classifier` + ReLU),
  `electra_classifier` (`classifier.dense` + GELU + `out_proj`, embeddings
  narrower than the hidden size): `text-classification`, every label's
  probability;
- `bert_qa`: `question-answering`, `max_answer_len` 30, no impossible
  answer;
- `bert_ner`: `token-classification`, `aggregation_strategy="simple"`,
  and the argmax tag of each word's first piece;
- `distilbert_model`: a headless `DistilBertModel` (no `distilbert.`
  prefix), as `save_pretrained` of the base model writes it;
- `bert_multiple_choice`, `distilbert_multiple_choice` (`pre_classifier`
  + ReLU), `electra_multiple_choice` (its sequence summary): HF has no
  pipeline for them, so their ids and logits on two questions of two
  choices;
- `bert_model`, `electra_model`: headless `BertModel` and `ElectraModel`
  (no family prefix; ELECTRA's embeddings narrower than its hidden size).

Every weight is random, layer norms included (transformers starts them at
γ = 1, β = 0, which would hide a swapped norm).
"""

import json
import sys
from pathlib import Path

import numpy as np
import torch
import transformers
from transformers import (BertConfig, BertForMultipleChoice,
                          BertForQuestionAnswering,
                          BertForSequenceClassification,
                          BertForTokenClassification, BertTokenizerFast,
                          DistilBertTokenizerFast,
                          DistilBertConfig, DistilBertForSequenceClassification,
                          DistilBertModel, ElectraConfig,
                          ElectraForSequenceClassification, pipeline)
from transformers import (BertModel, DistilBertForMultipleChoice,
                          ElectraForMultipleChoice, ElectraModel)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from make_family_fixtures import SIZE, vocab  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "hf_tasks"
SENTIMENT = ["negative", "neutral", "positive"]
TAGS = ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
TEXTS = ["the film was good", "The film was awful and long.",
         "what a dull city !", "new film, great and fine", "é 一 丁"]
QUESTIONS = [("who lives in paris ?", "the film was good and paris was "
              "fine . london is a city who lives in paris"),
             ("what is long ?", "the film was long and dull , the city "
              "was new and great")]
CHOICES = [("the film was long", ("and dull", "and great")),
           ("paris is a city", ("in london", "who lives"))]
NER_TEXTS = ["paris lives in london", "who is in paris and the city ?",
             "the new film was in london and paris is fine"]


def labelled(names):
    return {"id2label": dict(enumerate(names)),
            "label2id": {n: i for i, n in enumerate(names)}}


def distil_size():
    return dict(dim=32, n_layers=2, n_heads=2, hidden_dim=64,
                max_position_embeddings=64, activation="gelu",
                initializer_range=0.1, dropout=0.0, attention_dropout=0.0,
                seq_classif_dropout=0.0)


def models(size):
    yield "bert_classifier", BertForSequenceClassification(BertConfig(
        vocab_size=size, **SIZE, **labelled(SENTIMENT)))
    yield "distilbert_classifier", DistilBertForSequenceClassification(
        DistilBertConfig(vocab_size=size, **distil_size(),
                         **labelled(SENTIMENT[::2])))
    yield "electra_classifier", ElectraForSequenceClassification(
        ElectraConfig(vocab_size=size, embedding_size=16, **SIZE,
                      **labelled(SENTIMENT[::2])))
    yield "bert_qa", BertForQuestionAnswering(BertConfig(vocab_size=size,
                                                         **SIZE))
    yield "bert_ner", BertForTokenClassification(BertConfig(
        vocab_size=size, **SIZE, **labelled(TAGS)))
    yield "distilbert_model", DistilBertModel(DistilBertConfig(
        vocab_size=size, **distil_size()))
    yield "bert_multiple_choice", BertForMultipleChoice(BertConfig(
        vocab_size=size, **SIZE))
    yield "distilbert_multiple_choice", DistilBertForMultipleChoice(
        DistilBertConfig(vocab_size=size, **distil_size()))
    yield "electra_multiple_choice", ElectraForMultipleChoice(ElectraConfig(
        vocab_size=size, embedding_size=16, **SIZE))
    yield "bert_model", BertModel(BertConfig(vocab_size=size, **SIZE))
    yield "electra_model", ElectraModel(ElectraConfig(
        vocab_size=size, embedding_size=16, **SIZE))


def randomize_norms(model):
    for module in model.modules():
        if isinstance(module, torch.nn.LayerNorm):
            with torch.no_grad():
                module.weight.uniform_(0.5, 1.5)
                module.bias.normal_(0.0, 0.1)


def expected(name, model, tokenizer):
    if name.endswith("_model"):  # headless: the last hidden state
        batch = tokenizer(TEXTS[:3], padding=True, return_tensors="pt")
        with torch.no_grad():
            hidden = model(**batch).last_hidden_state.numpy()
        return {"texts": TEXTS[:3], "last_hidden_state": hidden.tolist(),
                "attention_mask": batch["attention_mask"].tolist()}
    if name.endswith("_multiple_choice"):  # HF has no pipeline for it
        pairs = [(c, choice) for c, choices in CHOICES for choice in choices]
        batch = tokenizer([c for c, _ in pairs], [x for _, x in pairs],
                          padding=True, return_tensors="pt")
        shaped = {k: v.view(len(CHOICES), 2, -1) for k, v in batch.items()}
        with torch.no_grad():
            logits = model(**{k: v for k, v in shaped.items() if k in (
                "input_ids", "attention_mask", "token_type_ids")}).logits
        logits = logits.numpy()
        return {"input_word_ids": shaped["input_ids"].tolist(),
                "input_mask": shaped["attention_mask"].tolist(),
                "input_type_ids": shaped.get(
                    "token_type_ids", torch.zeros_like(
                        shaped["input_ids"])).tolist(),
                "logits": logits.tolist()}
    task = {"bert_qa": "question-answering",
            "bert_ner": "token-classification"}.get(name,
                                                    "text-classification")
    run = pipeline(task, model=model, tokenizer=tokenizer, device=-1)
    if task == "question-answering":
        return {"max_answer_len": 30, "answers": [
            dict(question=q, context=c, best_span=best_span(
                model, tokenizer, q, c), **{k: v for k, v in run(
                    question=q, context=c, max_answer_len=30,
                    handle_impossible_answer=False).items()})
            for q, c in QUESTIONS]}
    if task == "token-classification":
        return {"texts": NER_TEXTS, "entities": [
            [{k: (float(v) if k == "score" else v) for k, v in e.items()}
             for e in run(t, aggregation_strategy="simple")]
            for t in NER_TEXTS], "word_tags": [word_tags(model, tokenizer, t)
                                               for t in NER_TEXTS]}
    return {"texts": TEXTS, "predictions": [
        {r["label"]: r["score"] for r in scores}
        for scores in run(TEXTS, top_k=None)]}


def best_span(model, tokenizer, question, context):
    """The pipeline's own best single span (`select_starts_ends`, before
    it adds up the scores of spans with the same text) as
    {answer, start, end}."""
    from transformers.pipelines.question_answering import \
        select_starts_ends
    batch = tokenizer(question, context, return_tensors="pt",
                      return_offsets_mapping=True)
    offsets = batch.pop("offset_mapping")[0].tolist()
    with torch.no_grad():
        out = model(**batch)
    ids = batch.sequence_ids(0)
    p_mask = np.array([[i != 1 for i in ids]], int)
    p_mask[0, 0] = 0
    starts, ends, _, _ = select_starts_ends(
        out.start_logits.numpy(), out.end_logits.numpy(), p_mask,
        batch["attention_mask"].numpy(), 1000000, 1, False, 30)
    start, end = offsets[starts[0]][0], offsets[ends[0]][1]
    return {"answer": context[start:end], "start": start, "end": end}


def word_tags(model, tokenizer, text):
    batch = tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        best = model(**batch).logits[0].argmax(-1).tolist()
    tags, seen = [], set()
    for position, word in enumerate(batch.word_ids()):
        if word is not None and word not in seen:
            seen.add(word)
            tags.append(model.config.id2label[best[position]])
    return tags


def main():
    torch.manual_seed(0)
    tokens = vocab(False)
    for name, model in models(len(tokens)):
        directory = FIXTURES / name
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "vocab.txt").write_text("\n".join(tokens) + "\n")
        tokenizer = (DistilBertTokenizerFast if name.startswith("distil")
                     else BertTokenizerFast)(str(directory / "vocab.txt"),
                                             do_lower_case=True)
        randomize_norms(model)
        model.eval()
        model.save_pretrained(directory, safe_serialization=True)
        tokenizer.save_pretrained(directory)
        (directory / "expected.json").write_text(json.dumps(
            expected(name, model, tokenizer), indent=1, ensure_ascii=False,
            default=lambda x: x.item() if hasattr(x, "item") else str(x))
            + "\n", encoding="utf-8")
        print(f"wrote {directory} (transformers {transformers.__version__})")


if __name__ == "__main__":
    np.random.seed(0)
    main()
