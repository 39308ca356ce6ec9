"""`hf://ORG/NAME[@REVISION]`: checkpoints fetched from the Hugging Face Hub
by name, through `huggingface_hub`.

Everything that library does for its own users holds here: its cache
(`HF_HOME`, `HF_HUB_CACHE`), `HF_ENDPOINT`, offline mode (`HF_HUB_OFFLINE=1`
reads the cache only), the token (`HF_TOKEN` or `hf auth login`), progress
bars and resumed downloads. On top of it, each file fetched is checked
against the hash the Hub gave for it (its ETag: the SHA-256 of an LFS file,
the git blob id of a small one); a file that does not match is deleted and
never used. Any failure is one line naming the name and the cache.
"""

import contextlib
import hashlib
import logging
import os
from pathlib import Path

SCHEME = "hf://"
WEIGHTS = ("model.safetensors", "pytorch_model.bin")
OPTIONAL = ("tokenizer_config.json",)
# How long a request to the Hub waits for an answer before it gives up.
CONNECT_SECONDS = 5


class HubError(FileNotFoundError):
    """A name that could not be fetched or read from the cache."""


def is_hub_name(value):
    return str(value).startswith(SCHEME)


def parse(spec):
    """(repo id, revision or None) of `hf://ORG/NAME[@REVISION]`.

    Examples:
        >>> parse("hf://google-bert/bert-base-uncased@main")
        ('google-bert/bert-base-uncased', 'main')
    """
    repo, _, revision = str(spec)[len(SCHEME):].partition("@")
    parts = repo.split("/")
    if not is_hub_name(spec) or not 1 <= len(parts) <= 2 or \
            not all(parts) or (revision == "" and "@" in str(spec)):
        raise ValueError(f"{spec}: a hub name is hf://ORG/NAME or "
                         "hf://ORG/NAME@REVISION.")
    return repo, revision or None


def cache_dir():
    """The huggingface_hub cache in use (HF_HUB_CACHE, or HF_HOME/hub)."""
    from huggingface_hub import constants
    return Path(constants.HF_HUB_CACHE)


def download(spec, log=print):
    """The local directory holding `spec`'s config.json, vocab.txt and
    weights (safetensors preferred), downloaded once into the cache.

    Raises:
        HubError: one line naming `spec` and the cache directory.
    """
    repo, revision = parse(spec)
    where = f"{spec} (cache {cache_dir()})"
    config = Path(_fetch(repo, "config.json", revision, where, log, True))
    # The snapshot directory is named by the commit: every other file comes
    # from it, even if the branch moves during the download.
    commit = config.parent.name
    _fetch(repo, "vocab.txt", commit, where, log, True)
    if _fetch(repo, WEIGHTS[0], commit, where, log, False) is None:
        _fetch(repo, WEIGHTS[1], commit, where, log, True)
    for name in OPTIONAL:
        _fetch(repo, name, commit, where, log, False)
    return config.parent


