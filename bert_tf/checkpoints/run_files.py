"""Checkpoints that survive the storage: resume from the newest one that
reads, write one without leaving debris, replace the best model whole.

A checkpoint is read in full before it is restored, so a truncated data
file, a missing shard or a damaged index is found up front (also in the
optimizer's slots, which Keras restores only when it first builds them),
reported by name and skipped for the next older one.
"""

import json
import re

import tensorflow as tf

from bert_tf.config_io import WEIGHTS_PREFIX
from bert_tf.safe_io import (StorageError, directory_bytes, guarded_write,
                             recover_directory, remove_quietly,
                             replace_directory)
from bert_tf.storage import GPath

UNREADABLE = "unreadable"  # where bad checkpoints are moved, beside the good


def _step(prefix):
    match = re.search(r"-(\d+)$", str(prefix))
    return int(match.group(1)) if match else -1


def candidates(directory):
    """Checkpoint prefixes in `directory`, newest first: those its state
    file lists and every `*.index` beside them."""
    directory = GPath(directory)
    names = {p.name[:-len(".index")] for p in directory.glob("*.index")}
    try:
        state = tf.train.get_checkpoint_state(str(directory))
    except (tf.errors.OpError, ValueError):  # a damaged state file
        state = None
    if state is not None:
        names |= {GPath(p).name for p in state.all_model_checkpoint_paths}
    return sorted((str(directory / name) for name in names), key=_step,
                  reverse=True)


def files_of(prefix):
    """The files of checkpoint `prefix` that exist."""
    prefix = GPath(prefix)
    return sorted(prefix.parent.glob(prefix.name + ".*"))


def read_error(prefix):
    """None if every tensor of checkpoint `prefix` reads, else why not (one
    line)."""
    try:
        reader = tf.compat.v1.train.NewCheckpointReader(str(prefix))
        dtypes = reader.get_variable_to_dtype_map()
        names = sorted(dtypes)
        # RestoreV2, not `get_tensor`: it also reads the input iterator's
        # variant state. A few tensors at a time bounds the memory.
        for i in range(0, len(names), 32):
            chunk = names[i:i + 32]
            tf.raw_ops.RestoreV2(prefix=str(prefix), tensor_names=chunk,
                                 shape_and_slices=[""] * len(chunk),
                                 dtypes=[dtypes[n] for n in chunk])
    except Exception as error:  # noqa: BLE001 (IndexError, OpError, ...)
        text = getattr(error, "message", None) or str(error) or \
            type(error).__name__
        return f"{type(error).__name__}: {text.strip().splitlines()[0][:200]}"
    return None


def newest_readable(directory, log=print, tidy=False):
    """The newest checkpoint prefix in `directory` that reads in full (None
    if there is none at all). Each unreadable one is logged by name; with
    `tidy` (the chief) it is moved to `unreadable/` and the state file
    points at the good one, so later saves and readers agree.

    Raises:
        StorageError: checkpoints exist but none reads; lists each.
    """
    tried = []
    for prefix in candidates(directory):
        reason = read_error(prefix)
        if reason is None:
            if tried and tidy:
                _set_aside(directory, [p for p, _ in tried], prefix)
            return prefix
        names = ", ".join(p.name for p in files_of(prefix)) or \
            f"{GPath(prefix).name}.index missing"
        log(f"warning: checkpoint {prefix} does not read ({names}: "
            f"{reason}); trying the next older one")
        tried.append((prefix, reason))
    if tried:
        raise StorageError(
            f"no checkpoint in {directory} reads (tried " + "; ".join(
                f"{GPath(p).name}: {r}" for p, r in tried) + "). Restore "
            "the files from a copy, or start over in a new model_dir.")
    return None


def _set_aside(directory, bad, good):
    directory = GPath(directory)
    aside = directory / UNREADABLE
    aside.mkdir(parents=True, exist_ok=True)
    for prefix in bad:
        for path in files_of(prefix):
            path.replace(aside / path.name)
    kept = [p for p in candidates(directory) if _step(p) <= _step(good)]
    tf.compat.v1.train.update_checkpoint_state(
        str(directory), good, all_model_checkpoint_paths=kept[::-1])


def save(manager, step):
    """`manager.save` at `step`; when the storage fails it (a full disk, a
    read-only mount), the temporary and partial files are removed, the
    previous checkpoint stays the latest, and a `StorageError` says how
    much space a checkpoint needs."""
    directory = GPath(manager.directory)
    latest = manager.latest_checkpoint
    needed = directory_bytes(directory, GPath(latest).name + ".*") \
        if latest else None
    name = f"ckpt-{step}"
    existing = set(files_of(directory / name))  # never removed on failure
    partial = [directory / f"{name}_temp"]
    with guarded_write(directory, f"checkpoint {name}", needed=needed,
                       cleanup=partial):
        try:
            return manager.save(checkpoint_number=step)
        except Exception:
            # Files this save wrote before it failed.
            partial.extend(p for p in files_of(directory / name)
                           if p not in existing)
            partial.extend(directory.glob(f"{name}_temp*"))
            raise


def save_best(checkpoint, best_dir, best):
    """Writes the best model whole: the weights of `checkpoint` and
    `best.json`, beside the other files already in `best_dir` (task spec,
    vocab), staged in `best.partial` and swapped in. A failure leaves the
    previous best model as it was."""
    best_dir = GPath(best_dir)
    staging = best_dir.with_name(best_dir.name + ".partial")
    remove_quietly(staging)
    with guarded_write(best_dir, "the best model", cleanup=(staging,),
                       needed=directory_bytes(best_dir) or None):
        staging.mkdir(parents=True)
        if best_dir.is_dir():
            for path in best_dir.iterdir():
                if path.is_file() and path.name != "best.json" and \
                        not path.name.startswith(WEIGHTS_PREFIX + "."):
                    tf.io.gfile.copy(str(path), str(staging / path.name))
        checkpoint.write(str(staging / WEIGHTS_PREFIX))
        if best is not None:
            (staging / "best.json").write_text(
                json.dumps(best, indent=2) + "\n")
    replace_directory(staging, best_dir, "the best model")


def recover_best(best_dir):
    """Puts back a best model that a crash inside `save_best` left moved
    aside; clears its staging. Returns whether it moved one back."""
    best_dir = GPath(best_dir)
    remove_quietly(best_dir.with_name(best_dir.name + ".partial"))
    return recover_directory(best_dir)


__all__ = ["candidates", "files_of", "newest_readable", "read_error",
           "recover_best", "save", "save_best"]
