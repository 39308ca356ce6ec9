"""Paths on any file system TensorFlow can reach.

`GPath` is the subset of `pathlib.Path` that bert_tf uses, with every
operation going through `tf.io.gfile`: local paths, `gs://`, `s3://`,
`hdfs://` and `ram://` all work the same. (etils' `epath` does this for
gs/s3/az/hf only, not `ram://` or `hdfs://`.) Local paths stay
`os.PathLike`, so `open`, NumPy and `shutil` take them as before.
"""

import builtins
import fnmatch
import io
import os
import posixpath
import re


class _LazyTensorFlow:
    """`tensorflow`, imported on first use: configs and `bert-tf --help`
    read paths without paying for the TF import."""

    def __getattr__(self, name):
        import tensorflow
        return getattr(tensorflow, name)


tf = _LazyTensorFlow()
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


def is_remote(path):
    """Whether `path` names a file system by scheme (`gs://b/x`).

    Examples:
        >>> is_remote("ram://x"), is_remote("runs/x")
        (True, False)
    """
    return bool(_SCHEME.match(str(path)))


class _Stat:
    def __init__(self, size):
        self.st_size = size


class GPath(os.PathLike):
    """A pathlib-like path backed by `tf.io.gfile`.

    Examples:
        >>> directory = GPath("ram://doc/run")
        >>> (directory / "best").mkdir(parents=True, exist_ok=True)
        >>> _ = (directory / "best" / "best.json").write_text("{}")
        >>> [p.name for p in directory.glob("*/*.json")], directory.parent
        (['best.json'], GPath('ram://doc'))
    """

    def __init__(self, *parts):
        texts = [os.fspath(p) if not isinstance(p, GPath) else p._text
                 for p in parts] or ["."]
        text = texts[0]
        for part in texts[1:]:
            text = part if part.startswith("/") or is_remote(part) else \
                text.rstrip("/") + "/" + part
        scheme = _SCHEME.match(text)
        if scheme:
            rest = text[scheme.end():]
            text = scheme.group(0) + (posixpath.normpath(rest)
                                      if rest else "")
        else:
            text = posixpath.normpath(os.path.expanduser(text)) \
                if text else "."
        self._text = text

    # === Names ===
    def __fspath__(self):
        return self._text

    def __str__(self):
        return self._text

    def __repr__(self):
        return f"GPath({self._text!r})"

    def __eq__(self, other):
        return isinstance(other, (GPath, str, os.PathLike)) and \
            self._text == str(GPath(other))

    def __hash__(self):
        return hash(self._text)

    def __lt__(self, other):
        return self._text < str(other)

    def __truediv__(self, part):
        return GPath(self, part)

    def _split(self):
        scheme = _SCHEME.match(self._text)
        prefix = scheme.group(0) if scheme else ""
        return prefix, self._text[len(prefix):]

    @property
    def name(self):
        return posixpath.basename(self._split()[1])

    @property
    def suffix(self):
        return posixpath.splitext(self.name)[1]

    @property
    def stem(self):
        return posixpath.splitext(self.name)[0]

    @property
    def parent(self):
        prefix, rest = self._split()
        return GPath(prefix + (posixpath.dirname(rest) or
                               ("." if not prefix else "")))

    def with_name(self, name):
        return self.parent / name

    def with_suffix(self, suffix):
        return self.parent / (self.stem + suffix)

    def expanduser(self):
        return self

    # === Queries ===
    def _listed(self):
        # `ram://` answers exists/isdir by key prefix ("ckpt-1" "exists"
        # beside "ckpt-10.index"); its parent's listing is exact.
        if not self._text.startswith("ram://"):
            return True
        try:
            names = tf.io.gfile.listdir(str(self.parent))
        except tf.errors.NotFoundError:
            return False
        return self.name in {n.rstrip("/") for n in names}

    def exists(self):
        return tf.io.gfile.exists(self._text) and self._listed()

    def is_dir(self):
        return tf.io.gfile.isdir(self._text) and self._listed()

    def is_file(self):
        return self.exists() and not self.is_dir()

    def stat(self):
        return _Stat(tf.io.gfile.stat(self._text).length)

    def iterdir(self):
        if self._text.startswith("ram://"):  # listdir there is by prefix
            names = [posixpath.basename(p) for p in
                     tf.io.gfile.glob(self._text + "/*")]
        else:
            names = [n.rstrip("/") for n in tf.io.gfile.listdir(self._text)]
        return [self / name for name in sorted(names)]

    def _walk(self):
        """(directory, its files) for this directory and every one below."""
        files = []
        below = []
        for child in self.iterdir():
            (below if child.is_dir() else files).append(child)
        yield self, files
        for directory in below:
            yield from directory._walk()

    def glob(self, pattern):
        # gfile's glob matches one level per `*`, like pathlib's.
        return sorted(GPath(p) for p in tf.io.gfile.glob(
            str(self / pattern)) if fnmatch.fnmatch(
                posixpath.basename(p), posixpath.basename(pattern)))

    def rglob(self, pattern):
        """Every file or directory below this one whose name matches."""
        found = []
        for directory, files in self._walk():
            if directory != self and fnmatch.fnmatch(directory.name, pattern):
                found.append(directory)
            found += [f for f in files if fnmatch.fnmatch(f.name, pattern)]
        return sorted(found)

    # === Reading and writing ===
    def open(self, mode="r", encoding=None, errors=None, newline=None):
        """A file object; text reads decode with `encoding` and
        `errors` as `open` does (remote text is read whole)."""
        text = "b" not in mode
        if not is_remote(self._text):
            return builtins.open(
                self._text, mode, encoding=(encoding or "utf-8") if text
                else None, errors=errors if text else None,
                newline=newline if text else None)
        if text and "r" in mode:
            return io.StringIO(self.read_bytes().decode(
                encoding or "utf-8", errors or "strict"), newline=newline)
        return tf.io.gfile.GFile(self._text, mode)

    def read_bytes(self):
        with tf.io.gfile.GFile(self._text, "rb") as f:
            return f.read()

    def read_text(self, encoding="utf-8", errors="strict"):
        return self.read_bytes().decode(encoding, errors)

    def write_bytes(self, data):
        if self._text.startswith("ram://") and self.is_file():
            self.unlink()  # ram:// appends to an existing file
        with tf.io.gfile.GFile(self._text, "wb") as f:
            f.write(data)
        return len(data)

    def write_text(self, text, encoding="utf-8"):
        return self.write_bytes(text.encode(encoding))

    def mkdir(self, parents=False, exist_ok=False):
        if self.exists():
            if not exist_ok:
                raise FileExistsError(f"{self} exists.")
            return
        if parents:
            tf.io.gfile.makedirs(self._text)
        else:
            tf.io.gfile.mkdir(self._text)

    def unlink(self, missing_ok=False):
        if missing_ok and not self.exists():
            return
        tf.io.gfile.remove(self._text)

    def rmtree(self, ignore_errors=False):
        """Removes this directory and everything in it."""
        if ignore_errors and not self.exists():
            return
        if not self._text.startswith("ram://"):
            tf.io.gfile.rmtree(self._text)
            return
        # ram://'s own recursive delete lists by key prefix and trips
        # over names such as assets/ beside assets.extra/.
        directories = []
        for directory, files in self._walk():
            directories.append(directory)
            for path in files:
                tf.io.gfile.remove(str(path))
        for directory in directories[::-1]:
            try:
                tf.io.gfile.remove(str(directory))
            except tf.errors.NotFoundError:
                pass

    def rename(self, target):
        """Moves this file or directory to `target`. Object stores (and
        `ram://`) cannot rename a directory: its files are copied, then
        removed."""
        target = GPath(target)
        if not (self.is_dir() and is_remote(self._text)):
            tf.io.gfile.rename(self._text, str(target), overwrite=True)
            return target
        for directory, files in self._walk():
            relative = str(directory)[len(self._text):].lstrip("/")
            (target / relative).mkdir(parents=True, exist_ok=True)
            for path in files:
                tf.io.gfile.copy(str(path), str(target / relative / path.name),
                                 overwrite=True)
        self.rmtree()
        return target

    replace = rename
