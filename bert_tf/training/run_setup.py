"""What every training run does around its trainer, alike for
pre-training, fine-tuning and distillation (which is a fine-tuning run):
the dry run's plan, the dtype policy and the seed, the vocab checked
against the encoder, the files the chief writes beside the checkpoints,
and the line that says where the run is."""

import contextlib

import keras
import yaml

from bert_tf import checkpoints, config as config_lib
from bert_tf.precision import resolve_precision
from bert_tf.storage import GPath
from bert_tf.text.vocab import read_vocab
from bert_tf.training import distribute


def show_dry_run(cfg, log=print):
    """Logs the resolved config and the strategy (a TPU is not connected
    in a dry run); reads no data or weights."""
    log(yaml.safe_dump(config_lib.to_dict(cfg), sort_keys=False).rstrip())
    if cfg.strategy == "tpu":
        log(f"strategy: TPUStrategy on tpu={cfg.tpu or 'local'!r} (not "
            "connected in a dry run)")
    else:
        log("strategy: " + distribute.describe(
            distribute.create_strategy(cfg.strategy)))


def enter_policy(cfg, hidden_size, log=print):
    """`cfg` with `mixed_precision: auto` resolved for this machine and an
    encoder `hidden_size` wide; sets that Keras dtype policy and seeds the
    run (Python, NumPy and TensorFlow)."""
    cfg = resolve_precision(cfg, log, hidden_size=hidden_size)
    keras.mixed_precision.set_global_policy(cfg.mixed_precision)
    keras.utils.set_random_seed(cfg.trainer.seed)
    return cfg


@contextlib.contextmanager
def run_policy(cfg, hidden_size, log=print):
    """Yields `enter_policy(...)`, and puts the previous dtype policy back
    after, so that what the caller builds next is not in this run's
    policy."""
    previous = keras.mixed_precision.global_policy()
    try:
        yield enter_policy(cfg, hidden_size, log)
    finally:
        keras.mixed_precision.set_global_policy(previous)


def checked_vocab(path, encoder_config):
    """The vocab at `path`, failing in one line if it does not fit the
    encoder's embedding table."""
    vocab = read_vocab(path)
    checkpoints.check_vocab_size(vocab, encoder_config, path)
    return vocab


def write_run_files(trainer, files):
    """As the chief only: each of `files` ({path: function writing it})
    written, its directory made first."""
    if not trainer.is_chief:
        return
    for path, write in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        write(path)


# What a run directory holds (any one): its config, TF's checkpoint
# index, the best model, TensorBoard logs.
RUN_MARKERS = ("finetune.yaml", "pretrain.yaml", "distill.yaml",
               "checkpoint", "best", "tensorboard")


def is_run_directory(directory):
    """Whether `directory` is empty or holds what a run writes
    (`RUN_MARKERS`): what `--fresh` may move aside."""
    names = {p.name for p in GPath(directory).iterdir()}
    return not names or bool(names & set(RUN_MARKERS)) or any(
        name.startswith(("ckpt-", "model.ckpt")) for name in names)


def move_aside(model_dir, log=print):
    """Moves an existing run directory to `DIR.previous-N` (the first free
    N), so that a fresh run starts in an empty one and nothing is lost. A
    directory that is no run's (a home directory, a data folder) is
    refused, never moved."""
    model_dir = GPath(model_dir)
    if not model_dir.exists():
        return None
    if not model_dir.is_dir() or not is_run_directory(model_dir):
        raise ValueError(
            f"--fresh: {model_dir} is not a run directory (it holds none of "
            f"{', '.join(RUN_MARKERS)}); refusing to move it aside. Set "
            "trainer.model_dir to the run's own directory.")
    number = 1
    while model_dir.with_name(f"{model_dir.name}.previous-{number}").exists():
        number += 1
    aside = model_dir.with_name(f"{model_dir.name}.previous-{number}")
    model_dir.replace(aside)
    log(f"moved the previous run {model_dir} to {aside}")
    return aside


def log_start(trainer, cfg, log=print):
    log(f"strategy: {distribute.describe(trainer.strategy)}; precision "
        f"{cfg.mixed_precision}; model dir {trainer.model_dir}")
