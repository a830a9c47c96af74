"""`MemorySampler`: the peak anonymous memory of a process, sampled by a background thread.

Linux's `/proc/<pid>/status` gives a process's resident memory (`VmRSS`) and the part of it
that is anonymous (`RssAnon`: what the process allocated itself, tensors, heap, stacks),
the rest being pages of mapped files (`RssFile`, e.g. TensorFlow's libraries), which the
kernel can drop and read back. The kernel keeps the RSS peak (`VmHWM`) but no anonymous
peak: the sampler reads the file every `interval` seconds in a daemon thread and keeps the
largest `RssAnon` and `VmRSS` it saw. Memory held for less than an interval may be missed;
the thread needs the GIL for a moment per sample, which TensorFlow ops and sleeps release.

With `tree=True` the figures are the sums over the process and every process it started
(found through `/proc/<pid>/task/<tid>/children`), so a command that runs its work in a
child (`bash wrapper.sh` starting `python`) is measured whole. Units: MiB (2^20 bytes).

Example:
>>> sampler = MemorySampler()  # this process, every 5 ms
>>> sampler.peak()["anon"] >= sampler.read()["anon"] > 0
True
>>> sampler.close()
"""

import os
import threading

#: Seconds between samples of this process (`MemoryStages`).
DEFAULT_INTERVAL = 0.005
#: `/proc/<pid>/status` fields read, and their names in the figures.
_FIELDS = {b"RssAnon": "anon", b"VmRSS": "rss"}


def read_status(pid="self"):
    """`{"anon", "rss"}` in MiB of one process now; `{}` when there is no such file or the
    process has exited (a zombie has no memory lines).

    Example:
    >>> sorted(read_status())
    ['anon', 'rss']
    """
    try:
        with open(f"/proc/{pid}/status", "rb") as status:
            text = status.read()
    except OSError:
        return {}
    values = {}
    for line in text.splitlines():
        name = line.split(b":", 1)[0]
        if name in _FIELDS:
            values[_FIELDS[name]] = int(line.split()[1]) / 1024.0  # kB -> MiB
    return values


def descendants(pid):
    """The ids of every live process `pid` started, directly or not (children of any of its
    threads), or `[]` where the kernel does not list children.

    Example:
    >>> descendants(os.getpid())
    []
    """
    found, pending = [], [int(pid)]
    while pending:
        parent = pending.pop()
        try:
            threads = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for thread in threads:
            try:
                with open(f"/proc/{parent}/task/{thread}/children") as handle:
                    children = [int(c) for c in handle.read().split()]
            except OSError:
                continue
            found += children
            pending += children
    return found


class MemorySampler:
    """The largest `RssAnon` and `VmRSS` of a process seen since the start or the last
    `take()`, read every `interval` seconds by a daemon thread (module docstring).

    Args:
        pid: int or `"self"`, the process to watch ("self").
        interval: float > 0, seconds between samples (`DEFAULT_INTERVAL`).
        tree: bool, sum over the process and its descendants (False).

    Example:
    >>> with MemorySampler(interval=0.01) as sampler:
    ...     first = sampler.take()  # the window so far; a new one starts now
    >>> first["anon"] > 0
    True
    """

    def __init__(self, pid="self", interval=DEFAULT_INTERVAL, tree=False):
        if not interval > 0:
            raise ValueError(f"interval must be > 0 seconds; received {interval!r}.")
        self.pid, self.interval, self.tree = pid, interval, tree
        self._lock = threading.Lock()
        self._peak = {}
        self._stop = threading.Event()
        self._keep(self.read())
        self._thread = threading.Thread(target=self._run, name="memory-sampler", daemon=True)
        self._thread.start()

    def read(self):
        """`{"anon", "rss"}` in MiB now (summed over the tree with `tree`); `{}` when
        nothing can be read."""
        pids = [self.pid] + (descendants(self.pid) if self.tree else [])
        total = {}
        for figures in map(read_status, pids):
            for key, value in figures.items():
                total[key] = total.get(key, 0.0) + value
        return total

    def peak(self):
        """`{"anon", "rss"}`: the largest values of the current window, a reading taken now
        included (so `peak()["anon"] >= read()["anon"]` for a live process)."""
        self._keep(self.read())
        with self._lock:
            return dict(self._peak)

    def take(self):
        """The current window's `peak()`; a new window starts from a reading taken now."""
        now = self.read()
        with self._lock:
            peak = {key: max(self._peak.get(key, value), value) for key, value in now.items()}
            peak = {**self._peak, **peak}
            self._peak = dict(now)
        return peak

    def close(self):
        """Stops the thread (the figures stay readable with `peak()`)."""
        self._stop.set()
        self._thread.join()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def _keep(self, figures):
        with self._lock:
            for key, value in figures.items():
                if value > self._peak.get(key, -1.0):
                    self._peak[key] = value

    def _run(self):
        while not self._stop.wait(self.interval):
            self._keep(self.read())
