"""How `bert-tf predict` and `bert-tf export` present the `embeddings` export:
its help, its own flags, and the lines it prints for a loaded
export's answers."""

import numpy as np

from bert_tf.tasks.parts import CommandLine
from bert_tf.tasks.serving_module import served_text_batches


class EmbeddingsCommandLine(CommandLine):
    """The `CommandLine` part (`bert_tf.tasks.parts`) of the
    embeddings kind."""

    export_help = ("text -> mean-pooled sentence embedding (serving_default) "
                   "and per-word hidden states of every layer "
                   "(word_features)")

    export_arguments = (
        (("--no-normalize",), {"dest": "normalize", "action": "store_const",
                               "const": False,
                               "help": "do not L2-normalise the sentence "
                                       "embeddings"}),
    )

    predict_help = (
        "each text's sentence embedding (its norm and first values), "
        'and their cosine similarities for 2 to 10 texts'
    )

    predict_example = (
        'bert-tf predict --model M "A man plays guitar." "Someone '
        'strums a guitar."'
    )

    @classmethod
    def print_predictions(cls, loaded, args, log=print):
        texts, parts = [], []
        for chunk, out in served_text_batches(loaded, args):
            texts += chunk
            parts.append(out["embedding"])
        print_embeddings(texts, np.concatenate(parts), log)


def print_embeddings(texts, vectors, log=print):
    """Each text's embedding (its norm and first values), and their cosine
    similarities when there are 2 to 10."""
    for text, vector in zip(texts, vectors):
        shown = text if len(text) <= 50 else text[:47] + "..."
        log(f"{shown:<50}  norm {np.linalg.norm(vector):.3f}  "
            f"[{', '.join(f'{v:.3f}' for v in vector[:4])}, ...]")
    if 1 < len(texts) <= 10:
        log("cosine similarity:")
        unit = vectors / np.maximum(
            np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)
        for row in unit @ unit.T:
            log("  " + " ".join(f"{v:5.2f}" for v in row))
