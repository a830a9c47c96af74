"""`FileLock`: an exclusive lock on a file, with a record of its holder; `holder_gone`.

The one lock of keras-elmo, used by the download lock of a model (`pretrained/
download_lock.py`), the run lock of a model directory (`training/run_lock.py`) and, through
`holder_gone`, by the stale-temporary check of `atomic_file`:

- the lock is an exclusive `fcntl.flock` on the file; the kernel releases it when its holder
  ends, however it ends (`kill -9` included), so a file left behind blocks nobody;
- the holder writes a record into the file, one JSON line (`pid`, `host`, `since`), which a
  refused or waiting process reads to name it (`holder_text`);
- stale detection: a record of this host whose pid no longer runs (or is a zombie) is a
  holder that is gone (`holder_gone`); one of another host cannot be told, and counts as
  gone only when its file is older than `STALE_SECONDS`.

`flock` is advisory and, on some network filesystems, local to a host: the callers keep
their data safe without it too (unique temporaries, atomic renames). Standard library only;
`fcntl` is imported where a lock is taken (POSIX), so that importing this module costs
nothing.

Example:
>>> lock = FileLock("runs/small/.train.lock")  # doctest: +SKIP
>>> lock.acquire(blocking=False)  # doctest: +SKIP
True
>>> lock.release()  # doctest: +SKIP
"""

import contextlib
import json
import os
import socket
import time

#: A holder of another host (or without a pid) counts as gone when its file is this old.
STALE_SECONDS = 24 * 3600


def host_name():
    """This host's name as records and temporary names carry it (no `@`)."""
    return socket.gethostname().replace("@", "_")


def process_alive(pid):
    """True when process `pid` runs on this host (a zombie, killed but not reaped, does not).

    Example:
    >>> process_alive(os.getpid())
    True
    """
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError, TypeError, OverflowError):  # another user's process
        return True
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as handle:  # Linux: "pid (name) STATE ..."
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def holder_gone(pid, host, mtime=None, now=None):
    """Whether the holder `pid` on `host` has ended, as far as this host can tell.

    Args:
        pid: int or None (unknown).
        host: str or None (unknown).
        mtime: float, the seconds since the epoch of what it left (its file), for a holder
            that cannot be told (another host's, or no pid): gone once `STALE_SECONDS` old.
        now: float, the current time (default `time.time()`).

    Example:
    >>> holder_gone(os.getpid(), host_name())
    False
    >>> holder_gone(None, "other-host", mtime=0.0)
    True
    """
    if pid is not None and host == host_name():
        return not process_alive(pid)
    if mtime is None:
        return False
    return (time.time() if now is None else now) - mtime > STALE_SECONDS


class FileLock:
    """An exclusive `flock` on `path`, its holder recorded in the file (module docstring).

    Args:
        path: the lock file (created when the lock is taken; its folder must exist).
        remove_on_release: bool, remove the file before letting go, so that no file stays
            once nobody holds it (a process that waited on a removed file locks the path's
            new file instead: `acquire` checks that `path` still names the file it locked).

    Attributes:
        path: the lock file.
        held: bool, whether this object holds the lock.
    """

    def __init__(self, path, remove_on_release=False):
        self.path = os.fspath(path)
        self.remove_on_release = remove_on_release
        self._fd = None

    @property
    def held(self):
        return self._fd is not None

    def acquire(self, blocking=True, on_wait=None):
        """Takes the lock; returns True, or False when `blocking` is False and another
        process holds it.

        Args:
            blocking: bool, wait for the holder to let go.
            on_wait: callable(holder_text) called once before waiting (blocking only).

        Raises:
            OSError: the file cannot be created or opened (the caller names the storage).
        """
        import fcntl  # POSIX; imported here so that importing the module needs no lock

        if self._fd is not None:
            raise ValueError(f"the lock {self.path} is held already by this object; "
                             "expected acquire() after release().")
        announced = False
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    if not blocking:
                        os.close(fd)
                        return False
                    if on_wait is not None and not announced:
                        announced = True
                        on_wait(holder_text(read_record(fd)))
                    fcntl.flock(fd, fcntl.LOCK_EX)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.close(fd)
                raise
            if _names_file(self.path, fd):
                break
            os.close(fd)  # its holder removed it while this process waited: lock the new one
        try:
            record = json.dumps({"pid": os.getpid(), "host": host_name(),
                                 "since": time.strftime("%Y-%m-%d %H:%M:%S UTC",
                                                        time.gmtime())})
            os.ftruncate(fd, 0)
            os.pwrite(fd, (record + "\n").encode("utf-8"), 0)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return True

    def holder(self, wait=0.0):
        """The text naming the process that holds the lock (`holder_text`), read from the
        file, for a caller that was refused.

        The holder takes the lock before it writes its record, so a process refused in that
        instant finds the file empty, or still holding an ended holder's record: this polls
        up to `wait` seconds for a record that names a holder not gone (`holder_gone`), and
        then answers `"another process (its details are still being written)"`.
        """
        deadline = time.monotonic() + wait
        while True:
            record = None
            with contextlib.suppress(OSError):
                fd = os.open(self.path, os.O_RDONLY)
                try:
                    record = read_record(fd)
                finally:
                    os.close(fd)
            if record is not None and not holder_gone(record.get("pid"), record.get("host")):
                return holder_text(record)
            if time.monotonic() >= deadline:
                return "another process (its details are still being written)"
            time.sleep(0.05)

    def release(self):
        """Lets go (removing the file first with `remove_on_release`); nothing when not
        held."""
        if self._fd is None:
            return
        if self.remove_on_release:
            with contextlib.suppress(OSError):
                os.remove(self.path)  # still held: a process waiting on it locks the next file
        os.close(self._fd)  # closing the descriptor releases the flock
        self._fd = None

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc_info):
        self.release()


def read_record(fd):
    """The holder record in the open lock file `fd` (dict), or None (empty, unreadable)."""
    try:
        record = json.loads(os.pread(fd, 4096, 0).decode("utf-8") or "null")
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and "pid" in record else None


def holder_text(record):
    """`"pid N on host H since ..."` of a holder record, or `"another process"`.

    Example:
    >>> holder_text({"pid": 42, "host": "gpu1", "since": "2026-11-23 16:50:02 UTC"})
    'pid 42 on host gpu1 since 2026-11-23 16:50:02 UTC'
    >>> holder_text(None)
    'another process'
    """
    if not record:
        return "another process"
    since = f" since {record['since']}" if record.get("since") else ""
    return f"pid {record['pid']} on host {record.get('host', '?')}{since}"


def remove_unheld(folder, suffix):
    """Removes the lock files `folder/*suffix` that nobody holds (their holders ended);
    returns their names. A file another process holds, or opens meanwhile, stays."""
    import fcntl

    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(suffix))
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


def _names_file(path, fd):
    """Whether `path` still names the file open as `fd` (not removed, not replaced)."""
    try:
        here, held = os.stat(path), os.fstat(fd)
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (held.st_dev, held.st_ino)
