"""`RunLock`: one training run at a time on a model directory.

`keras-elmo train MODEL_DIR` holds an exclusive `fcntl.flock` on `MODEL_DIR/.train.lock`
for the whole run. The kernel releases the lock when the process ends, however it ends
(`kill -9` included), so a lock file left behind never blocks a later run: only a living
holder does. The file records the holder (`pid`, `host`, start time) for the refusal line:

    runs/pd is being trained by pid 4242 on host gpu1 since 2026-11-23 16:50:02 UTC
    (lock runs/pd/.train.lock); wait for that run to end or use another MODEL_DIR.

`flock` is advisory and local to a host on some network filesystems; the holder line makes
a second host's run visible in the message only where the filesystem shares the lock.
The lock, its record and the stale-holder check are `keras_elmo.process.file_lock`'s.
Imports only the standard library (the CLI takes the lock before TensorFlow loads).

Example:
>>> with RunLock("runs/small"):  # doctest: +SKIP
...     train()
"""

import os

from keras_elmo.process.file_lock import FileLock
from keras_elmo.process.storage_errors import storage_guard

#: The lock file inside a model directory.
LOCK_FILE = ".train.lock"
#: How long a refused run waits for the holder to write its record (it takes the lock first).
HOLDER_RECORD_WAIT_S = 3.0


class RunLockedError(ValueError):
    """Another living process trains this model directory."""


class RunLock:
    """Exclusive lock of a model directory for a training run (a context manager).

    Args:
        model_dir: str, the directory (created if missing).
    """

    def __init__(self, model_dir):
        self.model_dir = os.fspath(model_dir)
        self.path = os.path.join(self.model_dir, LOCK_FILE)
        self._lock = FileLock(self.path)

    def acquire(self):
        """Takes the lock or raises `RunLockedError` naming the holder (pid, host)
        (`StorageError` when the directory cannot be written: read-only, no permission)."""
        with storage_guard(self.path, "the run lock of the model directory"):
            os.makedirs(self.model_dir, exist_ok=True)
            taken = self._lock.acquire(blocking=False)
        if not taken:
            holder = self._lock.holder(wait=HOLDER_RECORD_WAIT_S)
            raise RunLockedError(
                f"{self.model_dir} is being trained by {holder} (lock {self.path}); wait for "
                "that run to end or use another MODEL_DIR.")
        return self

    def release(self):
        """Releases the lock (the file stays; it blocks nobody once released)."""
        self._lock.release()

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc_info):
        self.release()
