"""The one file lock (`keras_elmo.process.file_lock`) that the download lock, the run lock
and `atomic_file`'s stale temporaries use: the holder record, a refused or waiting second
holder, the file removed on release, and the stale-holder rule."""

import json
import os
import subprocess
import sys
import textwrap
import time

from keras_elmo.process import file_lock
from keras_elmo.process.file_lock import (FileLock, holder_gone, holder_text, host_name,
                                          remove_unheld)

_HOLDER = textwrap.dedent("""
    import sys, time
    from keras_elmo.process.file_lock import FileLock
    FileLock(sys.argv[1]).acquire()
    print("locked", flush=True)
    time.sleep(60)
""")


def _dead_pid():
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_the_holder_is_recorded_and_a_second_taker_is_refused_naming_it(tmp_path):
    path = tmp_path / "x.lock"
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(path)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        record = json.loads(path.read_text())
        assert record["pid"] == holder.pid and record["host"] == host_name()
        assert time.strptime(record["since"], "%Y-%m-%d %H:%M:%S UTC")
        second = FileLock(path)
        assert second.acquire(blocking=False) is False and not second.held
        assert second.holder() == f"pid {holder.pid} on host {host_name()} since {record['since']}"
    finally:
        holder.kill()
        holder.wait()
    assert FileLock(path).acquire(blocking=False) is True  # the kernel let go with the process


def test_a_file_removed_on_release_is_not_shared_and_a_free_lock_says_nothing(tmp_path):
    path = tmp_path / "m.lock"
    first = FileLock(path, remove_on_release=True)
    first.acquire()
    told = []
    second = FileLock(path, remove_on_release=True)
    assert second.acquire(blocking=False) is False
    first.release()
    assert not path.exists()  # removed before it was let go
    assert second.acquire(on_wait=told.append) and told == []  # free: no wait, no line
    assert json.loads(path.read_text())["pid"] == os.getpid()
    second.release()


def test_holder_gone_on_this_host_by_pid_elsewhere_by_age():
    assert holder_gone(_dead_pid(), host_name()) is True
    assert holder_gone(os.getpid(), host_name()) is False
    now = time.time()
    assert holder_gone(12345, "another-host", mtime=now - 60, now=now) is False
    assert holder_gone(12345, "another-host", mtime=now - file_lock.STALE_SECONDS - 1,
                       now=now) is True
    assert holder_gone(None, None) is False  # nothing to tell by


def test_an_ended_holders_record_is_not_named_and_files_nobody_holds_go(tmp_path):
    path = tmp_path / "r.lock"
    path.write_text(json.dumps({"pid": _dead_pid(), "host": host_name(), "since": "x"}))
    assert FileLock(path).holder() == "another process (its details are still being written)"
    assert holder_text({"pid": 7, "host": "gpu1"}) == "pid 7 on host gpu1"
    (tmp_path / "s.lock").write_text("")
    assert remove_unheld(str(tmp_path), ".lock") == ["r.lock", "s.lock"]
    assert os.listdir(tmp_path) == []
