"""`Progress`: the one progress line on stderr, for commands and downloads; `format_clock`.

A job counts what it did (`update`) against what it expects (`total`), in one of two units:

- `unit="sentences"` (commands: embed, neighbors): sentences, and tokens beside them;
- `unit="bytes"` (downloads): bytes, shown as kB/MB/GB.

On a terminal the line is rewritten in place (at most 5 times a second); otherwise (a log
file, a pipe) one line is written every `log_seconds` (None: none in between, only the
`first_line` and the final one). A final line is always written (`close`); a job that stops
half way ends a terminal's line (`stop`) so that the error's line starts a line of its own.

    embed: 1,200/5,000 sentences (24%) | 35,100 tokens | 1,450 tok/s | ETA 0:00:40
    embed: 5,000/5,000 sentences (100%) | 146,000 tokens | 1,460 tok/s | 0:01:40
    elmo-small weights.hdf5: 12.3 MB / 54.6 MB (22%) | 3.1 MB/s | ETA 0:00:13
    elmo-small weights.hdf5: 54.6 MB in 0:00:17 (3.2 MB/s)

Example:
>>> progress = Progress(total=5000, label="embed", stream=io.StringIO())
>>> progress.update(sentences=64, tokens=1500)
>>> progress.close()
>>> meter = Progress(total=2048, label="x.hdf5", unit="bytes", stream=io.StringIO())
>>> meter.update(1024)
>>> meter.close()
"""

import sys
import time

from keras_elmo.process.storage_errors import format_bytes

_TTY_REFRESH_SECONDS = 0.2
_UNITS = ("sentences", "bytes")


def format_clock(seconds):
    """`H:MM:SS` of a duration in seconds (negative counts as 0).

    Example:
    >>> format_clock(3725.9)
    '1:02:05'
    """
    seconds = int(max(seconds, 0))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class Progress:
    """Counts the work of one job; writes its progress line (module docstring).

    Args:
        total: int or None, the units expected (None: no percentage or ETA).
        label: str, the line's prefix (`"embed"`, `"elmo-small weights.hdf5"`).
        stream: text stream (stderr); `enabled=False` writes nothing.
        enabled: bool.
        log_seconds: float or None, seconds between lines when `stream` is not a terminal
            (15); None: no line in between.
        unit: `"sentences"` or `"bytes"`.
        start: int, units done before this run (a resumed download): counted in the line,
            not in the rate.
        first_line: str or None, written once at the start when `stream` is not a terminal.
    """

    def __init__(self, total=None, label="progress", stream=None, enabled=True, log_seconds=15.0,
                 unit="sentences", start=0, first_line=None):
        if unit not in _UNITS:
            raise ValueError(f"Expected unit one of {_UNITS}. Received: unit={unit!r}")
        self.total = total
        self.label = label
        self.unit = unit
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.interval = (_TTY_REFRESH_SECONDS if self.tty else
                         None if log_seconds is None else float(log_seconds))
        self.start_count = self.done = int(start)
        self.tokens = 0
        self.start = self.last = time.monotonic()
        if self.enabled and not self.tty and first_line:
            self._write(first_line + "\n")

    @property
    def seconds(self):
        return time.monotonic() - self.start

    @property
    def sentences(self):
        """The sentences done (`unit="sentences"`)."""
        return self.done

    def line(self):
        """The in-place line (module docstring)."""
        seconds = max(self.seconds, 1e-9)
        rate = (self.done - self.start_count) / seconds
        if self.unit == "bytes":
            done = format_bytes(self.done)
            if self.total:
                done += f" / {format_bytes(self.total)} ({self.done / self.total:.0%})"
            parts = [f"{self.label}: {done}", f"{format_bytes(rate)}/s"]
        else:
            done = f"{self.done:,}"
            if self.total:
                done += f"/{self.total:,} sentences ({self.done / self.total:.0%})"
            else:
                done += " sentences"
            parts = [f"{self.label}: {done}", f"{self.tokens:,} tokens",
                     f"{self.tokens / seconds:,.0f} tok/s"]
        if self.total and rate > 0:
            parts.append(f"ETA {format_clock((self.total - self.done) / rate)}")
        return " | ".join(parts)

    def update(self, count=0, tokens=0, sentences=0):
        """Adds `count` units done (`sentences` is the same count, by its name) and
        `tokens`."""
        self.done += int(count) + int(sentences)
        self.tokens += int(tokens)
        now = time.monotonic()
        if self.enabled and self.interval is not None and now - self.last >= self.interval:
            self.last = now
            self._write(("\r" + self.line() + "   ") if self.tty else self.line() + "\n")

    def stop(self):
        """Ends a terminal's line of a job that stopped half way; nothing in a log."""
        if self.enabled and self.tty and self.done > self.start_count:
            self._write("\n")

    def close(self):
        """Writes the final line: the elapsed time instead of the ETA (a download: the size,
        the time and the rate)."""
        if not self.enabled:
            return
        if self.unit == "bytes":
            rate = (self.done - self.start_count) / max(self.seconds, 1e-9)
            line = (f"{self.label}: {format_bytes(self.done)} in {format_clock(self.seconds)} "
                    f"({format_bytes(rate)}/s)   ")
        else:
            line = self.line().split(" | ETA")[0] + f" | {format_clock(self.seconds)}"
        self._write(("\r" if self.tty else "") + line + "\n")

    def _write(self, text):
        self.stream.write(text)
        self.stream.flush()
