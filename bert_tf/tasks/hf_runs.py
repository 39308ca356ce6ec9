"""Fine-tuned HF checkpoints as fine-tuning runs.

An HF checkpoint whose `config.json` names a task head in `architectures`
(`BertForSequenceClassification`, `DistilBertForQuestionAnswering`,
`ElectraForTokenClassification`, ...) becomes a run of the kind that
takes that head: a directory with `task.yaml`, `vocab.txt` and
`model.ckpt.*`, which `bert-tf export --run`, `predict` and `evaluate`
read like any `bert-tf finetune` run. Each kind says which heads it takes
and how in its own folder (`<kind>/hf_head.py`, the `hf_head` of its
`Task`); the encoder's weights come across as for an encoder
(`bert_tf.formats.hf`), the tokenizer's case from `tokenizer_config.json`.

    >>> head_of({"architectures": ["BertModel"]}) is None
    True
    >>> head_of({"architectures": ["DistilBertForSequenceClassification"]
    ...          }).kind
    'classification'
"""

import dataclasses
import json

from bert_tf import checkpoints, sources
from bert_tf import config as config_lib
from bert_tf.formats.canonical import assign_weights
from bert_tf.formats.files import find_vocab
from bert_tf.formats.hf import (check_tokenizer_json, map_hf,
                                read_hf_files)
from bert_tf.models.encoder import BertEncoder
from bert_tf.storage import GPath
from bert_tf.tasks.base import (Task, available_kinds, get_config_class,
                                get_kind, write_spec)
from bert_tf.text.vocab import read_vocab


def head_of(hf_config):
    """The `Task` class whose kind takes the head `hf_config`'s
    `architectures` names, or None (an encoder without a task head)."""
    for architecture in hf_config.get("architectures") or []:
        for kind in available_kinds():
            cls = get_kind(kind)
            head = getattr(cls, "hf_head", None)
            if issubclass(cls, Task) and head is not None and \
                    architecture.endswith(head.ARCHITECTURES):
                return cls
    return None


def hf_directory(spec, log=print):
    """The local directory of an HF checkpoint given as a directory,
    `hf:PATH` or `hf://ORG/NAME[@REV]` (fetched into the cache)."""
    resolved = str(sources.resolve(spec, log)) if sources.is_name(spec) \
        else str(spec)
    if resolved.startswith("hf:"):
        resolved = resolved[len("hf:"):]
    return GPath(resolved).expanduser()


def is_task_checkpoint(spec, log=print):
    """Whether `spec` is an HF checkpoint with a task head we take."""
    directory = hf_directory(spec, log)
    config = directory / "config.json"
    if not config.is_file():
        return False
    try:
        return head_of(json.loads(config.read_text())) is not None
    except json.JSONDecodeError:
        return False


def lower_case_of(directory, vocab, vocab_path):
    """The tokenizer's case: `do_lower_case` of `tokenizer_config.json`,
    else the vocab's. A setting the vocab contradicts is one clear error."""
    path = GPath(directory) / "tokenizer_config.json"
    settings = json.loads(path.read_text()) if path.is_file() else {}
    lower = settings.get("do_lower_case")
    if lower is None:
        return not vocab.is_cased
    if bool(lower) == vocab.is_cased:
        raise ValueError(
            f"{path}: do_lower_case = {lower}, but {vocab_path} is "
            f"{'cased' if vocab.is_cased else 'uncased'}: the checkpoint's "
            "tokenizer and vocab disagree.")
    return bool(lower)


