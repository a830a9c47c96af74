"""`download_lock`: one process downloads a model; any other asking for it waits.

The lock is an exclusive `fcntl.flock` on `CACHE/.locks/NAME.lock`, held while the model is
downloaded, checked and moved into the cache. A second process asking for the same model
says once on stderr that it waits (and for whom), blocks until the first is done, then finds
the model in the cache. The kernel releases the lock when its holder ends, however it ends
(`kill -9` included), so a lock file left behind blocks nobody. `flock` is advisory and, on
some network filesystems, local to a host.

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


@contextlib.contextmanager
def download_lock(root, key, stream=None, announce=True):
    """Holds the download lock of model `key` in the cache `root` (module docstring).

    Args:
        root: the cache folder (created if missing).
        key: the model's folder name.
        stream: where the one waiting line goes (stderr).
        announce: bool, write that line (False: wait without a word).

    Raises:
        StorageError: the cache cannot be written (read-only, no permission, full).
    """
    import fcntl  # POSIX; imported here so that loading a local model needs no lock at all

    path = os.path.join(root, LOCK_DIR, f"{key}.lock")
    with storage_guard(root, "the model cache", then=CACHE_THEN):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if announce:
                print(f"keras-elmo: waiting for {_holder(fd)}, which is downloading {key} into "
                      f"{root} (lock {path})", file=stream or sys.stderr, flush=True)
            fcntl.flock(fd, fcntl.LOCK_EX)
        record = json.dumps({"pid": os.getpid(), "host": socket.gethostname()})
        os.ftruncate(fd, 0)
        os.pwrite(fd, (record + "\n").encode("utf-8"), 0)
        yield path
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _holder(fd):
    """`"pid N on host H"` from the lock file, or `"another process"`."""
    try:
        record = json.loads(os.pread(fd, 4096, 0).decode("utf-8") or "{}")
        return f"pid {record['pid']} on host {record['host']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process"
