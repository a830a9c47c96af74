"""Atomic files and directories: stale temporaries of killed writers are removed; a
directory replaced under `kill -9` is always complete under its name."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from keras_elmo.process import atomic_file, file_lock
from keras_elmo.process.atomic_file import (atomic_directory, atomic_writer, exchange_paths,
                                    remove_stale_temporaries)


def _dead_pid():
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def test_temporaries_of_dead_writers_are_removed_by_the_next_write(tmp_path):
    target = tmp_path / "out.hdf5"
    host = atomic_file._host()
    dead = tmp_path / f".out.hdf5.{_dead_pid()}@{host}@abc123.tmp"
    dead.write_bytes(b"x" * 1000)
    dead_dir = tmp_path / f".out.hdf5.{_dead_pid()}@{host}@def456.old.tmp"
    dead_dir.mkdir()
    (dead_dir / "inner").write_text("x")
    live = tmp_path / f".out.hdf5.{os.getppid()}@{host}@live01.tmp"  # a running process
    live.write_text("in use")
    other_host = tmp_path / f".out.hdf5.{_dead_pid()}@elsewhere@abc.tmp"  # cannot be told
    other_host.write_text("x")
    old_style = tmp_path / ".out.hdf5.q1w2e3.tmp"
    old_style.write_text("x")
    old_enough = time.time() - file_lock.STALE_SECONDS - 60
    os.utime(old_style, (old_enough, old_enough))
    unrelated = tmp_path / ".other.txt.123@x@abc.tmp"
    unrelated.write_text("x")

    with atomic_writer(target, "wb") as handle:
        handle.write(b"new")
    assert target.read_bytes() == b"new"
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted([target.name, live.name, other_host.name, unrelated.name]), left
    assert remove_stale_temporaries(target) == []


def test_a_write_removes_orphans_of_other_names_in_its_folder(tmp_path):
    """A killed `keras-elmo embed` left `.big.hdf5.<pid>@<host>@....tmp`; the next atomic write
    in that folder, of any name, removes it (its process is gone). A live writer's temporary
    of another name, and another host's, stay."""
    host = atomic_file._host()
    orphan = tmp_path / f".big.hdf5.{_dead_pid()}@{host}@k1ll3d.tmp"
    orphan.write_bytes(b"x" * 4096)
    live = tmp_path / f".other.hdf5.{os.getppid()}@{host}@busy01.tmp"
    live.write_text("in use")
    elsewhere = tmp_path / f".big.hdf5.{_dead_pid()}@elsewhere@x1.tmp"
    elsewhere.write_text("x")
    user_file = tmp_path / ".notes.tmp"  # not one of ours: never touched
    user_file.write_text("mine")
    with atomic_writer(tmp_path / "small.txt") as handle:
        handle.write("done")
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted(["small.txt", live.name, elsewhere.name, user_file.name]), left


def test_exchange_swaps_two_directories(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f").write_text("a")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "f").write_text("b")
    if not exchange_paths(str(tmp_path / "a"), str(tmp_path / "b")):
        pytest.skip("renameat2(RENAME_EXCHANGE) not available here")
    assert (tmp_path / "a" / "f").read_text() == "b"
    assert (tmp_path / "b" / "f").read_text() == "a"


@pytest.mark.parametrize("exchange", [True, False])
def test_replace_keeps_one_complete_directory(tmp_path, monkeypatch, exchange):
    target = tmp_path / "export"
    with atomic_directory(target) as staging:
        (open(os.path.join(staging, "v"), "w")).write("1")
    if not exchange:
        monkeypatch.setattr(atomic_file, "exchange_paths", lambda a, b: False)
    with atomic_directory(target, replace=True) as staging:
        (open(os.path.join(staging, "v"), "w")).write("2")
        assert (target / "v").read_text() == "1"  # the old one is usable meanwhile
    assert (target / "v").read_text() == "2"
    assert sorted(os.listdir(tmp_path)) == ["export"]


_REPLACER = textwrap.dedent("""
    import os, sys
    from keras_elmo.process.atomic_file import atomic_directory
    target = sys.argv[1]
    version = 0
    while True:
        version += 1
        with atomic_directory(target, replace=True) as staging:
            for name in ("a", "b", "c"):
                with open(os.path.join(staging, name), "w") as f:
                    f.write(str(version))
""")


def test_kill_9_while_replacing_never_leaves_the_name_empty(tmp_path):
    target = tmp_path / "export"
    with atomic_directory(target) as staging:
        for name in ("a", "b", "c"):
            open(os.path.join(staging, name), "w").write("0")
    for delay in (0.3, 0.45, 0.6, 0.75):
        process = subprocess.Popen([sys.executable, "-c", _REPLACER, str(target)])
        time.sleep(delay)
        process.send_signal(signal.SIGKILL)  # always killed: it cannot outlive the test
        process.wait()
        assert sorted(os.listdir(target)) == ["a", "b", "c"]
        versions = {(target / name).read_text() for name in ("a", "b", "c")}
        assert len(versions) == 1, versions  # one complete version, never a mix
    # The next write removes what the killed writers left.
    with atomic_directory(target, replace=True) as staging:
        open(os.path.join(staging, "a"), "w").write("last")
    assert sorted(os.listdir(tmp_path)) == ["export"]
