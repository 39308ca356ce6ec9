"""How `bert-tf predict` and `bert-tf export` present extractive question
answering: its help, its own flags, and the lines it prints for a loaded
export's answers."""

import json
import tensorflow as tf

from bert_tf.storage import GPath
from bert_tf.tasks.parts import CommandLine


class SpanQACommandLine(CommandLine):
    """The `CommandLine` part (`bert_tf.tasks.parts`) of the
    span_qa kind."""

    predict_help = (
        'the answer span of a question in its context, with its score '
        'and code-point offsets ("" when unanswerable)'
    )

    predict_example = (
        'bert-tf predict --model M --question "Which place is '
        'mentioned?" --context "Snow in Oslo again"'
    )

    predict_arguments = (
        (("--question",), {"help": "the question"}),
        (("--context",), {"help": "the context, or @FILE to read it"}))

    @classmethod
    def print_predictions(cls, loaded, args, log=print):
        pairs = []
        if args.question is not None or args.context is not None:
            context = args.context or ""
            if context.startswith("@"):
                with GPath(context[1:]).open(errors="replace") as f:
                    context = f.read()
            pairs.append((args.question or "", context))
        if args.input:
            with GPath(args.input).open(errors="replace") as f:
                for number, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    try:
                        row = json.loads(line)
                        pairs.append((row["question"], row["context"]))
                    except (json.JSONDecodeError, KeyError, TypeError):
                        raise ValueError(
                            f"{args.input}:{number}: expected a JSON object "
                            'with "question" and "context".') from None
        if not pairs:
            raise ValueError("Nothing to answer: give --question and "
                             "--context (or --input FILE.jsonl).")
        function = loaded.signatures["serving_default"]
        for start in range(0, len(pairs), args.batch_size):
            chunk = pairs[start:start + args.batch_size]
            out = {k: v.numpy() for k, v in function(
                question=tf.constant([q for q, _ in chunk]),
                context=tf.constant([c for _, c in chunk])).items()}
            for i, (question, _) in enumerate(chunk):
                if out["has_answer"][i]:
                    answer = out["answer"][i].decode("utf-8", "replace")
                    log(f"{question}\t{answer!r}\tstart {out['start'][i]} "
                        f"end {out['end'][i]}\tscore {out['score'][i]:.3f}")
                else:
                    log(f"{question}\t(no answer)\tnull score "
                        f"{out['null_score'][i]:.3f}")