def from_hf(spec, log=print, dtype=None, vocab_path=None, labels=None):
    """(task, model, vocab) of an HF task checkpoint (see the module
    docstring): the kind's task with its labels, and the Keras task model
    with the checkpoint's weights, encoder and head.

    Args:
        spec: a directory, `hf:PATH` or `hf://ORG/NAME[@REVISION]`.
        log: where progress lines go.
        dtype: the model's dtype policy.
        vocab_path: its vocab.txt (default: beside it). A vocab with fewer
            tokens than the embedding has rows (a vocab_size padded past
            the vocab) keeps the rows it reaches.
        labels: the class (or tag) names in id order, for a checkpoint
            whose `id2label` says only `LABEL_0`, `LABEL_1`, ...
    """
    directory = hf_directory(spec, log)
    _, hf_config, tensors = read_hf_files(directory)
    if labels is not None:
        hf_config = with_labels(hf_config, labels, directory)
    cls = head_of(hf_config)
    if cls is None:
        raise ValueError(
            f"{spec}: config.json's architectures "
            f"{hf_config.get('architectures')} name no task head this "
            "version converts (sequence classification, question "
            "answering, token classification, multiple choice); an encoder "
            "converts with `bert-tf convert` into a checkpoint.")
    config, weights, _ = map_hf(directory, tensors)
    vocab_path = GPath(vocab_path) if vocab_path else find_vocab(directory)
    vocab = read_vocab(vocab_path)
    lower_case = lower_case_of(directory, vocab, vocab_path)
    check_tokenizer_json(vocab, vocab_path, directory, lower_case)
    if vocab.size < config.vocab_size:
        log(f"{vocab_path} has {vocab.size:,} tokens and the embedding "
            f"{config.vocab_size:,} rows: the rows past the vocab, which no "
            "text reaches, are left out")
        config = dataclasses.replace(config, vocab_size=vocab.size)
        name = "bert/embeddings/word_embeddings"
        weights[name] = weights[name][:vocab.size]
    checkpoints.check_vocab_size(vocab, config, vocab_path)
    family = hf_config.get("model_type", "bert")
    fields = cls.hf_head.spec_fields(hf_config, family)
    fields["seq_length"] = min(fields.get("seq_length", 128),
                               config.max_position_embeddings)
    task_spec = config_lib.from_dict(get_config_class(cls.kind), {
        **fields, "kind": cls.kind, "name": str(spec),
        "lower_case": lower_case,
        "dropout": float(hf_config.get("classifier_dropout") or 0.1),
        "encoder": dataclasses.asdict(config)}, "spec")
    task = cls(task_spec)
    model = task.build_model(BertEncoder.from_config_object(config,
                                                            dtype=dtype))
    assign_weights(weights, model.encoder, source=str(directory))
    cls.hf_head.assign(model, tensors, family, str(directory))
    return task, model, vocab


def with_labels(hf_config, labels, where):
    """`hf_config` with `labels` (names in id order) as its `id2label`; a
    count other than the head's outputs is an error naming both."""
    labels = [str(label) for label in labels]
    count = int(hf_config.get("num_labels", len(
        hf_config.get("id2label") or {}) or len(labels)))
    if len(labels) != count:
        raise ValueError(f"{len(labels)} labels given for {where}, whose "
                         f"head has {count} outputs.")
    return {**hf_config, "id2label": dict(enumerate(labels)),
            "num_labels": count}


def read_labels(path):
    """Label names from a file, one per line in id order (blank lines
    skipped)."""
    lines = GPath(path).read_text(encoding="utf-8-sig").splitlines()
    return [line.strip() for line in lines if line.strip()]


def convert_hf_run(spec, output, log=print, vocab_path=None, labels=None):
    """Writes the run of an HF task checkpoint `spec` into `output`
    (`task.yaml`, `vocab.txt`, `model.ckpt.*`); returns the paths.
    `vocab_path` and `labels`: as in `from_hf`."""
    task, model, vocab = from_hf(spec, log, vocab_path=vocab_path,
                                 labels=labels)
    output = GPath(output)
    output.mkdir(parents=True, exist_ok=True)
    write_spec(output, task.spec)
    vocab.save(output / checkpoints.VOCAB_FILE)
    checkpoints.model_checkpoint(model.encoder, **model.checkpoint_heads()
                                 ).write(str(output /
                                             checkpoints.WEIGHTS_PREFIX))
    labels = getattr(task.spec, "labels", None)
    log(f"Converted {spec} into a {task.kind} run ("
        f"{model.count_params():,} parameters"
        + (f"; {len(labels)} labels: {', '.join(labels[:8])}"
           f"{', ...' if len(labels) > 8 else ''}" if labels else "") + ")")
    written = sorted(output.iterdir())
    for path in written:
        log(f"  wrote {path}")
    return written


__all__ = ["convert_hf_run", "from_hf", "head_of", "is_task_checkpoint",
           "read_labels"]
