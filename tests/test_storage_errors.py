"""Storage faults, unit by unit: every library's form of a full disk, a read-only filesystem
or a missing permission is recognised; the line names the path, what was written, what is
intact and what to do; atomic files and HDF5 files leave nothing partial and an earlier
version untouched, with the fault injected where each writes (`OSError(ENOSPC)`, `EROFS`,
`EACCES`)."""

import errno
import os
import sqlite3

import h5py
import numpy as np
import pytest
import tensorflow as tf

from keras_elmo.process import atomic_file, atomic_hdf5, storage_errors
from keras_elmo.process.atomic_file import atomic_directory, atomic_writer
from keras_elmo.process.atomic_hdf5 import FaultShield
from keras_elmo.process.storage_errors import (StorageError, check_free_space, format_bytes,
                                               storage_errno, storage_guard)

ENOSPC, EROFS, EACCES = errno.ENOSPC, errno.EROFS, errno.EACCES


def _raised_from(cause, error):
    try:
        try:
            raise cause
        except Exception as inner:
            raise error from inner
    except Exception as outer:
        return outer


@pytest.mark.parametrize("error, expected", [
    (OSError(ENOSPC, "No space left on device"), ENOSPC),
    (OSError(errno.EDQUOT, "Disk quota exceeded"), errno.EDQUOT),
    (OSError(EROFS, "Read-only file system"), EROFS),
    (PermissionError(EACCES, "Permission denied"), EACCES),
    (PermissionError(errno.EPERM, "Operation not permitted"), errno.EPERM),
    # h5py / libhdf5: the errno inside the text
    (RuntimeError("Can't decrement id ref count (file write failed: time = ..., filename = "
                  "'x.tmp', file descriptor = 4, errno = 28, error message = 'No space left "
                  "on device', buf = 0x5, total write size = 16)"), ENOSPC),
    (OSError("Unable to synchronously create file (unable to open file: name = 'x', errno = "
             "13, error message = 'Permission denied', flags = 13)"), EACCES),
    # TensorFlow: SaveV2, tf.io, the summary writer
    (tf.errors.ResourceExhaustedError(None, None, "ckpt-20_temp/part-00000-of-00001.data; No "
                                      "space left on device [Op:SaveV2]"), ENOSPC),
    (tf.errors.PermissionDeniedError(None, None, "saved_model.pb.tmp; Read-only file system"),
     EROFS),
    (tf.errors.FailedPreconditionError(None, None, "logs/events.out; Read-only file system"),
     EROFS),
    (tf.errors.PermissionDeniedError(None, None, "/x/ckpt-1.index; Permission denied"), EACCES),
    # SQLite (embed's scratch index)
    (sqlite3.OperationalError("database or disk is full"), ENOSPC),
    (sqlite3.OperationalError("attempt to write a readonly database"), EROFS),
    # pip's line, in our own OSError of a failed download
    (OSError("pip download failed (exit 1): ERROR: Could not install packages due to an "
             "OSError: [Errno 28] No space left on device"), ENOSPC),
    # a cause: what raised the error, or what it was raised while handling
    (_raised_from(OSError(ENOSPC, "No space left on device"), KeyError("x")), ENOSPC),
    # not storage faults
    (ValueError("Permission denied"), None),  # not an I/O library's error
    (FileNotFoundError(errno.ENOENT, "No such file or directory"), None),
    (OSError(errno.EIO, "Input/output error"), None),
    (RuntimeError("boom"), None),
    (tf.errors.InvalidArgumentError(None, None, "shape mismatch"), None),
])
def test_storage_errno_reads_every_library_s_form(error, expected):
    assert storage_errno(error) == expected


def test_raise_from_none_hides_the_cause():
    try:
        try:
            raise OSError(ENOSPC, "No space left on device")
        except OSError:
            raise ValueError("bad input") from None
    except ValueError as error:
        assert storage_errno(error) is None


@pytest.mark.parametrize("code, remedy", [
    (ENOSPC, "free 40 MB or more there"),
    (errno.EDQUOT, "free space within your quota (or have it raised)"),
    (EROFS, "make that filesystem writable (or write elsewhere)"),
    (EACCES, "allow writing in /data/runs/pd/checkpoints (or write elsewhere)"),
    (errno.EPERM, "allow writing in /data/runs/pd/checkpoints (or write elsewhere)"),
])
def test_the_line_names_path_what_intact_and_the_remedy(code, remedy):
    error = StorageError(code, "/data/runs/pd/checkpoints/ckpt-30", "checkpoint ckpt-30",
                         intact="the last complete checkpoint is ckpt-20 (step 20)",
                         needed=41 * 2**20, free=2**20,
                         then="run the same command to go on")
    line = str(error)
    assert "\n" not in line
    assert line.startswith("cannot write checkpoint ckpt-30 (/data/runs/pd/checkpoints/ckpt-30"
                           f"): {os.strerror(code).lower()}")
    assert "; the last complete checkpoint is ckpt-20 (step 20); " in line
    assert line.endswith(f"; {remedy} and run the same command to go on.")
    assert ("(needs at least 41 MB, 1.0 MB free)" in line) == (code in (ENOSPC, errno.EDQUOT))
    assert isinstance(error, OSError) and error.errno == code
    assert error.exit_code == 75 and error.filename == "/data/runs/pd/checkpoints/ckpt-30"


