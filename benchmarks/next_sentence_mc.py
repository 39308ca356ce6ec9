"""Multiple choice on real text: the next-sentence set's test split.

Prints test accuracy side by side for fine-tuned models (e.g. from
`bert-tf finetune --config configs/finetune/next_sentence_mc_*.yaml`),
the chance level and a word-overlap baseline (the choice sharing the most
lower-cased words of 4+ letters with the context; ties to the first).

    python benchmarks/next_sentence_mc.py runs/next_sentence_mc_minilm \\
        runs/next_sentence_mc_random
"""

import argparse
import os
import re

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

from bert_tf.tasks import load_finetuned  # noqa: E402
from bert_tf.tasks.multiple_choice.data import load_next_sentence  # noqa: E402


def _words(text):
    return {w for w in re.findall(r"\w+", text.lower()) if len(w) >= 4}


def overlap_choice(context, choices):
    words = _words(context)
    return int(np.argmax([len(words & _words(c)) for c in choices]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", help="fine-tuning model_dirs")
    args = parser.parse_args()
    data = load_next_sentence()
    test = data.split("test")
    labels = np.array([label for _, _, label in test])
    rows = [("chance", 1 / data.num_choices),
            ("word overlap with the context", np.mean(
                [overlap_choice(c, x) for c, x, _ in test] == labels))]
    for run in args.runs:
        task, model, vocab, _ = load_finetuned(run)
        rows.append((run, task.evaluate(model, data, "test", vocab,
                                        64)["accuracy"]))
    print(f"next-sentence multiple choice, test split: {len(test)} "
          f"examples, {data.num_choices} choices")
    for name, accuracy in rows:
        print(f"{name:<48} {accuracy:8.1%}")


if __name__ == "__main__":
    main()
