"""Storage faults (a full disk, a quota reached, a read-only filesystem, no permission),
recognised in one place and told in one line.

Every library keras-elmo writes through reports them its own way: Python as an `OSError`
with an errno; TensorFlow as `tf.errors.ResourceExhaustedError` (no space, quota),
`PermissionDeniedError` or `FailedPreconditionError` (read-only, permission) from `SaveV2`
or a `tf.io` write, with the system's message in the text (`...; No space left on
device`); HDF5 as a `RuntimeError` or `OSError` whose text holds `errno = 28`; SQLite as
`database or disk is full`. `storage_errno` reads all of them. `storage_guard` turns them,
around a write, into `StorageError`: one line naming what was being written, where, what is
intact and what to do, e.g.

    cannot write checkpoint ckpt-20 (runs/pd/checkpoints): no space left on device (needs
    at least 66 MB, 25 MB free); the last complete checkpoint is ckpt-10 (step 10); free
    41 MB or more there and run the same command to go on.

Guards nest: an inner one (the file's writer) names the file; an outer one (the command)
adds what it knows is intact and how to go on. The free space in the line is measured when
the line is made, after the failed write's temporaries are gone. `check_free_space`
refuses a write whose size is known before any of it is spent (and any write on a
filesystem mounted read-only). The command line prints a `StorageError` as its line and
exits with `StorageError.exit_code` (75, `EX_TEMPFAIL`: run it again once the cause is
fixed).

Imports only the standard library (the command line uses it before TensorFlow).

Example:
>>> with storage_guard("out/vocab.txt", "the vocabulary"):  # doctest: +SKIP
...     write_it()
>>> storage_errno(OSError(errno.ENOSPC, "No space left on device"))
28
"""

import contextlib
import errno
import math
import os
import re
import shutil

#: The errnos of a storage fault: no space, quota, read-only filesystem, permission.
STORAGE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM)
#: Exit code of a command stopped by one (sysexits.h's EX_TEMPFAIL: try again later).
EXIT_CODE = getattr(os, "EX_TEMPFAIL", 75)
#: HDF5 writes the errno of a failed system call into its message as `errno = 28`.
_HDF5_ERRNO = re.compile(r"\berrno = (\d+)")
#: SQLite's words for a full disk and for a read-only file.
_SQLITE_TEXTS = {"database or disk is full": errno.ENOSPC,
                 "attempt to write a readonly database": errno.EROFS}
_UNITS = ("B", "kB", "MB", "GB", "TB")


class StorageError(OSError):
    """A write stopped by a storage fault; `str()` is the one line the command prints.

    Args:
        code: the errno (one of `STORAGE_ERRNOS`).
        path: the file or directory being written (the final name, never a temporary).
        what: what it is, for the line (`"the vocabulary"`, `"checkpoint ckpt-20"`).
        intact: what the failure left as it was, e.g. `"the last complete checkpoint is
            ckpt-10"` (None: that nothing of the write was kept).
        needed: bytes the write needs (at least), when known.
        free: bytes free where it writes (None: measured when the line is made).
        then: how to go on once fixed (`"run the same command again"`).

    Example:
    >>> print(StorageError(errno.EROFS, "out/vocab.txt", "the vocabulary", free=0))
    cannot write the vocabulary (out/vocab.txt): read-only file system; nothing of it was kept; make that filesystem writable (or write elsewhere) and run the same command again.
    """

    exit_code = EXIT_CODE

    def __init__(self, code, path, what, intact=None, needed=None, free=None, then=None):
        super().__init__(code, os.strerror(code), os.fspath(path))
        self.path, self.what, self.intact, self.then = os.fspath(path), what, intact, then
        self.needed, self._free = needed, free

    @property
    def free(self):
        """Bytes free there: as given, else measured when asked (the line is printed after
        the failed write's temporaries are gone)."""
        return free_bytes(self.path) if self._free is None else self._free

    def __str__(self):
        reason = os.strerror(self.errno).lower()
        sizes = ""
        if self.errno in (errno.ENOSPC, errno.EDQUOT):
            free = self.free  # an estimate below it says nothing: the write needed more
            sizes = (f" (needs at least {format_bytes(self.needed)}, {format_bytes(free)} free)"
                     if self.needed is not None and self.needed > free
                     else f" ({format_bytes(free)} free)")
        return (f"cannot write {self.what} ({self.path}): {reason}{sizes}; "
                f"{self.intact or 'nothing of it was kept'}; {self._remedy()} and "
                f"{self.then or 'run the same command again'}.")

    def _remedy(self):
        if self.errno == errno.ENOSPC:
            free = self.free
            if self.needed is not None and self.needed > free:
                return f"free {format_bytes(self.needed - free, up=True)} or more there"
            return "free some space there"
        if self.errno == errno.EDQUOT:
            return "free space within your quota (or have it raised)"
        if self.errno == errno.EROFS:
            return "make that filesystem writable (or write elsewhere)"
        folder = self.path if os.path.isdir(self.path) else os.path.dirname(
            os.path.abspath(self.path))
        return f"allow writing in {folder} (or write elsewhere)"

    def completed(self, intact=None, needed=None, then=None):
        """This error with what an outer writer knows: `intact` joined to this one's,
        the larger `needed`, `then` replaced (the command knows how to go on)."""
        joined = self.intact if intact and intact in (self.intact or "") else (
            "; ".join(part for part in (self.intact, intact) if part) or None)
        more = max(n for n in (self.needed, needed, -1) if n is not None)
        error = StorageError(self.errno, self.path, self.what, intact=joined,
                             needed=None if more < 0 else more, free=self._free,
                             then=then or self.then)
        error.__traceback__ = self.__traceback__
        return error


