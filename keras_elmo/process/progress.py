"""`Progress`: one progress line on stderr for long, countable jobs; `format_clock`.

On a terminal the line is rewritten in place (at most 5 times a second); otherwise (a log
file, a pipe) one line is written every `log_seconds`. A final line is always written.

    embed: 1,200/5,000 sentences (24%) | 35,100 tokens | 1,450 tok/s | ETA 0:00:40

Example:
>>> progress = Progress(total=5000, label="embed")
>>> progress.update(sentences=64, tokens=1500)
>>> progress.close()
"""

import sys
import time

_TTY_REFRESH_SECONDS = 0.2


def format_clock(seconds):
    """`H:MM:SS` of a duration in seconds (negative counts as 0)."""
    seconds = int(max(seconds, 0))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class Progress:
    """Counts sentences and tokens; writes the progress line.

    Args:
        total: int or None, sentences expected (None: no percentage or ETA).
        label: str, the line's prefix.
        stream: text stream (stderr); `enabled=False` writes nothing.
        log_seconds: float, seconds between lines when `stream` is not a terminal (15).
    """

    def __init__(self, total=None, label="progress", stream=None, enabled=True, log_seconds=15.0):
        self.total = total
        self.label = label
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.interval = _TTY_REFRESH_SECONDS if self.tty else float(log_seconds)
        self.sentences = self.tokens = 0
        self.start = self.last = time.monotonic()

    @property
    def seconds(self):
        return time.monotonic() - self.start

    def line(self):
        seconds = max(self.seconds, 1e-9)
        done = f"{self.sentences:,}"
        if self.total:
            done += f"/{self.total:,} sentences ({self.sentences / self.total:.0%})"
        else:
            done += " sentences"
        parts = [f"{self.label}: {done}", f"{self.tokens:,} tokens",
                 f"{self.tokens / seconds:,.0f} tok/s"]
        if self.total and self.sentences:
            remaining = (self.total - self.sentences) * seconds / self.sentences
            parts.append(f"ETA {format_clock(remaining)}")
        return " | ".join(parts)

    def update(self, sentences=0, tokens=0):
        self.sentences += int(sentences)
        self.tokens += int(tokens)
        now = time.monotonic()
        if self.enabled and now - self.last >= self.interval:
            self.last = now
            self.stream.write(("\r" + self.line() + "   ") if self.tty else self.line() + "\n")
            self.stream.flush()

    def close(self):
        """Writes the final line (elapsed time instead of the ETA)."""
        if self.enabled:
            line = self.line().split(" | ETA")[0] + f" | {format_clock(self.seconds)}"
            self.stream.write(("\r" if self.tty else "") + line + "\n")
            self.stream.flush()
