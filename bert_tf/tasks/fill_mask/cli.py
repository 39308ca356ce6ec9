"""How `bert-tf predict` and `bert-tf export` present the `fill_mask` export:
its help, its own flags, and the lines it prints for a loaded
export's answers."""

from bert_tf.tasks.parts import CommandLine
from bert_tf.tasks.serving_module import served_text_batches


class FillMaskCommandLine(CommandLine):
    """The `CommandLine` part (`bert_tf.tasks.parts`) of the
    fill_mask kind."""

    export_help = ("text with mask markers -> the top-k tokens per mask (a "
                   "checkpoint directory with the masked-LM head)")

    export_arguments = (
        (("--marker",), {"help": "the string that marks a mask (default "
                                 "[MASK])"}),
        (("--top-k",), {"type": int,
                        "help": "tokens returned per mask (default 5)"}),
        (("--max-masks",), {"type": int,
                            "help": "masks answered per text (default 8)"}),
    )

    predict_help = 'the top tokens for each mask marker of each text'

    predict_example = ('bert-tf predict --model M "The capital of France '
                       'is [MASK]."')

    @classmethod
    def print_predictions(cls, loaded, args, log=print):
        for chunk, out in served_text_batches(loaded, args):
            for i, text in enumerate(chunk):
                log(text)
                if out["masks"][i] == 0:
                    log("  (no mask in the text)")
                elif out["count"][i] == 0:
                    log(f"  ({out['masks'][i]} masks: more than the model "
                        "answers)")
                for m in range(out["count"][i]):
                    guesses = ", ".join(
                        f"{t.decode()} {p:.3f}" for t, p in zip(
                            out["tokens"][i, m], out["probabilities"][i, m]))
                    log(f"  mask {m + 1}: {guesses}")
                cut = int(out["masks"][i]) - int(out["count"][i])
                if out["count"][i] and cut:
                    log(f"  ({cut} more masks cut off by truncation)")
