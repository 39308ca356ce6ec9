"""Extractive QA on real annotations: the WNUT-16 QA set's test split.

Prints, side by side, SQuAD 2.0 EM/F1 and HasAns/NoAns for fine-tuned
models (e.g. the imported all-MiniLM-L6-v2 and a random init, from
`bert-tf finetune --config configs/finetune/wnut_qa_*.yaml`) and for a
heuristic baseline (the first capitalised span of the tweet, or no answer
when there is none). For the first model it also checks:

- decoder parity: the in-graph decoder that serving uses against the plain
  run_squad reference (tests/squad_reference.py) on the same logits;
- long context: for every answerable test question, a 5,000-word passage
  of real tweets in which the model finds no answer to the question, then
  the question's tweet as the last paragraph; the exported model must
  answer from that paragraph (nothing truncated away) as it does for the
  tweet alone.

    python benchmarks/wnut_qa.py runs/wnut_qa_minilm runs/wnut_qa_random
"""

import argparse
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from bert_tf.samples import readers as wnut  # noqa: E402
from bert_tf.models.encoder import INPUT_NAMES  # noqa: E402
from bert_tf.serving.export import export_model, load_exported  # noqa: E402
from bert_tf.tasks import load_finetuned  # noqa: E402
from bert_tf.tasks.span_qa import data as squad  # noqa: E402
from bert_tf.tasks.span_qa.decoding import decode_answers  # noqa: E402
from bert_tf.tasks.span_qa.metrics import squad_v2  # noqa: E402

COLUMNS = ("exact", "f1", "HasAns_exact", "HasAns_f1", "NoAns_exact",
           "NoAns_f1")


def capitalised_baseline(context):
    """The first run of capitalised words (not a URL or @mention)."""
    words, run, position, spans = context.split(" "), [], 0, []
    for word in words + [""]:
        if word[:1].isupper():
            run.append((position, word))
        elif run:
            spans.append(run)
            run = []
        position += len(word) + 1
    if not spans:
        return ""
    first = spans[0]
    return context[first[0][0]:first[-1][0] + len(first[-1][1])]


def parity(task, model, vocab, examples, reference_answers):
    pre = task.preprocessor(vocab)
    same = total = 0
    for start in range(0, len(examples), 64):
        chunk = examples[start:start + 64]
        contexts = [e["context"] for e in chunk]
        features = pre(tf.constant([e["question"] for e in chunk]),
                       tf.constant(contexts))
        logits = model({k: features[k] for k in INPUT_NAMES},
                       training=False)
        options = {k: getattr(task.spec, k) for k in (
            "n_best_size", "max_answer_length", "null_threshold",
            "version_2")}
        ours = decode_answers(features, logits["start_logits"],
                              logits["end_logits"], tf.constant(contexts),
                              **options)
        ref = reference_answers(
            {k: v.numpy() for k, v in features.items()},
            logits["start_logits"].numpy(), logits["end_logits"].numpy(),
            contexts, doc_stride=task.spec.doc_stride, **options)
        for i, r in enumerate(ref):
            total += 1
            same += (ours["answer"][i].numpy() == r["answer"] and
                     int(ours["start"][i]) == r["start"])
    return same, total


def clean_filler(task, model, vocab, question, tweets, words=5000):
    """At least `words` words of `tweets` (in order, blank lines between)
    in which the model finds no answer to `question`, read as one passage.

    Tweets that alone get "no answer" can still hold an entity the model
    finds in the passage (WNUT-16 leaves entities untagged, e.g. a
    "#JenniferAniston"): each round asks the question of the passage and
    drops every tweet that holds a would-be answer (a candidate within
    the null threshold), then tops the passage up, until it answers
    "no answer". Depends only on the filler, never on the test tweet."""
    threshold = task.spec.null_threshold
    alone = task.answer(model, vocab, [question] * len(tweets), tweets,
                        batch_size=128)["has_answer"]
    pool = [t for t, answered in zip(tweets, alone) if not answered]
    dropped, chosen = set(), []
    while True:
        chosen, count = [], 0
        for number, text in enumerate(pool):
            if number not in dropped:
                chosen.append(number)
                count += len(text.split())
                if count >= words:
                    break
        if count < words:
            raise ValueError(f"fewer than {words} clean words for "
                             f"{question!r}")
        passage = "\n\n".join(pool[n] for n in chosen)
        out = task.answer(model, vocab, [question], [passage])
        if not out["has_answer"][0]:
            return passage, count
        ends = np.cumsum([len(pool[n]) + 2 for n in chosen])
        for score, start in zip(out["top_scores"][0], out["top_starts"][0]):
            if start >= 0 and out["null_score"][0] - score <= threshold:
                dropped.add(chosen[int(np.searchsorted(ends, start,
                                                       side="right"))])


