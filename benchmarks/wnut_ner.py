"""Token tagging on real annotations: the WNUT-16 test split (240 tweets).

Prints entity-level micro precision/recall/F1 (seqeval's default mode)
side by side for fine-tuned models (e.g. `bert-tf finetune --config
configs/finetune/wnut_ner_minilm.yaml` and `wnut_ner_random.yaml`) and a
gazetteer baseline: every entity string seen in train, matched in the test
tweets (longest match first, case-insensitive) with its most frequent
training type.

    python benchmarks/wnut_ner.py runs/wnut_ner_minilm runs/wnut_ner_random
"""

import argparse
import collections
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from bert_tf.samples import readers as wnut  # noqa: E402
from bert_tf.tasks import load_finetuned  # noqa: E402
from bert_tf.tasks.tagging import data as conll  # noqa: E402
from bert_tf.tasks.tagging.metrics import entity_scores  # noqa: E402


def gazetteer(train, sentences):
    """Predicted (sentence, type, first, last) spans of the baseline."""
    seen = collections.defaultdict(collections.Counter)
    for words, tags in train:
        for kind, first, last in wnut.entity_spans(tags):
            seen[tuple(w.lower() for w in words[first:last + 1])][kind] += 1
    longest = max(len(k) for k in seen)
    spans = set()
    for index, (words, _) in enumerate(sentences):
        lowered, i = [w.lower() for w in words], 0
        while i < len(words):
            for size in range(min(longest, len(words) - i), 0, -1):
                key = tuple(lowered[i:i + size])
                if key in seen:
                    spans.add((index, seen[key].most_common(1)[0][0], i,
                               i + size - 1))
                    i += size - 1
                    break
            i += 1
    return spans


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", help="fine-tuning model_dirs")
    args = parser.parse_args()
    data = conll.load_wnut_ner()
    test = data.split("test")
    gold = {(i, kind, first, last) for i, (_, tags) in enumerate(test)
            for kind, first, last in wnut.entity_spans(tags)}
    rows = [("gazetteer: train entity strings",
             entity_scores(gold, gazetteer(data.split("train"), test)))]
    for run in args.runs:
        task, model, vocab, _ = load_finetuned(run)
        rows.append((run, task.evaluate(model, data, "test", vocab, 64)))
    print(f"WNUT-16 test: {len(test)} tweets, {len(gold)} entities")
    print(f"{'model':<40} {'precision':>10} {'recall':>10} {'F1':>10}")
    for name, result in rows:
        print(f"{name:<40} {100 * result['precision']:>10.1f} "
              f"{100 * result['recall']:>10.1f} {100 * result['f1']:>10.1f}")


if __name__ == "__main__":
    main()
