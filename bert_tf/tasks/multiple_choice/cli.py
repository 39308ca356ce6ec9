"""How `bert-tf predict` and `bert-tf export` present multiple choice:
its help, its own flags, and the lines it prints for a loaded
export's answers."""

import tensorflow as tf

from bert_tf.tasks.parts import CommandLine


class MultipleChoiceCommandLine(CommandLine):
    """The `CommandLine` part (`bert_tf.tasks.parts`) of the
    multiple_choice kind."""

    predict_help = (
        "which choice follows the context, with each choice's "
        'probability'
    )

    predict_example = (
        'bert-tf predict --model M --context "He opened the door." '
        '--choice "It creaked." --choice "Fish swim."'
    )

    predict_arguments = (
        (("--context",), {"help": "the context"}),
        (("--choice",), {"action": "append", "default": [],
                         "help": "one choice (repeat for each)"}))

    @classmethod
    def print_predictions(cls, loaded, args, log=print):
        if not args.context or not args.choice:
            raise ValueError("A multiple-choice model needs --context TEXT "
                             "and two or more --choice TEXT.")
        out = loaded.signatures["serving_default"](
            context=tf.constant([args.context]),
            choices=tf.constant([list(args.choice)]))
        probabilities = out["probabilities"].numpy()[0]
        best = int(out["choice"].numpy()[0])
        for index, (text, p) in enumerate(zip(args.choice, probabilities)):
            log(f"{'*' if index == best else ' '} {p:.4f}  {text}")
