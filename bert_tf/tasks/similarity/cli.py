"""How `bert-tf predict` and `bert-tf export` present sentence similarity:
its help, its own flags, and the lines it prints for a loaded
export's answers."""

import tensorflow as tf

from bert_tf.tasks.parts import CommandLine
from bert_tf.tasks.serving_module import command_line_texts


class SimilarityCommandLine(CommandLine):
    """The `CommandLine` part (`bert_tf.tasks.parts`) of the
    similarity kind."""

    predict_help = 'the cosine similarity of each text pair ("A<TAB>B")'

    predict_example = (
        "bert-tf predict --model M $'A man plays guitar.\\tSomeone "
        "strums a guitar.'"
    )

    @classmethod
    def print_predictions(cls, loaded, args, log=print):
        pairs = [t.split("\t", 1) for t in command_line_texts(
            args, "two texts per line, separated by a TAB")]
        for number, pair in enumerate(pairs, 1):
            if len(pair) != 2:
                raise ValueError(f"text {number}: give two texts separated "
                                 "by a TAB ('A<TAB>B').")
        function = loaded.signatures["serving_default"]
        for start in range(0, len(pairs), args.batch_size):
            chunk = pairs[start:start + args.batch_size]
            out = function(text=tf.constant([a for a, _ in chunk]),
                           text_b=tf.constant([b for _, b in chunk]))
            for (a, b), score in zip(chunk, out["score"].numpy()):
                log(f"{score:.4f}\t{a}\t{b}")
