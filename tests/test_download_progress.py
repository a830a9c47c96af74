"""The progress of a download: on a terminal one line rewritten with size, rate and time
left; in a log one line when it starts and one when it ends; nothing when disabled."""

import io

from keras_elmo.pretrained import download_progress
from keras_elmo.pretrained.download_progress import DownloadProgress


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_terminal_gets_one_line_rewritten_with_the_time_left(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(download_progress.time, "monotonic", lambda: now[0])
    stream = _Terminal()
    progress = DownloadProgress("efml-de 142.zip", total=4 << 20, stream=stream)
    now[0] = 1.0
    progress.update(1 << 20)  # at 1 s: 1 MB/s, 3 MB to go
    now[0] = 1.1
    progress.update(1 << 20)  # too soon after the last: not written
    now[0] = 2.0
    progress.update(0)
    now[0] = 4.0
    progress.close()
    assert stream.getvalue() == (
        "\refml-de 142.zip: 1.0 MB / 4.0 MB (25%) | 1.0 MB/s | ETA 0:00:03   "
        "\refml-de 142.zip: 2.0 MB / 4.0 MB (50%) | 1.0 MB/s | ETA 0:00:02   "
        "\refml-de 142.zip: 2.0 MB in 0:00:04 (512 kB/s)   \n")


def test_a_log_gets_a_first_and_a_last_line_only():
    stream = io.StringIO()
    progress = DownloadProgress("elmo-small weights.hdf5", total=2048, start=1024,
                                source="s3-us-west-2.amazonaws.com", stream=stream)
    for _ in range(100):
        progress.update(10)
    progress.stop()  # nothing to end in a log
    progress.close()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0] == ("downloading elmo-small weights.hdf5 (2.0 kB) from "
                        "s3-us-west-2.amazonaws.com, resuming at 1.0 kB")
    assert lines[1].startswith("elmo-small weights.hdf5: 2.0 kB in 0:00:00 (")


def test_a_stopped_download_ends_the_terminal_line_and_disabled_writes_nothing():
    stream = _Terminal()
    progress = DownloadProgress("x", total=10, stream=stream)
    progress.update(5)
    progress.stop()
    assert stream.getvalue().endswith("\n")
    quiet = io.StringIO()
    progress = DownloadProgress("x", total=10, stream=quiet, enabled=False)
    progress.update(5)
    progress.stop()
    progress.close()
    assert quiet.getvalue() == ""