def test_an_estimate_below_the_free_space_is_not_printed():
    line = str(StorageError(ENOSPC, "out/x.hdf5", "the vectors", needed=10, free=2**20))
    assert "(1.0 MB free)" in line and "needs" not in line and "free some space there" in line


def test_format_bytes_rounds_an_amount_to_free_up():
    assert [format_bytes(n) for n in (0, 999, 8704, 41 * 2**20, 3 * 2**30)] == [
        "0 B", "999 B", "8.5 kB", "41 MB", "3.0 GB"]
    assert format_bytes(1025, up=True) == "1.1 kB" and format_bytes(1025) == "1.0 kB"


def test_nested_guards_keep_the_file_and_add_what_the_command_knows(tmp_path):
    target = str(tmp_path / "weights.hdf5")
    with pytest.raises(StorageError) as raised:
        with storage_guard(str(tmp_path), "the model directory",
                           intact=lambda: "the last complete checkpoint is ckpt-4 (step 4)",
                           then="run the same command to go on"):
            with storage_guard(target, "the biLM weights", intact="no partial file was left",
                               needed=100):
                raise OSError(ENOSPC, "No space left on device")
    error = raised.value
    assert (error.path, error.what, error.needed) == (target, "the biLM weights", 100)
    assert error.intact == ("no partial file was left; the last complete checkpoint is ckpt-4 "
                            "(step 4)")
    assert str(error).endswith("and run the same command to go on.")
    assert error.__cause__ is None and error.__suppress_context__  # no traceback chain
    with pytest.raises(KeyError):  # anything else passes unchanged
        with storage_guard(target, "the biLM weights"):
            raise KeyError("x")


def test_check_free_space_refuses_before_writing(tmp_path, monkeypatch):
    monkeypatch.setattr(storage_errors, "free_bytes", lambda path: 5 * 2**20)
    assert check_free_space(tmp_path / "x", 2**20, "the x") == 5 * 2**20
    with pytest.raises(StorageError, match=r"cannot write the vocabulary \(.*v.txt\): no space "
                       r"left on device \(needs at least 10 MB, 5.0 MB free\); nothing was "
                       r"written; free 5.0 MB or more there"):
        with atomic_writer(tmp_path / "v.txt", what="the vocabulary", needed=10 * 2**20):
            pytest.fail("the write must not start")
    assert os.listdir(tmp_path) == []


def test_a_read_only_filesystem_is_told_before_its_free_space(tmp_path, monkeypatch):
    stats = os.statvfs(tmp_path)
    read_only = type("Stats", (), {name: getattr(stats, name) for name in dir(stats)
                                   if name.startswith("f_")})()
    read_only.f_flag = stats.f_flag | os.ST_RDONLY
    monkeypatch.setattr(storage_errors, "_filesystem", lambda path: read_only)
    with pytest.raises(StorageError, match=r"\(.*x.txt\): read-only file system; nothing was "
                                           r"written; make that filesystem writable"):
        check_free_space(tmp_path / "x.txt", 1, "the file")


def test_free_bytes_of_a_path_not_made_yet_is_its_parent_s():
    assert storage_errors.free_bytes("/tmp/keras-elmo-no-such/deeper/x") == \
        storage_errors.free_bytes("/tmp")


@pytest.mark.parametrize("code", [ENOSPC, EROFS, EACCES])
def test_atomic_writer_fault_leaves_the_earlier_file_and_no_temporary(tmp_path, code):
    target = tmp_path / "vocab.txt"
    target.write_text("<S>\n</S>\n<UNK>\nold\n")
    with pytest.raises(StorageError) as raised:
        with atomic_writer(target, what="the vocabulary") as handle:
            handle.write("<S>\n")
            raise OSError(code, os.strerror(code))  # what the next write met
    line = str(raised.value)
    assert line.startswith(f"cannot write the vocabulary ({target}): "
                           f"{os.strerror(code).lower()}")
    assert f"no partial file was left; {target} as it was before is untouched" in line
    assert os.listdir(tmp_path) == ["vocab.txt"]
    assert target.read_text() == "<S>\n</S>\n<UNK>\nold\n"


