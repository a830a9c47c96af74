"""`DownloadProgress`: the progress of one download on stderr.

On a terminal one line is rewritten in place (at most 5 times a second) with the bytes
received, the size, the rate and the time left:

    elmo-small weights.hdf5: 12.3 MB / 54.6 MB (22%) | 3.1 MB/s | ETA 0:00:13

In a log (not a terminal) it stays quiet: one line when the download starts and one when it
ends, nothing in between.

Example:
>>> progress = DownloadProgress("elmo-small weights.hdf5", total=1000, stream=io.StringIO())
>>> progress.update(500)
>>> progress.close()
"""

import sys
import time

from keras_elmo.process.progress import format_clock
from keras_elmo.process.storage_errors import format_bytes

_TTY_REFRESH_SECONDS = 0.2


class DownloadProgress:
    """Counts the bytes of one download; writes its progress line.

    Args:
        label: str, what is downloaded (`"elmo-small weights.hdf5"`).
        total: int bytes expected in all (None: unknown, no percentage or ETA).
        start: int bytes already there (a resumed download).
        source: str, where from (the host), for the first line in a log.
        stream: text stream (stderr); enabled=False writes nothing.
    """

    def __init__(self, label, total=None, start=0, source=None, stream=None, enabled=True):
        self.label, self.total, self.start_bytes = label, total, start
        self.done = start
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.started = self.last = time.monotonic()
        if self.enabled and not self.tty:
            size = f" ({format_bytes(total)})" if total else ""
            resumed = f", resuming at {format_bytes(start)}" if start else ""
            where = f" from {source}" if source else ""
            self._write(f"downloading {label}{size}{where}{resumed}\n")

    def line(self):
        """The in-place line (see the module docstring)."""
        seconds = max(time.monotonic() - self.started, 1e-9)
        rate = (self.done - self.start_bytes) / seconds
        done = format_bytes(self.done)
        if self.total:
            done += f" / {format_bytes(self.total)} ({self.done / self.total:.0%})"
        parts = [f"{self.label}: {done}", f"{format_bytes(rate)}/s"]
        if self.total and rate > 0:
            parts.append(f"ETA {format_clock((self.total - self.done) / rate)}")
        return " | ".join(parts)

    def update(self, count):
        """Adds `count` bytes received."""
        self.done += count
        now = time.monotonic()
        if self.enabled and self.tty and now - self.last >= _TTY_REFRESH_SECONDS:
            self.last = now
            self._write("\r" + self.line() + "   ")

    def stop(self):
        """Ends a terminal's line of a download that stopped half way (the line of what
        went wrong then starts a line of its own); nothing in a log."""
        if self.enabled and self.tty and self.done > self.start_bytes:
            self._write("\n")

    def close(self):
        """Writes the final line: the size and the time taken."""
        if not self.enabled:
            return
        seconds = time.monotonic() - self.started
        rate = (self.done - self.start_bytes) / max(seconds, 1e-9)
        self._write(("\r" if self.tty else "") + f"{self.label}: {format_bytes(self.done)} in "
                    f"{format_clock(seconds)} ({format_bytes(rate)}/s)   \n")

    def _write(self, text):
        self.stream.write(text)
        self.stream.flush()
