"""`download_lock`: one process downloads a model; any other asking for it waits.

The lock is an exclusive `fcntl.flock` on `CACHE/.locks/NAME.lock`, held while the model is
downloaded, checked and moved into the cache. A second process asking for the same model
says once on stderr that it waits (and for whom), blocks until the first is done, then finds
the model in the cache. The kernel releases the lock when its holder ends, however it ends
(`kill -9` included). `flock` is advisory and, on some network filesystems, local to a host.

No lock file stays once nobody holds it: the holder removes its file before it lets go, and
removes the files a killed holder left (those it can lock at once; one another process
holds is never touched). A process that waited on a file removed meanwhile finds that the
path no longer names the file it locked, and locks the path's current file instead, so two
processes never hold the same model's lock at once.

Standard library only.

Example:
>>> with download_lock("~/.keras/models/keras-elmo", "elmo-small"):  # doctest: +SKIP
...     fetch_it()
"""

import contextlib
import json
import os
import socket
import sys

from keras_elmo.process.storage_errors import storage_guard
from keras_elmo.pretrained.settings import CACHE_THEN

#: The folder of the lock files, inside the cache.
LOCK_DIR = ".locks"
_SUFFIX = ".lock"


@contextlib.contextmanager
def download_lock(root, key, stream=None, announce=True):
    """Holds the download lock of model `key` in the cache `root` (module docstring).

    Args:
        root: the cache folder (created if missing).
        key: the model's folder name.
        stream: where the one waiting line goes (stderr).
        announce: bool, write that line (False: wait without a word).

    Yields:
        str, the lock file's path (removed when the lock is let go).

    Raises:
        StorageError: the cache cannot be written (read-only, no permission, full).
    """
    path = os.path.join(root, LOCK_DIR, f"{key}{_SUFFIX}")
    fd = _acquire(root, path, key, stream or sys.stderr, announce)
    try:
        record = json.dumps({"pid": os.getpid(), "host": socket.gethostname()})
        os.ftruncate(fd, 0)
        os.pwrite(fd, (record + "\n").encode("utf-8"), 0)
        remove_stale_locks(root)
        yield path
    finally:
        with contextlib.suppress(OSError):
            os.remove(path)  # still held: a process waiting on it locks the next file
        os.close(fd)  # closing the descriptor releases the lock


def remove_stale_locks(root):
    """Removes the lock files in `root` that nobody holds (their holders ended); returns
    their names. A file another process holds, or opens meanwhile, stays."""
    import fcntl

    folder = os.path.join(root, LOCK_DIR)
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(_SUFFIX))
    except OSError:
        return []
    removed = []
    for name in names:
        path = os.path.join(folder, name)
        try:
            fd = os.open(path, os.O_RDWR)
        except OSError:
            continue  # gone already, or not ours to open
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if _names_file(path, fd):  # locked: nobody else can be using it now
                os.remove(path)
                removed.append(name)
        except OSError:
            pass  # held by another process (or cannot go): it stays
        finally:
            os.close(fd)
    return removed


def _acquire(root, path, key, stream, announce):
    """An open descriptor of `path` holding its exclusive lock (waiting for it)."""
    import fcntl  # POSIX; imported here so that loading a local model needs no lock at all

    announced = False
    while True:
        with storage_guard(root, "the model cache", then=CACHE_THEN):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if announce and not announced:
                    announced = True
                    print(f"keras-elmo: waiting for {_holder(fd)}, which is downloading {key} "
                          f"into {root} (lock {path})", file=stream, flush=True)
                fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
        if _names_file(path, fd):
            return fd
        os.close(fd)  # its holder removed it while this process waited: lock the next one


def _names_file(path, fd):
    """Whether `path` still names the file open as `fd` (not removed, not replaced)."""
    try:
        here, held = os.stat(path), os.fstat(fd)
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (held.st_dev, held.st_ino)


def _holder(fd):
    """`"pid N on host H"` from the lock file, or `"another process"`."""
    try:
        record = json.loads(os.pread(fd, 4096, 0).decode("utf-8") or "{}")
        return f"pid {record['pid']} on host {record['host']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process"