def long_context(task, model, vocab, run_dir, cases=None):
    """Every answerable test question (or the first `cases`) asked of a
    5,000-word passage of real tweets in which the model finds no answer
    (`clean_filler`), then the question's tweet as the last paragraph.
    Returns a dict per question: the gold answers, the exported model's
    answer for the long context and for the tweet alone, and whether the
    long answer starts in the last paragraph."""
    sentences = wnut.read_wnut()
    plain = [" ".join(t) for t, g in sentences
             if all(tag == "O" for tag in g)]
    test = wnut.split_indices(len(sentences))["test"]
    fillers, results = {}, []
    with tempfile.TemporaryDirectory() as tmp:
        export_model(run_dir, Path(tmp) / "qa" / "1", log=lambda *a: None)
        served = load_exported(Path(tmp) / "qa" / "1").signatures[
            "serving_default"]
        for index in test:
            tokens, tags = sentences[index]
            spans = wnut.entity_spans(tags)
            for kind in sorted({t for t, _, _ in spans}):
                question = squad.QUESTIONS[kind]
                if question not in fillers:
                    fillers[question] = clean_filler(task, model, vocab,
                                                     question, plain)
                filler, words = fillers[question]
                last = " ".join(tokens)
                context = filler + "\n\n" + last
                out = served(question=tf.constant([question] * 2),
                             context=tf.constant([context, last]))
                answers = [a.decode() for a in out["answer"].numpy()]
                results.append({
                    "question": question, "words": words,
                    "golds": [" ".join(tokens[a:b + 1])
                              for t, a, b in spans if t == kind],
                    "long": answers[0], "alone": answers[1],
                    "last": int(out["start"][0]) >= len(context) - len(last),
                })
                if len(results) == cases:
                    return results
    return results


def print_long_context(results):
    right_alone = [r for r in results if r["alone"] in r["golds"]]
    kept = sum(r["long"] == r["alone"] for r in right_alone)
    print(f"long context (>= {min(r['words'] for r in results):,} words of "
          f"real tweets without an answer, then the tweet with the answer), "
          f"{len(results)} answerable test questions:")
    for name, key in (("the tweet alone", "alone"),
                      ("the long context", "long")):
        right = sum(r[key] in r["golds"] for r in results)
        print(f"  answers right from {name}: {right}/{len(results)} "
              f"({right / len(results):.1%})")
    print(f"  long-context answers taken from the last paragraph: "
          f"{sum(r['last'] for r in results)}/{len(results)}")
    print(f"  of the {len(right_alone)} answered right from the tweet alone,"
          f" the same answer from the long context: {kept}/"
          f"{len(right_alone)} ({kept / max(1, len(right_alone)):.1%})")
    for r in results:
        if r["long"] != r["alone"]:
            print(f"  differs: {r['question']!r} long {r['long']!r}, alone "
                  f"{r['alone']!r}, gold {r['golds']}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="fine-tuning model_dirs")
    args = parser.parse_args()
    data = squad.load_wnut_qa()
    test = data.split("test")
    golds = [e["answers"] for e in test]
    rows = [("baseline: first capitalised span", squad_v2(
        golds, [capitalised_baseline(e["context"]) for e in test]))]
    loaded = []
    for run in args.runs:
        task, model, vocab, _ = load_finetuned(run)
        loaded.append((task, model, vocab, run))
        rows.append((f"{run} (threshold {task.spec.null_threshold:.2f})",
                     task.evaluate(model, data, "test", vocab, 64)))
    print(f"WNUT-16 QA test: {len(test)} questions "
          f"({sum(bool(g) for g in golds)} answerable)")
    print(f"{'model':<52}" + "".join(f"{c:>13}" for c in COLUMNS))
    for name, result in rows:
        print(f"{name:<52}" + "".join(f"{result[c]:>13.1f}"
                                      for c in COLUMNS))
    task, model, vocab, run = loaded[0]
    from squad_reference import reference_answers
    same, total = parity(task, model, vocab, test, reference_answers)
    print(f"decoder parity with the run_squad reference ({run}): "
          f"{same}/{total} answers identical ({same / total:.1%})")
    print_long_context(long_context(task, model, vocab, run))


if __name__ == "__main__":
    main()
