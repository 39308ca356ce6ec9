"""The parts a task kind implements, each declared with a docstring per
member: `Training` (data, features, model, metrics), `Serving` (the
exports: SavedModel, TF Hub format, TFLite), `CommandLine` (how
`bert-tf predict` and `bert-tf export` present the kind, in
`<kind>/cli.py`), `HFHead` (which fine-tuned HF heads become runs of the
kind, `<kind>/hf_head.py`) and, for kinds that teach, the distillation
hooks (`bert_tf.tasks.distillation.TransferHooks`).

A fine-tuned kind (`bert_tf.tasks.base.Task`) is all of them; an
export-only kind (`bert_tf.tasks.base.ExportOnlyKind`: `embeddings`,
`fill_mask`) is `Serving` and `CommandLine`. Nothing here imports
TensorFlow: the CLI reads a kind's flags before any model work.
"""

import typing


class CommandLine:
    """How `bert-tf predict` and `bert-tf export` present a kind."""

    # `bert-tf predict`'s flags of this kind, beside the common ones (texts,
    # --input, --model, --batch-size): [(flags, argparse keyword args)].
    predict_arguments = ()
    # What `bert-tf predict --model M --help` says of an export of this
    # kind: what it answers, and a command line (M: the export).
    predict_help = ""
    predict_example = ""
    # What `bert-tf export --help` says of `--kind KIND`, and its own
    # flags, [(flags, argparse keyword args)]: each dest is an option of
    # the kind's `build_export`.
    export_help = ""
    export_arguments = ()

    @classmethod
    def add_export_arguments(cls, parser):
        """Adds the kind's own `bert-tf export --kind` flags to `parser`;
        returns their dests."""
        return [parser.add_argument(*flags, **options).dest
                for flags, options in cls.export_arguments]

    @classmethod
    def export_argument_dest(cls, flag):
        """The dest of `flag` (as typed, e.g. `--no-normalize`) if it is one
        of this kind's `export_arguments`, else None."""
        for flags, options in cls.export_arguments:
            if flag in flags:
                return options.get("dest", flags[0].lstrip("-").replace(
                    "-", "_"))
        return None

    @classmethod
    def add_predict_arguments(cls, parser):
        """Adds the kind's own `bert-tf predict` flags to `parser`."""
        for flags, options in cls.predict_arguments:
            parser.add_argument(*flags, **options)

    @classmethod
    def print_predictions(cls, loaded, args, log=print):
        """`bert-tf predict`: runs a loaded export on the command line's
        inputs (`args.texts`, `args.input`, `args.batch_size` and the
        kind's own `predict_arguments`) and prints the answers."""
        raise NotImplementedError


class Serving:
    """What every kind's exports need from it, fine-tuned or export-only."""

    # The inputs of its `serving_default`, in the order a caller gives
    # them (`TFLiteModel(path)(texts, ...)`).
    serving_inputs = ("text",)
    # The output names of this kind's TFLite `serving_default`: how a file
    # written before files recorded their kind is recognised.
    tflite_outputs = ()

    @classmethod
    def reads_whole_text(cls, spec):
        """Whether the encoder's work for a request grows with its text
        (windows over all of it) rather than stopping at `seq_length`
        pieces; such an export's default limit is chosen by time
        (`bert_tf.serving.limits.default_max_input_chars`)."""
        return False

    @classmethod
    def build_export(cls, checkpoint, fixed_length=False, dtype=None,
                     **options):
        """(spec, vocab, model, make_module) of the SavedModel of
        `checkpoint`, the model built in the Keras dtype policy `dtype`;
        `make_module(served, vocab)` builds the exported `tf.Module`
        around the served form of the model
        (`bert_tf.models.served.ServedModel`)."""
        raise NotImplementedError

    @classmethod
    def wrote_tflite_outputs(cls, outputs):
        """True if a TFLite file with these outputs is of this kind."""
        return any(name in outputs for name in cls.tflite_outputs)

    @classmethod
    def has_tflite(cls):
        """True if the kind has a TFLite graph (`build_tflite`)."""
        return bool(cls.tflite_outputs)

    @classmethod
    def build_tflite(cls, checkpoint, **options):
        """(a `tf.Module` whose `serve` TFLite converts, one line saying
        what it holds) of this kind's TFLite graph of `checkpoint`."""
        raise ValueError(f"the {cls.kind} kind has no TFLite export yet; "
                         "export a SavedModel (--format savedmodel).")


