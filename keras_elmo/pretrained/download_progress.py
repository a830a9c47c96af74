"""`download_progress`: the progress line of one download (`keras_elmo.process.progress`).

On a terminal one line is rewritten in place (at most 5 times a second) with the bytes
received, the size, the rate and the time left:

    elmo-small weights.hdf5: 12.3 MB / 54.6 MB (22%) | 3.1 MB/s | ETA 0:00:13

In a log (not a terminal) it stays quiet: one line when the download starts and one when it
ends, nothing in between. The line is the commands' `Progress` in bytes.

Example:
>>> meter = download_progress("elmo-small weights.hdf5", total=1000, stream=io.StringIO())
>>> meter.update(500)
>>> meter.close()
"""

from keras_elmo.process.progress import Progress
from keras_elmo.process.storage_errors import format_bytes


def download_progress(label, total=None, start=0, source=None, stream=None, enabled=True):
    """The `Progress` (in bytes) of one download.

    Args:
        label: str, what is downloaded (`"elmo-small weights.hdf5"`).
        total: int bytes expected in all (None: unknown, no percentage or ETA).
        start: int bytes already there (a resumed download).
        source: str, where from (the host), for the first line in a log.
        stream: text stream (stderr); enabled=False writes nothing.

    Returns:
        `Progress`: `update(bytes)`, `stop()` when the download stops half way, `close()`.
    """
    size = f" ({format_bytes(total)})" if total else ""
    resumed = f", resuming at {format_bytes(start)}" if start else ""
    where = f" from {source}" if source else ""
    return Progress(total, label=label, stream=stream, enabled=enabled, log_seconds=None,
                    unit="bytes", start=start,
                    first_line=f"downloading {label}{size}{where}{resumed}")
