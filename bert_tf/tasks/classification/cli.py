"""How `bert-tf predict` and `bert-tf export` present classification:
its help, its own flags, and the lines it prints for a loaded
export's answers."""

import numpy as np
import tensorflow as tf

from bert_tf.tasks.parts import CommandLine
from bert_tf.tasks.serving_module import command_line_texts


class ClassificationCommandLine(CommandLine):
    """The `CommandLine` part (`bert_tf.tasks.parts`) of the
    classification kind."""

    predict_help = ('the label of each text (or text pair: "A<TAB>B"), '
                    'with its probability; a score for regression')

    predict_example = ('bert-tf predict --model M "An utterly charming '
                       'film." "Dull."')

    @classmethod
    def print_predictions(cls, loaded, args, log=print):
        texts = command_line_texts(args, "one text per line; TAB separates "
                                           "the two texts of a pair")
        function = loaded.signatures["serving_default"]
        pair = "text_b" in function.structured_input_signature[1]
        for start in range(0, len(texts), args.batch_size):
            chunk = texts[start:start + args.batch_size]
            inputs = {"text": tf.constant(chunk)}
            if pair:
                halves = [t.split("\t", 1) + [""] for t in chunk]
                inputs = {"text": tf.constant([h[0] for h in halves]),
                          "text_b": tf.constant([h[1] for h in halves])}
            out = {k: v.numpy() for k, v in function(**inputs).items()}
            for i, text in enumerate(chunk):
                shown = text if len(text) <= 60 else text[:57] + "..."
                if "score" in out:
                    log(f"{out['score'][i]:.4f}\t{shown}")
                else:
                    label = out["label"][i].decode()
                    probability = float(np.max(out["probabilities"][i]))
                    windows = (f"\t{out['windows'][i]} windows"
                               if "windows" in out else "")
                    log(f"{label}\t{probability:.4f}{windows}\t{shown}")
