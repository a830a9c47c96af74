"""The progress of a download: on a terminal one line rewritten with size, rate and time
left; in a log one line when it starts and one when it ends; nothing when disabled. The
same `Progress` class writes the commands' lines (sentences and tokens): those too."""

import io

from keras_elmo.process import progress as progress_module
from keras_elmo.process.progress import Progress
from keras_elmo.pretrained.download_progress import download_progress


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_terminal_gets_one_line_rewritten_with_the_time_left(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(progress_module.time, "monotonic", lambda: now[0])
    stream = _Terminal()
    progress = download_progress("efml-de 142.zip", total=4 << 20, stream=stream)
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
    progress = download_progress("elmo-small weights.hdf5", total=2048, start=1024,
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
    progress = download_progress("x", total=10, stream=stream)
    progress.update(5)
    progress.stop()
    assert stream.getvalue().endswith("\n")
    quiet = io.StringIO()
    progress = download_progress("x", total=10, stream=quiet, enabled=False)
    progress.update(5)
    progress.stop()
    progress.close()
    assert quiet.getvalue() == ""


def test_a_commands_line_in_a_log_every_interval_and_its_final_line(monkeypatch):
    """The commands' unit: sentences and tokens, a line per `log_seconds` in a log, the
    elapsed time in place of the ETA at the end (as before the two classes became one)."""
    now = [0.0]
    monkeypatch.setattr(progress_module.time, "monotonic", lambda: now[0])
    stream = io.StringIO()
    progress = Progress(5000, label="embed", stream=stream, log_seconds=15)
    now[0] = 10.0
    progress.update(sentences=1000, tokens=20000)  # before 15 s: no line
    now[0] = 20.0
    progress.update(sentences=1000, tokens=20000)
    now[0] = 50.0
    progress.update(sentences=3000, tokens=60000)
    progress.close()
    assert stream.getvalue().splitlines() == [
        "embed: 2,000/5,000 sentences (40%) | 40,000 tokens | 2,000 tok/s | ETA 0:00:30",
        "embed: 5,000/5,000 sentences (100%) | 100,000 tokens | 2,000 tok/s | ETA 0:00:00",
        "embed: 5,000/5,000 sentences (100%) | 100,000 tokens | 2,000 tok/s | 0:00:50"]
    assert progress.sentences == 5000


def test_an_unknown_unit_is_one_line():
    import pytest

    with pytest.raises(ValueError, match="Expected unit one of .* Received: unit='lines'"):
        Progress(10, unit="lines")