class RunServing(Serving):
    """What the exports of a fine-tuned kind's runs need besides `Serving`
    (`Task.build_export` and `build_tflite` call these)."""

    def serving_module(self, model, vocab, fixed_length=False):
        """A `tf.Module` with `signatures()` and `warmup_requests()`; its
        graph runs `model` (a served model) and cuts each request to its
        longest row unless `fixed_length`."""
        raise NotImplementedError

    def tflite_module(self, model, vocab):
        """The kind's TFLite graph (see `bert_tf/serving/tflite.py`): a
        `tf.Module` whose `serve` takes raw strings; kinds with one set
        `tflite_outputs`."""
        raise NotImplementedError

    def describe_model(self):
        """What an export report says the model answers (the kind; a
        classifier names its labels)."""
        return self.kind


class Training:
    """Fine-tuning and evaluation: data, features, model, metrics."""

    # The Keras task model class `build_model` returns.
    model_class = None

    @classmethod
    def load_data(cls, spec):
        """The task's data (splits `train`, optional `validation`, `test`)
        from its typed config."""
        raise NotImplementedError

    @classmethod
    def make_spec(cls, cfg, spec, data, encoder_config, vocab):
        """The spec of a run: the config's with the fields a run fills in
        and what the data decided (labels, lengths)."""
        raise NotImplementedError

    def describe(self, data):
        """One line about the data for the run's plan."""
        raise NotImplementedError

    def train_dataset(self, data, vocab, batch_size, seed=0,
                      input_context=None, drop_remainder=False,
                      dynamic_length=False):
        """Endless shuffled `(features, labels)` batches of `train`."""
        raise NotImplementedError

    def build_model(self, encoder):
        """The Keras task model on `encoder` (with `checkpoint_heads()`)."""
        raise NotImplementedError

    def compile(self, model):
        """Compiles `model` with the task's loss and metrics."""
        raise NotImplementedError

    @property
    def official_metric(self):
        """The metric that picks the best checkpoint."""
        raise NotImplementedError

    def evaluate(self, model, data, split, vocab, batch_size,
                 dynamic_length=False):
        """{metric: value} of `model` on a split, through the same
        post-processing as the serving signature ({} without labels)."""
        raise NotImplementedError

    def update_spec(self, best_results):
        """Spec keys decided by the best evaluation (e.g. a threshold)."""
        return {}

    def eval_dataset(self, data, split, vocab, build, *settings):
        """`build()` (a split's evaluation batches), made once per split
        and settings: evaluation after each epoch reuses the dataset."""
        raise NotImplementedError


class HFHead(typing.Protocol):
    """A kind's `hf_head.py` module (`Task.hf_head`): which fine-tuned HF
    checkpoints become runs of the kind (`bert_tf.tasks.hf_runs`)."""

    # The `config.json` architecture suffixes it takes, e.g.
    # `("ForSequenceClassification",)`.
    ARCHITECTURES: tuple

    def spec_fields(self, hf_config, family):
        """The run spec's fields the checkpoint decides (labels, pooling,
        lengths), from its `config.json` and model family."""

    def assign(self, model, tensors, family, where):
        """Sets `model`'s head from the checkpoint's `tensors` (the
        encoder's are set apart); `where` names the checkpoint in
        errors."""


# Each part's members, as docs/architecture.md counts them.
PARTS = {"Training": Training, "Serving": Serving,
         "RunServing": RunServing, "CommandLine": CommandLine,
         "HFHead": HFHead}


def members(part):
    """The public members a part declares (not inherited ones).

    Examples:
        >>> {name: len(members(part)) for name, part in PARTS.items()}
        {'Training': 11, 'Serving': 7, 'RunServing': 3, 'CommandLine': 9, 'HFHead': 3}
    """
    own = vars(part)
    names = [n for n in own if not n.startswith("_")]
    names += [n for n in getattr(part, "__annotations__", {})
              if n not in names and not n.startswith("_")]
    return sorted(names)
