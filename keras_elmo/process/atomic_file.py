"""Atomic writes: a file or directory appears under its name complete, or not at all.

Every file keras-elmo writes (weights.hdf5, options.json, vocabularies, corpora, embedding
files, token caches, SavedModels) goes through this module: the content is written to a
hidden temporary beside the target (`.NAME.<pid>@<host>@<random>.tmp`), flushed, and renamed onto
the target only when the writer finished without an error. A killed process leaves the
previous version (or nothing), never half a file; a failed writer removes its temporary, and
the temporaries a killed process left (`kill -9`) are removed by the next atomic write in the
same folder, whatever its name (`remove_stale_temporaries`: their process on this host is
gone; one of another host, or of the older naming, when it is a day old and of the same
target; `keras_elmo.process.file_lock.holder_gone` tells). A
directory replaced by `atomic_directory(..., replace=True)` is swapped in with one
`renameat2(RENAME_EXCHANGE)` on Linux, so the name never stands empty.

Storage faults: each writer names `what` it writes; a full disk, a quota, a read-only
filesystem or a missing permission, met anywhere in the write (the temporary's creation,
the writer's own calls, the rename), becomes one `StorageError` line naming the final path,
what it is and what is intact (`keras_elmo.process.storage_errors`), after the temporary is
removed. A write whose size is known (`needed`) is refused before it starts when less is
free.

Imports nothing but the standard library (the command line uses it before TensorFlow).

Example:
>>> with atomic_writer("out/vocab.txt") as handle:  # doctest: +SKIP
...     handle.write("<S>\\n</S>\\n<UNK>\\n")
>>> with atomic_path("out/weights.hdf5") as tmp:  # doctest: +SKIP
...     with h5py.File(tmp, "w") as f: ...
"""

import contextlib
import ctypes
import errno
import ctypes.util
import os
import re
import shutil
import tempfile

from keras_elmo.process.file_lock import holder_gone, host_name
from keras_elmo.process.storage_errors import check_free_space, storage_guard

#: Permissions of a file made by `open(path, "w")` before the umask (mkstemp uses 0o600).
_DEFAULT_FILE_MODE = 0o666
#: Suffix of every temporary this module makes (`.NAME.<random>.tmp`).
TEMP_SUFFIX = ".tmp"
#: `renameat2` flag: swap two existing names atomically (Linux >= 3.15).
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


#: A temporary of this module: `.NAME.<pid>@<host>@<random>[.old].tmp`.
_TEMPORARY = re.compile(r"\..+\.(?P<pid>\d+)@(?P<host>[^@]+)@[^@]*\.tmp")


def _current_umask():
    umask = os.umask(0)
    os.umask(umask)
    return umask


def temp_prefix(path):
    """The name prefix of the temporaries made for `path` (`.NAME.`)."""
    return f".{os.path.basename(os.fspath(path))}."


def _own_prefix(path):
    """`.NAME.<pid>@<host>@`: the prefix of this process's temporaries for `path`."""
    return f"{temp_prefix(path)}{os.getpid()}@{_host()}@"


#: This host's name as temporaries carry it (`file_lock.host_name`).
_host = host_name


def remove_stale_temporaries(path):
    """Removes the temporaries that killed processes left in `path`'s folder.

    A temporary `.ANY_NAME.<pid>@<host>@<random>[.old].tmp` of this host is stale when no
    process `pid` runs, whatever target it was for (a killed `keras-elmo embed` leaves no
    orphan behind the next write in its folder). One of `path` itself that cannot be told
    (another host's, or the older naming without a pid) is stale when it is older than
    `STALE_SECONDS`. Temporaries of live writers are left alone.

    Returns:
        list of the removed paths.
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    prefix = temp_prefix(path)
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    removed = []
    for name in names:
        full = os.path.join(directory, name)
        ours = _TEMPORARY.fullmatch(name)
        if ours is not None and ours.group("host") == host_name():
            stale = holder_gone(int(ours.group("pid")), ours.group("host"))
        elif name.startswith(prefix) and name.endswith(TEMP_SUFFIX):
            try:  # another host's, or the older naming: only its age tells
                stale = holder_gone(None, None, mtime=os.lstat(full).st_mtime)
            except OSError:
                stale = False
        else:
            stale = False
        if not stale:
            continue
        remove_quietly(full)
        removed.append(full)
    return removed


def remove_quietly(path):
    """Removes a file or a directory tree, ignoring what is already gone or cannot go (the
    clean-up of a failed or killed write must not raise an error of its own)."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            os.remove(path)