@pytest.mark.parametrize("code", [EROFS, EACCES])
def test_a_temporary_that_cannot_be_made_is_one_line(tmp_path, monkeypatch, code):
    def refuse(*args, **kwargs):
        raise OSError(code, os.strerror(code), str(tmp_path / ".x.tmp"))
    monkeypatch.setattr(atomic_file.tempfile, "mkstemp", refuse)
    with pytest.raises(StorageError, match=f"cannot write the file .*{os.strerror(code).lower()}"
                                           "; no partial file was left;"):
        with atomic_writer(tmp_path / "x.txt"):
            pass


def test_atomic_directory_fault_removes_staging_and_the_parents_it_made(tmp_path, monkeypatch):
    target = tmp_path / "serving" / "elmo" / "1"
    with pytest.raises(StorageError, match=r"cannot write the SavedModel \(.*/serving/elmo/1\): "
                                           "no space left on device .*no partial directory"):
        with atomic_directory(target, what="the SavedModel") as staging:
            with open(os.path.join(staging, "saved_model.pb"), "wb") as handle:
                handle.write(b"half")
            raise tf.errors.ResourceExhaustedError(
                None, None, f"{staging}/variables/variables_temp; No space left on device")
    assert os.listdir(tmp_path) == []  # serving/ and serving/elmo/ were made by the write
    existing = tmp_path / "old" / "1"
    existing.mkdir(parents=True)
    (existing / "saved_model.pb").write_bytes(b"complete")
    with pytest.raises(StorageError, match="as it was before is untouched"):
        with atomic_directory(existing, replace=True, what="the SavedModel"):
            raise OSError(EACCES, "Permission denied")
    assert os.listdir(tmp_path / "old") == ["1"]
    assert (existing / "saved_model.pb").read_bytes() == b"complete"


def test_fault_shield_keeps_what_failed_and_reads_it_back(tmp_path, monkeypatch):
    path = tmp_path / "f"
    path.write_bytes(b"")
    shield = FaultShield(str(path))
    assert shield.write(b"0123456789") == 10
    real = os.pwrite

    def full(fd, data, offset):
        raise OSError(ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic_hdf5.os, "pwrite", full)
    shield.seek(5)
    assert shield.write(b"abcdefgh") == 8  # failed on the disk: held in memory
    assert shield.fault.errno == ENOSPC and shield.size == 13
    shield.seek(0)
    assert shield.read(13) == b"01234abcdefgh"
    shield.seek(0, os.SEEK_END)
    assert shield.tell() == 13
    shield.truncate(7)
    shield.seek(0)
    assert shield.read(20) == b"01234ab"
    monkeypatch.setattr(atomic_hdf5.os, "pwrite", real)
    with pytest.raises(OSError, match="No space left"):
        shield.sync()
    shield.close()


@pytest.mark.parametrize("code", [ENOSPC, EROFS, EACCES])
def test_hdf5_fault_is_one_line_without_crash_or_leftover(tmp_path, monkeypatch, code):
    target = tmp_path / "weights.hdf5"
    with h5py.File(target, "w") as f:
        f.create_dataset("old", data=np.ones(3, np.float32))
    written = {"bytes": 0}
    real = os.pwrite

    def pwrite(fd, data, offset):  # the disk takes 20 kB, then refuses
        if written["bytes"] > 20_000:
            raise OSError(code, os.strerror(code))
        written["bytes"] += len(data)
        return real(fd, data, offset)

    monkeypatch.setattr(atomic_hdf5.os, "pwrite", pwrite)
    with pytest.raises(StorageError) as raised:
        with atomic_hdf5.atomic_hdf5(target, what="the biLM weights") as output:
            for i in range(100):
                output.file.create_dataset(str(i), data=np.ones((100, 10), np.float32))
    line = str(raised.value)
    assert line.startswith(f"cannot write the biLM weights ({target}): "
                           f"{os.strerror(code).lower()}")
    assert "as it was before is untouched" in line
    if code == ENOSPC:  # what the file had reached when the disk refused
        assert raised.value.needed > 20_000
    monkeypatch.setattr(atomic_hdf5.os, "pwrite", real)
    assert os.listdir(tmp_path) == ["weights.hdf5"]
    with h5py.File(target, "r") as f:
        assert list(f) == ["old"]


def test_check_stops_a_long_writer_at_the_first_fault(tmp_path, monkeypatch):
    real = os.pwrite
    state = {"calls": 0}

    def pwrite(fd, data, offset):
        state["calls"] += 1
        if state["calls"] > 3:
            raise OSError(ENOSPC, "No space left on device")
        return real(fd, data, offset)

    monkeypatch.setattr(atomic_hdf5.os, "pwrite", pwrite)
    written = 0
    with pytest.raises(StorageError, match="no space left on device"):
        with atomic_hdf5.atomic_hdf5(tmp_path / "out.hdf5", what="the ELMo vectors") as output:
            for i in range(10_000):
                output.file.create_dataset(str(i), data=np.ones((64, 64), np.float32))
                written += 1
                output.check()
    assert written < 10  # stopped soon after, not at the end
    assert os.listdir(tmp_path) == []
