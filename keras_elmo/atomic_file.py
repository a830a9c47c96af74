"""Atomic writes: a file or directory appears under its name complete, or not at all.

Every file keras-elmo writes (weights.hdf5, options.json, vocabularies, corpora, embedding
files, token caches, SavedModels) goes through this module: the content is written to a
hidden temporary beside the target (`.NAME.<random>.tmp`), flushed, and renamed onto the
target only when the writer finished without an error. A killed process leaves the previous
version (or nothing), never half a file; a failed writer removes its temporary.

Imports nothing but the standard library (the command line uses it before TensorFlow).

Example:
>>> with atomic_writer("out/vocab.txt") as handle:  # doctest: +SKIP
...     handle.write("<S>\\n</S>\\n<UNK>\\n")
>>> with atomic_path("out/weights.hdf5") as tmp:  # doctest: +SKIP
...     with h5py.File(tmp, "w") as f: ...
"""

import contextlib
import os
import shutil
import tempfile

#: Permissions of a file made by `open(path, "w")` before the umask (mkstemp uses 0o600).
_DEFAULT_FILE_MODE = 0o666
#: Suffix of every temporary this module makes (`.NAME.<random>.tmp`).
TEMP_SUFFIX = ".tmp"


def _current_umask():
    umask = os.umask(0)
    os.umask(umask)
    return umask


def temp_prefix(path):
    """The name prefix of the temporaries made for `path` (`.NAME.`)."""
    return f".{os.path.basename(os.fspath(path))}."


@contextlib.contextmanager
def atomic_path(path):
    """Yields a temporary file name beside `path`; renames it onto `path` on success.

    For writers that open files by name (h5py). The temporary exists (empty) when the body
    starts; if the body raises, it is removed and `path` is untouched.

    Args:
        path: the final file name; its directory must exist.
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp_path = tempfile.mkstemp(prefix=temp_prefix(path), suffix=TEMP_SUFFIX,
                                    dir=directory)
    os.close(fd)
    try:
        yield tmp_path
        os.chmod(tmp_path, _DEFAULT_FILE_MODE & ~_current_umask())
        os.replace(tmp_path, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp_path)
        raise


@contextlib.contextmanager
def atomic_writer(path, mode="w", encoding="utf-8"):
    """Opens a temporary file beside `path`; renames it onto `path` only on success.

    Args:
        path: the final file name; its directory must exist.
        mode: "w" (text, `encoding` used, "\\n" line ends) or "wb" (bytes).

    Example:
        >>> with atomic_writer("out/train.txt") as handle:  # doctest: +SKIP
        ...     handle.write("a b c\\n")
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"Expected mode 'w' or 'wb'. Received: mode={mode!r}")
    with atomic_path(path) as tmp_path:
        if mode == "wb":
            handle = open(tmp_path, "wb")
        else:
            handle = open(tmp_path, "w", encoding=encoding, newline="\n")
        with handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())


def atomic_copy(source, target):
    """Copies the file `source` to `target` atomically."""
    with open(source, "rb") as src, atomic_writer(target, "wb") as dst:
        shutil.copyfileobj(src, dst)


@contextlib.contextmanager
def atomic_directory(path, replace=False):
    """Yields a temporary directory beside `path`; moves it to `path` on success.

    Args:
        path: the final directory; its parent is created if missing.
        replace: bool, an existing `path` is replaced (it stays in place, usable, until the
            new directory is complete). False: `path` must not exist or be empty.

    Raises:
        ValueError: `path` is a file, or a non-empty directory while `replace` is False.
    """
    path = os.fspath(path)
    if os.path.isfile(path):
        raise ValueError(f"{path} is a file; expected a directory to create.")
    if os.path.isdir(path) and os.listdir(path) and not replace:
        raise ValueError(f"{path} already exists and is not empty; expected a new path.")
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=temp_prefix(path), suffix=TEMP_SUFFIX, dir=parent)
    try:
        yield staging
        _swap_in(staging, path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _swap_in(staging, path):
    """Moves the complete `staging` directory to `path`, replacing what is there."""
    if not os.path.exists(path):
        os.replace(staging, path)
        return
    parent = os.path.dirname(os.path.abspath(path))
    retired = tempfile.mkdtemp(prefix=temp_prefix(path), suffix=".old" + TEMP_SUFFIX,
                               dir=parent)
    os.rmdir(retired)
    os.replace(path, retired)  # the old version, complete, under a hidden name
    try:
        os.replace(staging, path)
    except BaseException:
        os.replace(retired, path)
        raise
    shutil.rmtree(retired, ignore_errors=True)
