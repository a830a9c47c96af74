"""`RunLock`: one training run at a time on a model directory.

`keras-elmo train MODEL_DIR` holds an exclusive `fcntl.flock` on `MODEL_DIR/.train.lock`
for the whole run. The kernel releases the lock when the process ends, however it ends
(`kill -9` included), so a lock file left behind never blocks a later run: only a living
holder does. The file records the holder (`pid`, `host`, start time) for the refusal line:

    runs/pd is being trained by pid 4242 on host gpu1 since 2026-11-23 16:50:02 UTC
    (lock runs/pd/.train.lock); wait for that run to end or use another MODEL_DIR.

`flock` is advisory and local to a host on some network filesystems; the holder line makes
a second host's run visible in the message only where the filesystem shares the lock.
Imports only the standard library (the CLI takes the lock before TensorFlow loads).

Example:
>>> with RunLock("runs/small"):  # doctest: +SKIP
...     train()
"""

import fcntl
import json
import os
import socket
import time

from keras_elmo.process.storage_errors import storage_guard

#: The lock file inside a model directory.
LOCK_FILE = ".train.lock"


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
        self._fd = None

    def acquire(self):
        """Takes the lock or raises `RunLockedError` naming the holder (pid, host)
        (`StorageError` when the directory cannot be written: read-only, no permission)."""
        with storage_guard(self.path, "the run lock of the model directory"):
            os.makedirs(self.model_dir, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise RunLockedError(
                f"{self.model_dir} is being trained by {holder} (lock {self.path}); wait for "
                "that run to end or use another MODEL_DIR.") from None
        except BaseException:
            os.close(fd)
            raise
        record = json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                             "since": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())})
        try:
            with storage_guard(self.path, "the run lock of the model directory"):
                os.ftruncate(fd, 0)
                os.pwrite(fd, (record + "\n").encode("utf-8"), 0)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return self

    def release(self):
        """Releases the lock (the file stays; it blocks nobody once released)."""
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases the flock
            self._fd = None

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc_info):
        self.release()


#: How long a refused run waits for the holder to write its record (it takes the lock first).
HOLDER_RECORD_WAIT_S = 3.0


def _read_holder(fd):
    """`"pid 4242 on host gpu1 since ..."` from the lock file, or a neutral phrase.

    The holder takes the lock before it writes its record, so a run refused in that instant
    finds the file empty, or still holding a finished run's record: it polls until the record
    parses and, on this host, names a living process.
    """
    deadline = time.monotonic() + HOLDER_RECORD_WAIT_S
    while True:
        data = _parse_record(fd)
        if data is not None and _plausible_holder(data):
            return f"pid {data['pid']} on host {data['host']} since {data['since']}"
        if time.monotonic() >= deadline:
            return "another process (its details are still being written)"
        time.sleep(0.05)


def _parse_record(fd):
    try:
        data = json.loads(os.pread(fd, 4096, 0).decode("utf-8") or "{}")
        if not isinstance(data, dict) or not all(k in data for k in ("pid", "host", "since")):
            return None
        return data
    except (ValueError, TypeError, OSError):
        return None


def _plausible_holder(data):
    """False only for a record of this host whose pid no longer runs (a previous run's)."""
    if data["host"] != socket.gethostname():
        return True
    try:
        os.kill(int(data["pid"]), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError, TypeError, OverflowError):
        return True
    return True