def storage_errno(error):
    """The errno of a storage fault in `error` (or its causes), else None.

    Example:
    >>> storage_errno(RuntimeError("file write failed: ..., errno = 28, error message = ..."))
    28
    >>> storage_errno(ValueError("Permission denied")) is None  # not an I/O library's error
    True
    """
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        code = _own_errno(error)
        if code is not None:
            return code
        # What raised it (`raise ... from`), else what it was raised while handling.
        error = error.__cause__ if error.__cause__ is not None else (
            None if error.__suppress_context__ else error.__context__)
    return None


def _own_errno(error):
    code = getattr(error, "errno", None)
    if isinstance(code, int) and code:
        return code if code in STORAGE_ERRNOS else None
    if not _from_io_library(error):
        return None
    text = str(error)
    match = _HDF5_ERRNO.search(text)
    if match and int(match.group(1)) in STORAGE_ERRNOS:
        return int(match.group(1))
    lowered = text.lower()
    for code in STORAGE_ERRNOS:
        if os.strerror(code).lower() in lowered:
            return code
    return next((code for words, code in _SQLITE_TEXTS.items() if words in lowered), None)


def _from_io_library(error):
    """An error of the system, HDF5 (`RuntimeError`), SQLite or TensorFlow (`OpError`):
    their text may hold a system error. Our own `ValueError`s never do."""
    if isinstance(error, (OSError, RuntimeError)):
        return True
    return any(cls.__name__ in ("OpError", "Error") and cls.__module__.startswith(
        ("tensorflow", "sqlite3")) for cls in type(error).__mro__)


def free_bytes(path):
    """Bytes free to this user on the filesystem of `path` (or of its nearest existing
    parent, for a path not made yet); root may use the blocks reserved for it too.

    Example:
    >>> free_bytes("/") > 0
    True
    """
    if not hasattr(os, "statvfs"):  # Windows
        return shutil.disk_usage(_existing(path)).free
    stats = _filesystem(path)
    if stats is None:
        return 0
    blocks = stats.f_bfree if hasattr(os, "geteuid") and os.geteuid() == 0 else stats.f_bavail
    return blocks * stats.f_frsize


def _existing(path):
    """`path`, or its nearest parent that exists."""
    path = os.path.abspath(os.fspath(path))
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def _filesystem(path):
    """`os.statvfs` of the filesystem `path` is (or will be) on; None without statvfs."""
    if not hasattr(os, "statvfs"):  # Windows
        return None
    try:
        return os.statvfs(_existing(path))
    except OSError:
        return None


def format_bytes(count, up=False):
    """`count` bytes for a person: `"41 MB"`, `"8.5 kB"` (powers of 1024); `up` rounds up
    (an amount to free must not fall short).

    Example:
    >>> format_bytes(41 * 2**20), format_bytes(8704), format_bytes(1025, up=True)
    ('41 MB', '8.5 kB', '1.1 kB')
    """
    value, unit = float(max(count, 0)), 0
    while value >= 1024 and unit < len(_UNITS) - 1:
        value, unit = value / 1024, unit + 1
    digits = 1 if value < 10 and unit else 0
    if up:
        value = math.ceil(value * 10 ** digits) / 10 ** digits
    return f"{value:.{digits}f} {_UNITS[unit]}"


def check_free_space(path, needed, what, intact=None, then=None):
    """Refuses a write of `needed` bytes (at least) where less is free, before any of it.

    Returns:
        the bytes free.

    Raises:
        StorageError: `EROFS` on a filesystem mounted read-only; `ENOSPC`, saying how much
            is needed and how much is free.

    Example:
    >>> check_free_space("out/elmo.hdf5", 10 * 2**30, "the ELMo vectors")  # doctest: +SKIP
    Traceback (most recent call last):
    StorageError: cannot write the ELMo vectors (out/elmo.hdf5): no space left on device (needs at least 10 GB, 2.1 GB free); nothing was written; free 7.9 GB or more there and run the same command again.
    """
    stats = _filesystem(path)
    if stats is not None and stats.f_flag & getattr(os, "ST_RDONLY", 1):
        raise StorageError(errno.EROFS, path, what, intact=intact or "nothing was written",
                           then=then)
    free = free_bytes(path)
    if needed > free:
        raise StorageError(errno.ENOSPC, path, what, intact=intact or "nothing was written",
                           needed=needed, free=free, then=then)
    return free


@contextlib.contextmanager
def storage_guard(path, what, intact=None, needed=None, then=None):
    """Turns a storage fault raised inside into a `StorageError` about `what` at `path`.

    A `StorageError` raised inside (an inner writer's) keeps its path and what, and is
    completed with `intact`, `needed` and `then` (`StorageError.completed`). Any other
    error passes unchanged. Clean up inside the guard: the free space is measured when the
    error leaves the innermost guard.

    Args:
        path, what, needed, then: as `StorageError`'s.
        intact: str, or a callable returning one when the fault happens (what is intact
            may change while the writer runs: the newest checkpoint).

    Example:
    >>> with storage_guard("out/vocab.txt", "the vocabulary"):  # doctest: +SKIP
    ...     raise OSError(errno.EROFS, "Read-only file system")
    Traceback (most recent call last):
    StorageError: cannot write the vocabulary (out/vocab.txt): read-only file system; ...
    """
    try:
        yield
    except StorageError as error:
        raise error.completed(_call(intact), needed, then) from None
    except BaseException as error:
        code = storage_errno(error)
        if code is None:
            raise
        raise StorageError(code, path, what, intact=_call(intact), needed=needed,
                           then=then) from None


def _call(value):
    return value() if callable(value) else value