@contextlib.contextmanager
def atomic_path(path, what="the file", needed=None):
    """Yields a temporary file name beside `path`; renames it onto `path` on success.

    For writers that open files by name (h5py). The temporary exists (empty) when the body
    starts; if the body raises, it is removed and `path` is untouched.

    Args:
        path: the final file name; its directory must exist.
        what: what the file is, for the line of a storage fault (`"the vocabulary"`).
        needed: int, bytes the file will take (at least), checked against the free space
            before anything is written; None when not known.

    Raises:
        StorageError: a storage fault (full, quota, read-only, permission), or less than
            `needed` free; the temporary is removed first.
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    if needed is not None:
        check_free_space(path, needed, what, intact=_intact(path, "nothing was written"))
    with storage_guard(path, what, intact=_intact(path, "no partial file was left"),
                       needed=needed):
        remove_stale_temporaries(path)
        fd, tmp_path = tempfile.mkstemp(prefix=_own_prefix(path), suffix=TEMP_SUFFIX,
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


def _intact(path, done):
    """What a failed write of `path` leaves: `done` (no part of it), and the earlier
    version if there is one."""
    before = f"; {path} as it was before is untouched" if os.path.exists(path) else ""
    return f"{done}{before}"


@contextlib.contextmanager
def atomic_writer(path, mode="w", encoding="utf-8", what="the file", needed=None):
    """Opens a temporary file beside `path`; renames it onto `path` only on success.

    Args:
        path: the final file name; its directory must exist.
        mode: "w" (text, `encoding` used, "\\n" line ends) or "wb" (bytes).
        what, needed: as `atomic_path`'s (a storage fault is one `StorageError` line).

    Example:
        >>> with atomic_writer("out/train.txt", what="the corpus") as handle:  # doctest: +SKIP
        ...     handle.write("a b c\\n")
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"Expected mode 'w' or 'wb'. Received: mode={mode!r}")
    with atomic_path(path, what=what, needed=needed) as tmp_path:
        if mode == "wb":
            handle = open(tmp_path, "wb")
        else:
            handle = open(tmp_path, "w", encoding=encoding, newline="\n")
        with handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())


def atomic_copy(source, target, what="the file"):
    """Copies the file `source` to `target` atomically (its size checked against the free
    space first)."""
    with open(source, "rb") as src, atomic_writer(target, "wb", what=what,
                                                  needed=os.fstat(src.fileno()).st_size) as dst:
        shutil.copyfileobj(src, dst)


@contextlib.contextmanager
def atomic_directory(path, replace=False, what="the directory", needed=None):
    """Yields a temporary directory beside `path`; moves it to `path` on success.

    Args:
        path: the final directory; its parent is created if missing (and removed again,
            if still empty, when the write fails).
        replace: bool, an existing `path` is replaced (it stays in place, usable, until the
            new directory is complete). False: `path` must not exist or be empty.
        what, needed: as `atomic_path`'s (a storage fault is one `StorageError` line).

    Raises:
        ValueError: `path` is a file, or a non-empty directory while `replace` is False.
        StorageError: a storage fault, or less than `needed` free (nothing is left).
    """
    path = os.fspath(path)
    if os.path.isfile(path):
        raise ValueError(f"{path} is a file; expected a directory to create.")
    if os.path.isdir(path) and os.listdir(path) and not replace:
        raise ValueError(f"{path} already exists and is not empty; expected a new path.")
    parent = os.path.dirname(os.path.abspath(path))
    if needed is not None:
        check_free_space(path, needed, what, intact=_intact(path, "nothing was written"))
    with storage_guard(path, what, intact=_intact(path, "no partial directory was left"),
                       needed=needed):
        created = _make_directories(parent)
        try:
            remove_stale_temporaries(path)
            staging = tempfile.mkdtemp(prefix=_own_prefix(path), suffix=TEMP_SUFFIX,
                                       dir=parent)
            try:
                yield staging
                _swap_in(staging, path)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
        except BaseException:
            for directory in reversed(created):  # the deepest first, each only if empty
                with contextlib.suppress(OSError):
                    os.rmdir(directory)
            raise


def _make_directories(path):
    """`os.makedirs(path, exist_ok=True)`; returns the directories it created, outermost
    first."""
    missing = []
    while not os.path.isdir(path) and os.path.dirname(path) != path:
        missing.append(path)
        path = os.path.dirname(path)
    for directory in reversed(missing):
        os.makedirs(directory, exist_ok=True)
    return list(reversed(missing))


def exchange_paths(first, second):
    """Swaps two existing names in one step (`renameat2(RENAME_EXCHANGE)`).

    Returns:
        True when swapped; False when the OS or filesystem cannot (then nothing changed).
    """
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return False
    try:
        renameat2 = ctypes.CDLL(libc_name, use_errno=True).renameat2
    except (OSError, AttributeError):  # not Linux, or a libc without renameat2
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                          ctypes.c_uint]
    result = renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second),
                       _RENAME_EXCHANGE)
    return result == 0


def _swap_in(staging, path):
    """Moves the complete `staging` directory to `path`, replacing what is there.

    Linux: one atomic exchange (the old version ends under the staging name and is removed
    by the caller). Elsewhere: two renames, the old version first moved to a hidden name.
    """
    if not os.path.exists(path):
        try:
            os.replace(staging, path)
            return
        except OSError as error:  # another writer's directory landed meanwhile: replace it
            if error.errno not in (errno.ENOTEMPTY, errno.EEXIST) or not os.path.isdir(path):
                raise
    if os.path.isdir(path) and exchange_paths(staging, path):
        return
    parent = os.path.dirname(os.path.abspath(path))
    retired = tempfile.mkdtemp(prefix=_own_prefix(path), suffix=".old" + TEMP_SUFFIX,
                               dir=parent)
    os.rmdir(retired)
    os.replace(path, retired)  # the old version, complete, under a hidden name
    try:
        os.replace(staging, path)
    except BaseException:
        os.replace(retired, path)
        raise
    shutil.rmtree(retired, ignore_errors=True)
