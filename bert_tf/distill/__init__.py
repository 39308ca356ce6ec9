"""`bert-tf distill`: a fine-tuned teacher teaches a smaller student.

A `DistillConfig` (`config.py`) is a fine-tuning config of the student
(its `init`, `encoder`, schedule, trainer) plus the teacher and the
recipe: `layers` keeps chosen blocks of the student's init encoder
(DistilBERT's initialisation), `temperature` and `alpha` weigh the soft
and hard losses (`bert_tf.models.distiller`), `unlabeled` and `augment`
add text to the transfer set, `hidden_weight` and `attention_weight`
match intermediate blocks. The teacher (`teacher.py`: a run or an export)
gives its logits over the transfer set (`transfer.py`) once, before
training; then the student trains through the ordinary fine-tuning run
(`finetune.run`), so its `best/` exports, converts to TFLite, evaluates
and predicts like any run.

Teachers: classification (one soft distribution per text or text
pair; a score for regression; for a long-document classifier, per
document, on the logits its windows pool to), tagging (one per word, read at its first
piece in each window) and span QA (start and end distributions per
window).
"""

import dataclasses

from bert_tf import finetune
from bert_tf.distill.config import DistillConfig, load, load_dict
from bert_tf.distill.teacher import (RUN_ONLY, check_same_vocab,
                                     student_init, student_task,
                                     teacher_of, teaching_kinds)
from bert_tf.distill.transfer import TransferSet
from bert_tf.models.distiller import checked_layer_map


def run(cfg, log=print, fresh=False):
    """Distils as `cfg` says; returns the student's `FinetuneResult`.
    Every check (teacher kind, vocab, layers, transfer set) runs before
    training. A finished student run says so and stops, unless `fresh`
    (see `finetune.run`)."""
    finished = finetune.already_finished(cfg, fresh, log)
    if finished is not None:
        return finished
    teacher_spec, teacher, teacher_vocab, best = teacher_of(cfg.teacher)
    cfg = dataclasses.replace(cfg, task=student_task(cfg, teacher_spec))
    finetune.task_of(cfg)  # the merged task section still reads
    init = student_init(cfg, best)
    check_same_vocab(teacher_vocab, init.vocab_path)
    if cfg.matches_layers:  # the distiller checks again; this is earlier
        checked_layer_map(init.encoder, teacher.encoder.config,
                          cfg.layer_map, cfg.attention_weight)
    task_cls, spec = finetune.task_of(cfg)
    data = task_cls.load_data(spec)
    task = task_cls(dataclasses.replace(
        spec, **{k: getattr(teacher_spec, k) for k in RUN_ONLY
                        if k not in ("encoder", "seq_length") and
                        hasattr(teacher_spec, k)},
        seq_length=cfg.seq_length))
    transfer = TransferSet(cfg, task, teacher, teacher_vocab,
                           lambda: teacher_of(cfg.teacher)[1], log)
    transfer.texts(task, data)  # an empty transfer set fails now
    log(f"teacher {cfg.teacher} ({teacher_spec.kind}, L="
        f"{teacher.encoder.config.num_layers} H="
        f"{teacher.encoder.config.hidden_size}); temperature "
        f"{cfg.temperature:g}, alpha {cfg.alpha:g}")
    return finetune.run(cfg, log=log, init=init, variant=transfer)


__all__ = ["DistillConfig", "TransferSet", "load",
           "load_dict", "run", "teacher_of", "teaching_kinds"]