def _fetch(repo, name, revision, where, log, required):
    from huggingface_hub import hf_hub_download, try_to_load_from_cache
    from huggingface_hub import errors
    cached = try_to_load_from_cache(repo, name, revision=revision)
    if isinstance(cached, str):
        return cached
    if cached is not None and not required:  # cached as absent
        return None
    if _offline() or (name == "config.json" and not _reachable()):
        raise HubError(_offline_message(where, name))
    if name == "config.json":  # said at once: the network may be slow
        log(f"fetching {repo} from {_endpoint()} into {cache_dir()} "
            "(HF_HUB_OFFLINE=1 reads the cache only)")
    try:
        # HF_ENDPOINT read now, not when huggingface_hub was imported; its
        # retry warnings off (the error below says it in one line).
        with _quiet_hub_logger():
            path = hf_hub_download(repo, name, revision=revision,
                                   endpoint=os.environ.get("HF_ENDPOINT"),
                                   etag_timeout=CONNECT_SECONDS)
    except errors.EntryNotFoundError as e:
        if isinstance(e, errors.LocalEntryNotFoundError):
            raise HubError(_offline_message(where, name)) from None
        if not required:
            return None
        raise HubError(f"{where} has no {name}"
                       f"{' or ' + WEIGHTS[0] if name == WEIGHTS[1] else ''}"
                       ": it is not a BERT-family checkpoint in the HF "
                       "layout.") from None
    except errors.RevisionNotFoundError:
        raise HubError(f"{where}: no revision {revision!r} in "
                       f"{repo}.") from None
    except errors.RepositoryNotFoundError:
        raise HubError(f"{where}: no such model repository (or it is "
                       "private or gated: set HF_TOKEN).") from None
    except (errors.HfHubHTTPError, OSError, ValueError) as e:
        raise HubError(f"{where}: could not download {name} "
                       f"({_first_line(e)}); what arrived is kept apart "
                       "and the next try resumes it.") from None
    _verify(path, where, name)
    log(f"Fetched {name} of {repo}@{Path(path).parent.name[:12]} into "
        f"{cache_dir()}")
    return path


@contextlib.contextmanager
def _quiet_hub_logger():
    logger = logging.getLogger("huggingface_hub")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _endpoint():
    from huggingface_hub import constants
    return os.environ.get("HF_ENDPOINT") or constants.ENDPOINT


def _offline():
    """Offline mode, as set now (huggingface_hub reads it at import)."""
    from huggingface_hub import constants
    value = os.environ.get("HF_HUB_OFFLINE")
    if value is not None:
        return value.strip().upper() in ("1", "ON", "YES", "TRUE")
    return bool(constants.HF_HUB_OFFLINE)


def _reachable(seconds=CONNECT_SECONDS):
    """Whether the endpoint's host takes a connection within `seconds`,
    its name lookup included (huggingface_hub's own retries take about 25
    s to give up without a network). Behind a proxy: not probed."""
    import socket
    import threading
    import urllib.parse

    if any(os.environ.get(k) for k in ("HTTPS_PROXY", "https_proxy",
                                       "HTTP_PROXY", "http_proxy",
                                       "ALL_PROXY", "all_proxy")):
        return True
    url = urllib.parse.urlsplit(_endpoint())
    port = url.port or (443 if url.scheme == "https" else 80)
    answered = []

    def probe():
        try:
            socket.create_connection((url.hostname, port),
                                     timeout=seconds).close()
            answered.append(True)
        except (OSError, UnicodeError):
            pass

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(seconds)
    return bool(answered)


def _offline_message(where, name):
    if _offline():
        reason = "offline mode (HF_HUB_OFFLINE=1) is on"
    else:
        reason = (f"{_endpoint()} could not be reached (set "
                  "HF_HUB_OFFLINE=1 to read the cache only, at once)")
    return (f"{where}: {name} is not in the cache and {reason}; fetch it "
            "once with a network.")


def _first_line(error):
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def _verify(path, where, name):
    """Checks the fetched file against its blob name (the Hub's ETag)."""
    blob = Path(os.path.realpath(path))
    expected = blob.name
    if len(expected) == 64:
        actual = _digest(blob, hashlib.sha256())
    elif len(expected) == 40:  # a git blob id: sha1 of "blob SIZE\0" + data
        digest = hashlib.sha1(f"blob {blob.stat().st_size}\0".encode())
        actual = _digest(blob, digest)
    else:
        return  # a hub that gives other ETags: huggingface_hub's size check
    if actual != expected:
        blob.unlink(missing_ok=True)
        Path(path).unlink(missing_ok=True)
        raise HubError(f"{where}: the downloaded {name} has hash {actual}, "
                       f"but the hub says {expected}: the download is "
                       "corrupt; it was deleted, nothing was used.")


def _digest(path, digest):
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
