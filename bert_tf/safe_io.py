"""Writes that cannot corrupt what exists, and storage errors in one line.

Every file bert_tf writes for later (checkpoints, the best model, pair
manifests, exports) is staged beside its target and moved into place, so a
full disk, a read-only mount or a kill mid-write leaves the previous good
state as the latest. A failed write removes its staging files and stops
with a `StorageError`: one line naming the path, the cause and the fix,
which the CLI prints without a traceback.
"""

import contextlib
import errno
import os
import uuid

from bert_tf.storage import GPath

# Markers of each cause in OSError numbers and TensorFlow's messages.
_CAUSES = (
    ("no space", (errno.ENOSPC, errno.EFBIG, errno.EDQUOT),
     ("no space left", "file too large", "quota exceeded",
      "resourceexhausted")),
    ("read-only file system", (errno.EROFS,), ("read-only file system",)),
    ("permission denied", (errno.EACCES, errno.EPERM),
     ("permission denied", "permissiondenied")),
)
_FIXES = {
    "no space": "free space there (or point it at a larger disk) and run "
                "again",
    "read-only file system": "choose a writable location",
    "permission denied": "choose a location you may write to, or fix its "
                         "permissions",
}


class StorageError(RuntimeError):
    """A read or write that failed for a reason of the storage, not of the
    run; its message is one line: path, cause, fix."""

    def __init__(self, message, cause=None):
        super().__init__(message)
        self.cause = cause


def cause_of(error):
    """`no space`, `read-only file system`, `permission denied` or None.

    Examples:
        >>> cause_of(OSError(28, "No space left on device"))
        'no space'
        >>> cause_of(ValueError("other")) is None
        True
    """
    number = getattr(error, "errno", None)
    text = f"{type(error).__name__} {error}".lower()
    for cause, numbers, markers in _CAUSES:
        if number in numbers or any(m in text for m in markers):
            return cause
    return None


def is_storage_error(error):
    """Whether `error` came from the storage (an OSError or a TF I/O error)
    rather than from the computation."""
    if isinstance(error, (OSError, StorageError)):
        return True
    name = type(error).__name__
    return name in ("ResourceExhaustedError", "PermissionDeniedError",
                    "DataLossError", "NotFoundError", "UnavailableError",
                    "AbortedError", "FailedPreconditionError", "UnknownError",
                    "OutOfRangeError") and cause_of(error) is not None


def explain(error, path, what, needed=None):
    """The `StorageError` of `error`, raised while writing `what` to
    `path`; `needed`: the bytes a write takes, if known.

    Examples:
        >>> str(explain(OSError(28, "No space left on device"), "runs/x",
        ...             "a checkpoint", needed=2_500_000))[:95]
        'cannot write a checkpoint to runs/x: no space (a checkpoint needs about 2.5 MB); free space the'
    """
    cause = cause_of(error)
    if cause is None:
        first = (str(error).strip().splitlines() or [type(error).__name__])
        detail = first[0][:200]
        return StorageError(f"cannot write {what} to {path}: {detail}. "
                            "Check the location and run again.")
    size = f" ({what} needs about {needed / 1e6:.1f} MB)" \
        if needed and cause == "no space" else ""
    return StorageError(f"cannot write {what} to {path}: {cause}{size}; "
                        f"{_FIXES[cause]}.", cause)


def check_writable(directory, what):
    """Creates `directory` if needed and writes and removes a probe file in
    it, so a bad output location fails before any work is done.

    Examples:
        >>> check_writable("ram://doc/out", "the export")
        GPath('ram://doc/out')
    """
    directory = GPath(directory)
    probe = directory / f".bert_tf_write_check_{uuid.uuid4().hex[:8]}"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe.write_text("ok")
        probe.unlink()
    except Exception as error:  # noqa: BLE001 (any file system's error)
        if not is_storage_error(error) and cause_of(error) is None:
            raise
        raise explain(error, directory, what) from None
    return directory


def remove_quietly(*paths):
    """Removes files or directories, ignoring what is already gone."""
    for path in paths:
        path = GPath(path)
        with contextlib.suppress(Exception):
            if path.is_dir():
                path.rmtree(ignore_errors=True)
            elif path.exists():
                path.unlink()


@contextlib.contextmanager
def guarded_write(path, what, cleanup=(), needed=None):
    """Runs the write in the `with` block; if the storage fails it, removes
    `cleanup` (its staging files) and raises the one-line `StorageError`.
    Errors that are not the storage's pass through."""
    try:
        yield
    except StorageError:
        remove_quietly(*cleanup)
        raise
    except Exception as error:  # noqa: BLE001
        if not is_storage_error(error):
            raise
        remove_quietly(*cleanup)
        raise explain(error, path, what, needed) from None


def write_text_atomic(path, text, what="a file"):
    """Writes `text` to `path` through a staging file renamed into place:
    a reader sees the old content or the new, never half of it."""
    path = GPath(path)
    staging = path.with_name(f".{path.name}.{os.getpid()}.partial")
    with guarded_write(path, what, cleanup=(staging,)):
        staging.write_text(text)
        staging.replace(path)
    return path


def replace_directory(staging, target, what="a directory"):
    """Moves the finished directory `staging` to `target`. An existing
    `target` is moved aside first and removed only after the new one is in
    place; `recover_directory` puts it back after a crash in between."""
    staging, target = GPath(staging), GPath(target)
    old = target.with_name(target.name + ".old")
    with guarded_write(target, what):
        remove_quietly(old)
        if target.exists():
            target.replace(old)
        try:
            staging.replace(target)
        except Exception:
            recover_directory(target)  # the previous one back in place
            raise
    remove_quietly(old)
    return target


def recover_directory(target):
    """After a crash inside `replace_directory`: the previous `target` is
    back if no new one was moved into place. Returns whether it moved."""
    target = GPath(target)
    old = target.with_name(target.name + ".old")
    if old.is_dir() and not target.exists():
        old.replace(target)
        return True
    return False


def directory_bytes(directory, pattern="*"):
    """Bytes of the files matching `pattern` in `directory` (0 if none)."""
    total = 0
    for path in GPath(directory).glob(pattern):
        with contextlib.suppress(Exception):
            if path.is_file():
                total += path.stat().st_size
    return total


__all__ = ["StorageError", "cause_of", "check_writable", "directory_bytes",
           "explain", "guarded_write", "is_storage_error", "recover_directory",
           "remove_quietly", "replace_directory", "write_text_atomic"]
