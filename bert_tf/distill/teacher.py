"""The teacher (a fine-tuning run or an export) and the student's start:
its task section, its init (cut to chosen blocks) and its vocab."""

import dataclasses
import json

from bert_tf import checkpoints, config as config_lib, finetune
from bert_tf.models.encoder import BertEncoder
from bert_tf.serving.export import EXPORT_FIELDS, load_exported
from bert_tf.serving.weights import restore_exported_weights
from bert_tf.storage import GPath
from bert_tf.tasks import fine_tuned_kinds, get_task_class, read_spec
from bert_tf.tasks.base import (build_encoder, restore_finetuned,
                                task_config_of)
from bert_tf.text.vocab import read_vocab

# Teacher spec fields that are the run's, not the student task's.
RUN_ONLY = ("seq_length", "lower_case", "dropout", "encoder", "pair",
            "metrics")


def teaching_kinds():
    """The kinds whose runs can teach (their `Task.can_teach`)."""
    return [kind for kind in fine_tuned_kinds()
            if get_task_class(kind).can_teach()]


def teacher_of(directory):
    """(spec, model, vocab, best directory or None) of the teacher: a
    fine-tuning run, or a SavedModel of `bert-tf export` (its weights are
    read into the same task model). A kind that cannot teach is a clear
    error."""
    path = GPath(directory)
    exported = (path / "saved_model.pb").is_file()
    best, spec = (None, _export_spec(path)) if exported else \
        read_spec(directory)
    task = get_task_class(spec.kind)(spec)
    if not task.can_teach():
        raise ValueError(
            f"teacher {directory} is a {spec.kind} run; distillation "
            f"supports {', '.join(teaching_kinds())} teachers.")
    if exported:
        model, vocab = _restore_export(task, path)
    else:
        model, vocab = restore_finetuned(task, best)
    return spec, model, vocab, best


def _export_spec(path):
    info = path / "assets.extra" / "bert_tf.json"
    if not info.is_file():
        raise FileNotFoundError(f"teacher {path} has no assets.extra/"
                                "bert_tf.json: it was not written by "
                                "`bert-tf export`.")
    data = json.loads(info.read_text())
    if "encoder" not in data:
        raise ValueError(
            f"teacher {path} was exported by an older bert_tf that did not "
            "record the encoder's shape: export the run again, or name the "
            "run directory as the teacher.")
    for key in EXPORT_FIELDS:
        data.pop(key, None)
    return task_config_of(data, "", spec=True)


def _restore_export(task, path):
    """(model, vocab) of an export: the task model built from its spec,
    with the export's weights (`restore_exported_weights`)."""
    loaded = load_exported(path)  # a damaged export is named, file by file
    model = task.build_model(build_encoder(task.spec))
    if not restore_exported_weights(model, loaded, path):
        raise ValueError(f"teacher {path}: its variables do not fit the "
                         f"{task.kind} model its bert_tf.json describes.")
    return model, read_vocab(path / "assets" / checkpoints.VOCAB_FILE)


def student_task(cfg, teacher_spec):
    """The student's `task:` section: the teacher's data and labels, with
    what the distillation config's own `task:` sets on top."""
    fields = {k: v for k, v in config_lib.to_dict(teacher_spec).items()
              if k not in RUN_ONLY}
    return {**fields, **cfg.task}


def student_init(cfg, teacher_best):
    """The `finetune.Init` of the student: `cfg.init` (or the encoder of
    the teacher's run `teacher_best` with `init: teacher`), cut to
    `cfg.layers`."""
    if cfg.init == "teacher":
        if teacher_best is None:
            raise ValueError("init: teacher reads the teacher's run "
                             "directory; an exported teacher has none: "
                             "name the run, or another init.")
        full = _teacher_encoder_init(teacher_best)
    else:
        full = finetune.resolve_init(cfg)
    if not cfg.layers:
        return full
    depth = full.encoder.num_layers
    if max(cfg.layers) >= depth:
        raise ValueError(f"layers = {cfg.layers}: the init encoder has "
                         f"{depth} blocks (0 to {depth - 1}).")
    config = dataclasses.replace(full.encoder, num_layers=len(cfg.layers))

    def restore(student):
        source = BertEncoder.from_config_object(full.encoder)
        full.restore(source)
        student.embeddings.set_weights(source.embeddings.get_weights())
        student.pooler.set_weights(source.pooler.get_weights())
        for block, index in zip(student.transformer_layers, cfg.layers):
            block.set_weights(source.transformer_layers[index].get_weights())

    return finetune.Init(config, full.vocab_path, restore,
                         f"{full.description}, blocks {cfg.layers}")


def _teacher_encoder_init(best):
    encoder_config = config_lib.from_dict(
        config_lib.EncoderConfig, read_spec(best)[1].encoder, "encoder")
    return finetune.Init(
        encoder_config, best / checkpoints.VOCAB_FILE,
        lambda encoder: checkpoints.restore_model(
            best / checkpoints.WEIGHTS_PREFIX, encoder),
        f"the teacher's encoder ({best})")


def check_same_vocab(teacher_vocab, student_vocab_path):
    student = read_vocab(student_vocab_path)
    if tuple(student.tokens) != tuple(teacher_vocab.tokens):
        raise ValueError(
            f"the student's vocab ({student_vocab_path}, {student.size} "
            f"tokens) differs from the teacher's ({teacher_vocab.size} "
            "tokens): a student reads the teacher's word pieces, so give it "
            "the teacher's vocab (an init with the same vocab, or "
            "`vocab:` pointing at the teacher's best/vocab.txt).")
