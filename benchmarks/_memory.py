"""Memory figures of a benchmark process: the peak of each stage, a streaming rate, the
allocator of TensorFlow's large tensors.

`MemoryStages` states memory as anonymous memory first (`RssAnon` of Linux's
`/proc/self/status`: what the process allocated itself, weights, activations, TensorFlow's
buffers), sampled every 5 ms by a background thread (`_memory_sampler.MemorySampler`), with
the resident set beside it (RSS: anonymous memory plus the pages of mapped files such as
`libtensorflow_cc.so`, which the kernel can drop and read back). Each stage gets the peak
anonymous memory sampled during it and its RSS peak (`VmHWM`, reset after each stage
through `/proc/self/clear_refs`, value 5; where the reset is not allowed, each stage
reports the RSS peak so far), and the figures at its end. The process's peak is the
largest of the stages' (each stage starts from the memory the previous one ended with, so
nothing is missed). Units: MiB (2^20 bytes).

`StreamingProbe(tensors)` times a sum over tensors much larger than the caches: the
rate at which this machine streams memory, the bound of work that reads each weight once.

Example:
>>> stages = MemoryStages()
>>> stages.mark("import")  # doctest: +SKIP
{'rss': 616.2, 'anon': 238.0, 'file': 378.2, 'rss_peak': 616.2, 'anon_peak': 240.1}
>>> stages.peak_text()  # doctest: +SKIP
'peak anonymous memory 240 MiB (RSS 616 MiB)'
"""

from _memory_sampler import MemorySampler

from keras_elmo.cli.tensorflow_start import import_tensorflow

_STATUS = "/proc/self/status"
_CLEAR_REFS = "/proc/self/clear_refs"
_RESET_PEAK = "5"  # clear_refs value that resets VmHWM to the current VmRSS


def _status_mib():
    """`{"rss", "anon", "file", "rss_peak"}` in MiB from /proc/self/status (empty off Linux)."""
    keys = {"VmRSS": "rss", "RssAnon": "anon", "RssFile": "file", "VmHWM": "rss_peak"}
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


def peak_text(anon, rss):
    """The headline of a memory figure: anonymous memory first, RSS beside it.

    Example:
    >>> peak_text(774.2, 896.7)
    'peak anonymous memory 774 MiB (RSS 897 MiB)'
    """
    return f"peak anonymous memory {anon:,.0f} MiB (RSS {rss:,.0f} MiB)"


class MemoryStages:
    """Anonymous and resident memory of this process and per-stage peaks (Linux), in MiB.

    Call `mark(name)` at the end of each stage; `stages` keeps `(name, figures)` in order.
    A daemon thread samples the anonymous memory until `close()`.

    Example:
    >>> stages = MemoryStages()
    >>> _ = stages.mark("start")
    >>> [name for name, _ in stages.stages]
    ['start']
    >>> stages.close()
    """

    def __init__(self):
        self.stages = []
        self.per_stage = self._reset_peak()
        self.sampler = MemorySampler()

    @staticmethod
    def _reset_peak():
        try:
            with open(_CLEAR_REFS, "w") as handle:
                handle.write(_RESET_PEAK)
            return True
        except OSError:
            return False

    def mark(self, name):
        """Records the stage that just ended; returns its figures: `anon`, `rss`, `file` at
        its end, `anon_peak` (sampled during it) and `rss_peak` (`VmHWM`)."""
        sampled = self.sampler.take()
        figures = _status_mib()
        if "anon" in figures:
            figures["anon_peak"] = max(sampled.get("anon", 0.0), figures["anon"])
        self.stages.append((name, figures))
        if self.per_stage:
            self.per_stage = self._reset_peak()
        return figures

    def peaks(self):
        """`{"anon", "rss"}`: the process's peaks so far, the largest of the stages' and of
        the time since the last mark."""
        now = {"anon": self.sampler.peak().get("anon", 0.0),
               "rss": _status_mib().get("rss_peak", 0.0)}
        return {key: max([now[key]] + [f.get(f"{key}_peak", 0.0) for _, f in self.stages])
                for key in now}

    def peak_text(self):
        """`peak_text` of the process's peaks so far."""
        peaks = self.peaks()
        return peak_text(peaks["anon"], peaks["rss"])

    def lines(self):
        """`(name, text)` per stage for `report`."""
        out = []
        scope = "RSS stage peak" if self.per_stage else "RSS peak so far"
        for name, f in self.stages:
            if not f:
                out.append((name, "n/a (no /proc/self/status)"))
                continue
            out.append((name, f"peak anonymous {f['anon_peak']:.0f} MiB ({scope} "
                              f"{f['rss_peak']:.0f}); at its end anonymous {f['anon']:.0f}, "
                              f"resident {f['rss']:.0f} (mapped files {f['file']:.0f})"))
        return out

    def close(self):
        """Stops the sampling thread."""
        self.sampler.close()


class StreamingProbe:
    """Times one sum over `tensors` at a time: the rate (GB/s, 1e9 bytes) at which this
    machine streams memory, sampled between a benchmark's own calls like `MatmulProbe`.

    Pass tensors already in memory whose total is much larger than the last-level cache
    (the model's own recurrent weights: no extra memory, and exactly the bytes a batch-1
    step reads).

    Args:
        tensors: list of tensors or variables.

    Example:
    >>> tf = import_tensorflow()
    >>> probe = StreamingProbe([tf.ones((1024, 1024))])
    >>> probe.total_bytes, probe.sample() > 0
    (4194304, True)
    """

    def __init__(self, tensors):
        import math

        tf = import_tensorflow()
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


def tensorflow_allocator():
    """Which allocator serves TensorFlow's large CPU tensors in this process: `"onednn-pool"`
    (oneDNN's own pool, which keeps freed blocks for reuse and never returns them to the OS),
    `"onednn-system"` (oneDNN with `TF_ONEDNN_USE_SYSTEM_ALLOCATOR=1` set before TensorFlow
    starts: blocks come from `malloc`) or `"system"` (oneDNN off). Imports TensorFlow.

    Example:
    >>> tensorflow_allocator() in ("onednn-pool", "onednn-system", "system")
    True
    """
    import os

    import_tensorflow()
    from tensorflow.python.util import _pywrap_util_port

    if not _pywrap_util_port.IsMklEnabled():
        return "system"
    flag = os.environ.get("TF_ONEDNN_USE_SYSTEM_ALLOCATOR", "").strip().lower()
    return "onednn-system" if flag in ("1", "true") else "onednn-pool"
