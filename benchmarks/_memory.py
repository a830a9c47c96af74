"""Memory figures of a benchmark process: the floor, the peak of each stage, a streaming rate.

`MemoryStages` reads Linux's `/proc/self/status`: `VmRSS` (resident now, split into anonymous
memory and pages of mapped files such as `libtensorflow_cc.so`) and `VmHWM` (the peak).
After each stage it resets the peak (`/proc/self/clear_refs`, value 5) so that every stage
gets its own peak; the process's peak is the largest of them (each stage starts from the
resident size the previous one ended with, so nothing is missed). Where the reset is not
allowed, every stage reports the peak so far. Units: MiB (2^20 bytes), like `ru_maxrss / 1024`.

`StreamingProbe(tensors)` times a sum over tensors much larger than the caches: the
rate at which this machine streams memory, the bound of work that reads each weight once.

Example:
>>> stages = MemoryStages()
>>> stages.mark("import")  # doctest: +SKIP
{'rss': 616.2, 'anon': 238.0, 'file': 378.2, 'peak': 616.2}
>>> stages.peak_mib() > 0
True
"""

_STATUS = "/proc/self/status"
_CLEAR_REFS = "/proc/self/clear_refs"
_RESET_PEAK = "5"  # clear_refs value that resets VmHWM to the current VmRSS


def _status_mib():
    """`{"rss", "anon", "file", "peak"}` in MiB from /proc/self/status (empty off Linux)."""
    keys = {"VmRSS": "rss", "RssAnon": "anon", "RssFile": "file", "VmHWM": "peak"}
    values = {}
    try:
        with open(_STATUS) as status:
            for line in status:
                name = line.split(":", 1)[0]
                if name in keys:
                    values[keys[name]] = int(line.split()[1]) / 1024.0  # kB -> MiB
    except OSError:
        pass
    return values


class MemoryStages:
    """Resident memory and per-stage peaks of this process (Linux), in MiB.

    Call `mark(name)` at the end of each stage; `stages` keeps `(name, figures)` in order.

    Example:
    >>> stages = MemoryStages()
    >>> _ = stages.mark("start")
    >>> [name for name, _ in stages.stages]
    ['start']
    """

    def __init__(self):
        self.stages = []
        self.per_stage = self._reset_peak()

    @staticmethod
    def _reset_peak():
        try:
            with open(_CLEAR_REFS, "w") as handle:
                handle.write(_RESET_PEAK)
            return True
        except OSError:
            return False

    def mark(self, name):
        """Records the stage that just ended; returns its figures (rss, anon, file, peak)."""
        figures = _status_mib()
        self.stages.append((name, figures))
        if self.per_stage:
            self.per_stage = self._reset_peak()
        return figures

    def peak_mib(self):
        """The process's peak so far: the largest stage peak, or the current VmHWM."""
        peaks = [f.get("peak", 0.0) for _, f in self.stages] + [_status_mib().get("peak", 0.0)]
        return max(peaks)

    def lines(self):
        """`(name, text)` per stage for `report`."""
        out = []
        for name, f in self.stages:
            if not f:
                out.append((name, "n/a (no /proc/self/status)"))
                continue
            scope = "stage peak" if self.per_stage else "peak so far"
            out.append((name, f"resident {f['rss']:.0f} MiB (anonymous {f['anon']:.0f}, "
                              f"mapped files {f['file']:.0f}); {scope} {f['peak']:.0f} MiB"))
        return out


class StreamingProbe:
    """Times one sum over `tensors` at a time: the rate (GB/s, 1e9 bytes) at which this
    machine streams memory, sampled between a benchmark's own calls like `MatmulProbe`.

    Pass tensors already in memory whose total is much larger than the last-level cache
    (the model's own recurrent weights: no extra memory, and exactly the bytes a batch-1
    step reads).

    Args:
        tensors: list of tensors or variables.

    Example:
    >>> import tensorflow as tf
    >>> probe = StreamingProbe([tf.ones((1024, 1024))])
    >>> probe.total_bytes, probe.sample() > 0
    (4194304, True)
    """

    def __init__(self, tensors):
        import math

        import tensorflow as tf

        self.total_bytes = sum(math.prod(t.shape) * tf.as_dtype(t.dtype).size for t in tensors)
        self._read_all = tf.function(lambda: tf.add_n([tf.reduce_sum(t) for t in tensors]))
        self._read_all().numpy()  # trace and warm up
        self.samples = []

    def sample(self):
        """Times one pass; records and returns its GB/s."""
        import time

        start = time.perf_counter()
        self._read_all().numpy()
        rate = self.total_bytes / (time.perf_counter() - start) / 1e9
        self.samples.append(rate)
        return rate
