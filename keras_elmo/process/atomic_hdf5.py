"""`atomic_hdf5`: an HDF5 file written atomically, through a file object that a storage
fault cannot break.

libhdf5 does not survive a failed write: once a write of its own met `No space left on
device`, closing or flushing the file can crash the process (a segmentation fault), and h5py
reports the failures it meets while freeing objects only as "Exception ignored" lines. So
HDF5 never writes to the disk itself here: h5py writes through a `FaultShield` (its
"fileobj" driver), which passes every write on to the temporary file and, once one fails,
records the error, keeps that write and every later one in memory (reads see them) and
tells HDF5 the write succeeded. HDF5 stays consistent and closes cleanly; then the recorded
error is raised, the temporary removed and the error told as one `StorageError` line
(`keras_elmo.process.atomic_file.atomic_path`). A writer that writes for long calls
`HDF5Output.check()` between its writes, so it stops at the first fault and memory holds
no more than what it wrote since. The file is flushed to the disk (`fsync`) before its
rename, so a fault the filesystem reports only then is caught too.

Example:
>>> with atomic_hdf5("out/elmo.hdf5", what="the ELMo vectors") as output:  # doctest: +SKIP
...     for name, vectors in batches:
...         output.file.create_dataset(name, data=vectors)
...         output.check()  # a full disk: StorageError here, nothing left behind
"""

import contextlib
import errno
import io
import os

from keras_elmo.process.atomic_file import atomic_path
from keras_elmo.process.storage_errors import StorageError


class FaultShield(io.RawIOBase):
    """A file HDF5 writes through: a failed write is recorded, never reported to HDF5.

    Args:
        path: an existing file, written from its start.
    """

    def __init__(self, path):
        super().__init__()
        self.fault = None  # the first OSError of a write, once one failed
        self._fd = os.open(path, os.O_RDWR)
        self._position = 0
        self._size = 0
        self._held = []  # (offset, bytes) not on the disk, in the order written

    @property
    def size(self):
        """Bytes of the file HDF5 wrote (on the disk and held in memory)."""
        return self._size

    def readable(self):
        return True

    def writable(self):
        return True

    def seekable(self):
        return True

    def seek(self, offset, whence=io.SEEK_SET):
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._size}[whence]
        self._position = base + offset
        return self._position

    def tell(self):
        return self._position

    def write(self, data):
        data = memoryview(data).cast("B")
        if self.fault is None:
            try:
                done = 0
                while done < len(data):
                    written = os.pwrite(self._fd, data[done:], self._position + done)
                    if not written:
                        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                    done += written
            except OSError as error:
                self.fault = error
        if self.fault is not None:
            self._held.append((self._position, bytes(data)))
        self._position += len(data)
        self._size = max(self._size, self._position)
        return len(data)

    def readinto(self, buffer):
        view = memoryview(buffer).cast("B")
        count = max(0, min(len(view), self._size - self._position))
        data = bytearray(os.pread(self._fd, count, self._position)).ljust(count, b"\0")
        for offset, held in self._held:  # in the order written: a later write wins
            start = max(offset, self._position)
            stop = min(offset + len(held), self._position + count)
            if start < stop:
                data[start - self._position:stop - self._position] = \
                    held[start - offset:stop - offset]
        view[:count] = data
        self._position += count
        return count

    def truncate(self, size=None):
        size = self._position if size is None else size
        if self.fault is None:
            try:
                os.ftruncate(self._fd, size)
            except OSError as error:
                self.fault = error
        self._size = size
        self._held = [(offset, held[:size - offset]) for offset, held in self._held
                      if offset < size]
        return size

    def flush(self):
        """Nothing to flush (every write went to the file or to memory)."""

    def sync(self):
        """Raises the recorded fault, if any; else flushes the file to the disk."""
        if self.fault is not None:
            raise self.fault
        os.fsync(self._fd)

    def close(self):
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        super().close()


class HDF5Output:
    """An HDF5 file being written by `atomic_hdf5`.

    Attributes:
        file: the `h5py.File`, open for writing.
    """

    def __init__(self, file, shield):
        self.file = file
        self._shield = shield

    def check(self):
        """Raises the first fault of the writes so far (an `OSError`; leaving
        `atomic_hdf5` it becomes a `StorageError`); nothing happens when there was none.

        Example:
        >>> output.check()  # doctest: +SKIP
        """
        if self._shield.fault is not None:
            raise self._shield.fault


@contextlib.contextmanager
def atomic_hdf5(path, what="the HDF5 file", needed=None):
    """Yields an `HDF5Output` (its `file` an `h5py.File` open for writing) under a
    temporary name beside `path`; renames it onto `path` once complete and on the disk.

    Args:
        path: the final file name; its directory must exist.
        what: what the file is, for the line of a storage fault.
        needed: int, bytes the file will take (at least), checked before anything is
            written; None when not known.

    Raises:
        StorageError: a storage fault or less than `needed` free; nothing is left behind
            and an earlier file at `path` is untouched. It says how much the file needed at
            least: `needed`, or what was written when the fault came, if more.

    Example:
    >>> with atomic_hdf5("w.hdf5", what="the weights") as output:
    ...     _ = output.file.create_dataset("x", data=np.zeros(3, np.float32))
    >>> h5py.File("w.hdf5", "r")["x"].shape
    (3,)
    """
    import h5py

    reached = 0
    try:
        with atomic_path(path, what=what, needed=needed) as tmp_path:
            shield = FaultShield(tmp_path)
            try:
                with h5py.File(shield, "w") as handle:  # never fails: no write can
                    yield HDF5Output(handle, shield)
                shield.sync()
            finally:
                reached = shield.size
                shield.close()
    except StorageError as error:
        if reached <= (error.needed or 0):
            raise
        raise error.completed(needed=reached) from None
