"""What a download must never keep or do: a `.part` file whose size differs from what the
server announced, a file spliced by two writers whose lock failed, a `Retry-After` ignored or
obeyed past the retry budget. Served by the local mirror (`model_mirror`), no network."""

import email.utils
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import model_mirror
from keras_elmo.pretrained import http_download
from keras_elmo.pretrained.http_download import DownloadError
from keras_elmo.pretrained.model_cache import verify_cached
from keras_elmo.pretrained.resolve import resolve_model

SMALL_WEIGHTS = model_mirror.SMALL_WEIGHTS


mirror_dir, served = model_mirror.served_fixtures(["elmo-small"])


@pytest.fixture
def sleeps(monkeypatch):
    """The waits between attempts, recorded instead of slept."""
    waited = []
    monkeypatch.setattr(http_download, "_sleep", waited.append)
    return waited


def _weights(mirror_dir):
    return (mirror_dir / SMALL_WEIGHTS.lstrip("/")).read_bytes()


def test_retry_after_seconds_on_a_503_sets_the_wait(served, sleeps, capfd):
    served.faults[SMALL_WEIGHTS] = ("status", 503, {"Retry-After": "1"}, 1)
    resolve_model("elmo-small")
    assert sleeps == [1.0]  # not the backoff (0.01 s in these tests)
    assert [p for p in served.paths() if p == SMALL_WEIGHTS] == [SMALL_WEIGHTS] * 2
    err = capfd.readouterr().err
    assert "answered 503 Service Unavailable; retrying elmo-small " in err
    assert " in 1 s (Retry-After)" in err


def test_retry_after_as_an_http_date_on_a_429(served, sleeps):
    when = email.utils.formatdate(time.time() + 2, usegmt=True)
    served.faults[SMALL_WEIGHTS] = ("status", 429, {"Retry-After": when}, 1)
    resolve_model("elmo-small")
    assert len(sleeps) == 1 and 0.0 < sleeps[0] <= 2.0


def test_a_retry_after_past_the_budget_is_one_line_not_a_long_sleep(served, sleeps,
                                                                       tmp_path):
    served.faults[SMALL_WEIGHTS] = ("status", 503, {"Retry-After": "3600"})
    started = time.monotonic()
    with pytest.raises(DownloadError) as raised:
        resolve_model("elmo-small")
    assert time.monotonic() - started < 30 and sleeps == []
    line = str(raised.value)
    assert "\n" not in line
    assert (f"{served.url}{SMALL_WEIGHTS}: 503 Service Unavailable, asking to retry after "
            "3600 s: more than the 60 s left of the retry budget (60 s a file)") in line
    assert line.endswith("run the same command again later (a partial download resumes), "
                         "or set KERAS_ELMO_MIRROR to a mirror that holds the file.")
    assert model_mirror.left_in_cache(tmp_path) == []


def test_a_part_file_longer_than_announced_is_refused_before_it_is_hashed(
        served, mirror_dir, tmp_path, monkeypatch):
    """Another writer put bytes past the end of this process's `.part` file while it
    downloaded: the size no longer fits Content-Length; refused, never hashed nor kept."""
    served.faults[SMALL_WEIGHTS] = ("slow", 0.5)
    size = len(_weights(mirror_dir))
    partial = tmp_path / "cache" / "models" / ".partial" / "elmo-small"
    hashed = []
    monkeypatch.setattr(http_download, "file_sha256", lambda p: hashed.append(p) or "0" * 64)

    def intruder():
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            parts = list(partial.glob("weights.*.part")) if partial.is_dir() else []
            if parts:
                fd = os.open(parts[0], os.O_WRONLY)
                os.pwrite(fd, b"x" * 10, size + 5)
                os.close(fd)
                return
            time.sleep(0.005)

    thread = threading.Thread(target=intruder)
    thread.start()
    with pytest.raises(DownloadError) as raised:
        resolve_model("elmo-small")
    thread.join()
    line = str(raised.value)
    part = f"weights.{os.getpid()}@{socket.gethostname()}.part"
    assert (f"the download {part} holds {size + 15} bytes ({size} received); the server "
            f"announced {size} (removed before it was hashed or kept)") in line
    assert "\n" not in line
    assert [os.path.basename(p).split(".")[0] for p in hashed] == ["options"]  # not weights
    assert model_mirror.left_in_cache(tmp_path) == []


_WRITER = textwrap.dedent("""
    import contextlib, os, sys, time
    from keras_elmo.pretrained import fetch
    fetch.download_lock = lambda *a, **k: contextlib.nullcontext()  # as if flock failed
    from keras_elmo.pretrained.resolve import resolve_model
    open(os.path.join(sys.argv[1], str(os.getpid())), "w").close()
    while len(os.listdir(sys.argv[1])) < 2:
        time.sleep(0.01)
    print(resolve_model("elmo-small", progress=False).model_dir)
""")


def test_two_writers_racing_without_the_lock_each_land_a_whole_file(served, mirror_dir,
                                                                    tmp_path):
    """Two processes whose lock failed (a network filesystem) download at once: each into
    its own `.part`, each lands a verified whole copy in one rename; no spliced file."""
    served.faults[SMALL_WEIGHTS] = ("slow", 1.0)
    barrier = tmp_path / "ready"
    barrier.mkdir()
    writers = [subprocess.Popen([sys.executable, "-c", _WRITER, str(barrier)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for _ in range(2)]
    outputs = [writer.communicate(timeout=120) for writer in writers]
    assert [w.returncode for w in writers] == [0, 0], [err[-1500:] for _, err in outputs]
    model_dir = tmp_path / "cache" / "models" / "elmo-small"
    assert {out.strip() for out, _ in outputs} == {str(model_dir)}
    assert served.paths().count(SMALL_WEIGHTS) == 2  # both downloaded: no lock held them
    assert (model_dir / "weights.hdf5").read_bytes() == _weights(mirror_dir)
    summary = verify_cached(str(tmp_path / "cache" / "models"), "elmo-small", full=True)
    assert summary["files"] == 2 and summary["hashed"] == 2
    assert not any(".part" in p or ".tmp" in p for p in model_mirror.left_in_cache(tmp_path))


def _dead_pid():
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_an_ended_writers_part_is_taken_over_and_a_live_ones_left(served, mirror_dir,
                                                                   tmp_path):
    import hashlib
    import json

    data = _weights(mirror_dir)
    partial = tmp_path / "cache" / "models" / ".partial" / "elmo-small"
    partial.mkdir(parents=True)
    host = socket.gethostname()
    dead = partial / f"weights.{_dead_pid()}@{host}.part"
    dead.write_bytes(data[:30000])
    etag = '"' + hashlib.sha256(data).hexdigest()[:16] + '"'
    (partial / (dead.name + ".json")).write_text(json.dumps(
        {"url": served.url + SMALL_WEIGHTS, "etag": etag, "last_modified": None}))
    live = partial / f"weights.{os.getppid()}@{host}.part"  # a running process's
    live.write_bytes(b"in use")
    path = resolve_model("elmo-small").model_dir
    assert (SMALL_WEIGHTS, "bytes=30000-") in served.requests
    with open(os.path.join(path, "weights.hdf5"), "rb") as handle:
        assert handle.read() == data
    assert sorted(p.name for p in partial.iterdir()) == [live.name]
