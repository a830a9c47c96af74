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

The lock itself is `keras_elmo.process.file_lock.FileLock`. Standard library only.

Example:
>>> with download_lock("~/.keras/models/keras-elmo", "elmo-small"):  # doctest: +SKIP
...     fetch_it()
"""

import contextlib
import os
import sys

from keras_elmo.process.file_lock import FileLock, remove_unheld
from keras_elmo.process.storage_errors import storage_guard
from keras_elmo.pretrained.settings import CACHE_THEN

#: The folder of the lock files, inside the cache.
LOCK_DIR = ".locks"
_SUFFIX = ".lock"


@contextlib.contextmanager
def download_lock(root, key, stream=None, announce=True, blocking=True):
    """Holds the download lock of model `key` in the cache `root` (module docstring).

    Args:
        root: the cache folder (created if missing).
        key: the model's folder name.
        stream: where the one waiting line goes (stderr).
        announce: bool, write that line (False: wait without a word).
        blocking: bool, wait for another holder; False: yield None at once when another
            process holds it (nothing held then).

    Yields:
        str, the lock file's path (removed when the lock is let go), or None (not taken).

    Raises:
        StorageError: the cache cannot be written (read-only, no permission, full).
    """
    path = os.path.join(root, LOCK_DIR, f"{key}{_SUFFIX}")
    stream = stream or sys.stderr

    def waiting(holder):
        if announce:
            print(f"keras-elmo: waiting for {holder}, which is downloading {key} into {root} "
                  f"(lock {path})", file=stream, flush=True)

    lock = FileLock(path, remove_on_release=True)
    with storage_guard(root, "the model cache", then=CACHE_THEN):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        taken = lock.acquire(blocking=blocking, on_wait=waiting)
    if not taken:
        yield None
        return
    try:
        remove_stale_locks(root)
        yield path
    finally:
        lock.release()


def remove_stale_locks(root):
    """Removes the lock files in `root` that nobody holds (their holders ended); returns
    their names. A file another process holds, or opens meanwhile, stays."""
    return remove_unheld(os.path.join(root, LOCK_DIR), _SUFFIX)
