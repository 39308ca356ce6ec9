"""How `bert-tf predict` and `bert-tf export` present token tagging:
its help, its own flags, and the lines it prints for a loaded
export's answers."""

from bert_tf.tasks.parts import CommandLine
from bert_tf.tasks.serving_module import served_text_batches


class TaggingCommandLine(CommandLine):
    """The `CommandLine` part (`bert_tf.tasks.parts`) of the
    tagging kind."""

    predict_help = (
        'the entities of each text: type, text, code-point offsets and '
        'score'
    )

    predict_example = (
        'bert-tf predict --model M "Watching the Seahawks with Mike in '
        'Portland"'
    )

    @classmethod
    def print_predictions(cls, loaded, args, log=print):
        for chunk, out in served_text_batches(loaded, args):
            for i, text in enumerate(chunk):
                found = [f"{out['type'][i][j].decode()} "
                         f"{out['text'][i][j].decode('utf-8', 'replace')!r} "
                         f"[{out['start'][i][j]}:{out['end'][i][j]}] "
                         f"{out['score'][i][j]:.2f}"
                         for j in range(out["count"][i])]
                shown = text if len(text) <= 60 else text[:57] + "..."
                log(f"{shown}\t" + ("; ".join(found) or "(no entities)"))
