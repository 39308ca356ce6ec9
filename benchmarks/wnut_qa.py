"""Extractive QA on real annotations: the WNUT-16 QA set's test split.

Prints, side by side, SQuAD 2.0 EM/F1 and HasAns/NoAns for fine-tuned
models (e.g. the imported all-MiniLM-L6-v2 and a random init, from
`bert-tf finetune --config configs/finetune/wnut_qa_*.yaml`) and for a
heuristic baseline (the first capitalised span of the tweet, or no answer
when there is none). For the first model it also checks:

- decoder parity: the in-graph decoder that serving uses against the plain
  run_squad reference (tests/squad_reference.py) on the same logits;
- long context: a 5,000-word passage of real tweets without annotated
  entities, then a test tweet with one as the last paragraph; the exported
  model must answer from that paragraph (nothing truncated away).

    python benchmarks/wnut_qa.py runs/wnut_qa_minilm runs/wnut_qa_random
"""

import argparse
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import tensorflow as tf  # noqa: E402

from bert_tf.data.readers import squad, wnut  # noqa: E402
from bert_tf.models.encoder import INPUT_NAMES  # noqa: E402
from bert_tf.serving.export import export_model, load_exported  # noqa: E402
from bert_tf.tasks import load_finetuned  # noqa: E402
from bert_tf.tasks.span_decoding import decode_answers  # noqa: E402
from bert_tf.tasks.squad_metrics import squad_v2  # noqa: E402

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
        options = {k: task.spec[k] for k in (
            "n_best_size", "max_answer_length", "null_threshold",
            "version_2")}
        ours = decode_answers(features, logits["start_logits"],
                              logits["end_logits"], tf.constant(contexts),
                              **options)
        ref = reference_answers(
            {k: v.numpy() for k, v in features.items()},
            logits["start_logits"].numpy(), logits["end_logits"].numpy(),
            contexts, **options)
        for i, r in enumerate(ref):
            total += 1
            same += (ours["answer"][i].numpy() == r["answer"] and
                     int(ours["start"][i]) == r["start"])
    return same, total


def long_context(task, model, vocab, run_dir, cases=10):
    """For `cases` test tweets with an entity: 5,000 words of real tweets
    in which the model finds no entity of the asked type (each tweet
    alone answers "no answer"; annotation gaps make "no annotated entity"
    unusable), then the tweet as the last paragraph."""
    sentences = wnut.read_wnut()
    plain = [" ".join(t) for t, g in sentences
             if all(tag == "O" for tag in g)]
    test = wnut.split_indices(len(sentences))["test"]
    results, words = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        export_model(run_dir, Path(tmp) / "qa" / "1", log=lambda *a: None)
        served = load_exported(Path(tmp) / "qa" / "1").signatures[
            "serving_default"]
        for index in test:
            tokens, tags = sentences[index]
            spans = wnut.entity_spans(tags)
            if not spans:
                continue
            kind = spans[0][0]
            question = squad.QUESTIONS[kind]
            golds = [" ".join(tokens[a:b + 1]) for t, a, b in spans
                     if t == kind]
            alone = task.answer(model, vocab, [question] * len(plain), plain,
                                batch_size=128)["has_answer"]
            filler, words = [], 0
            for text, answered in zip(plain, alone):
                if not answered:
                    filler.append(text)
                    words += len(text.split())
                    if words >= 5000:
                        break
            last = " ".join(tokens)
            context = "\n\n".join(filler + [last])
            out = served(question=tf.constant([question]),
                         context=tf.constant([context]))
            answer = out["answer"][0].numpy().decode()
            start = int(out["start"][0])
            short = served(question=tf.constant([question]),
                           context=tf.constant([last]))["answer"][0]
            results.append((answer in golds, start >= len(context) - len(
                last), answer, golds, words,
                short.numpy().decode() == answer))
            if len(results) == cases:
                break
    return results


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
        rows.append((f"{run} (threshold {task.spec['null_threshold']:.2f})",
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
    results = long_context(task, model, vocab, run)
    right = sum(r[0] for r in results)
    last = sum(r[1] for r in results)
    alone = sum(r[5] for r in results)
    print(f"long context (>= 5,000 words of real tweets, then the tweet "
          f"with the answer): {right}/{len(results)} answers right, "
          f"{last}/{len(results)} taken from the last paragraph, "
          f"{alone}/{len(results)} the same as for that tweet alone")
    for ok, _, answer, gold, words, same in results:
        print(f"  {'ok ' if ok else 'no '} {words:,} words  {answer!r:<24} "
              f"gold {gold}{'' if same else ' (differs from the tweet alone)'}")


if __name__ == "__main__":
    main()
