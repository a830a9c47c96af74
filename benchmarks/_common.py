"""Shared helpers for the benchmark scripts: load check, same-run matmul rate, statistics.

The machine these run on is shared and noisy: a
benchmark prints the load before and after it runs, interleaves the variants it compares,
repeats, reports the median with the spread, and divides by a matmul rate measured in the
same run (ideally interleaved with its own samples, see `MatmulProbe`).

Import it from a script in `benchmarks/` (the script's own folder is on `sys.path`):

Example:
>>> from _common import MatmulProbe, median_spread, print_load, format_samples
>>> print_load("before")  # doctest: +SKIP
load before: 1.23 0.65 0.28 (1, 5, 15 min) on 2 cores
>>> median_spread([1.0, 3.0, 2.0])
(2.0, 2.0)
>>> format_samples([100.0, 110.0, 90.0], "tokens/s")
'100.0 tokens/s (median of 3, range 90.0..110.0, spread 20%)'
"""

import math
import os
import statistics
import subprocess
import sys
import time

from keras_elmo.process.cpu_setup import describe_cpu
from keras_elmo.cli.tensorflow_start import import_tensorflow, set_start_defaults

#: The environment the benchmark was started with, before the lines below change it: what a
#: peer runs in (`_peers.py`), so that it keeps its own defaults.
STARTING_ENVIRONMENT = dict(os.environ)
# Before TensorFlow starts, as the `keras-elmo` command starts: its thread layout and oneDNN
# setting, and TF_CPP_MIN_LOG_LEVEL=3, each unless set in the environment.
set_start_defaults()

#: Side of the square float32 matmul used as the reference rate.
MATMUL_SIZE = 2048


# --- machine load --------------------------------------------------------------------------
def doc_parser(doc):
    """An `argparse.ArgumentParser` from a benchmark's module docstring: its first line is
    the description, its text after "Example:" the epilog of `--help`."""
    import argparse

    return argparse.ArgumentParser(
        description=doc.split("\n")[0], epilog="Example:" + doc.split("Example:")[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)


def machine_load():
    """`(load_1min, load_5min, load_15min)` from `os.getloadavg()`."""
    return os.getloadavg()


def print_load(when, busy_threshold=0.5):
    """Prints the load averages and a warning when the 1-minute load says the cores are busy.

    Args:
        when: str, put in the line ("before", "after").
        busy_threshold: float, warn when load_1min / cores is above this.

    Returns:
        the `machine_load()` tuple.
    """
    load = machine_load()
    cores = os.cpu_count() or 1
    print(f"load {when}: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (1, 5, 15 min) "
          f"on {cores} cores; {describe_cpu()}")
    if load[0] / cores > busy_threshold:
        print(f"warning: the machine is busy (1-min load {load[0]:.2f} on {cores} cores); "
              "absolute rates may be low; compare the fractions of the same-run matmul rate.")
    return load


# --- statistics ----------------------------------------------------------------------------
def median_spread(samples):
    """`(median, spread)` of a non-empty sequence; spread = max - min, in the samples' unit."""
    samples = list(samples)
    if not samples:
        raise ValueError("median_spread needs at least one sample; received none.")
    return statistics.median(samples), max(samples) - min(samples)


def format_samples(samples, unit, digits=1):
    """`"<median> <unit> (median of n, range lo..hi, spread s%)"` for one line of a report."""
    median, spread = median_spread(samples)
    relative = spread / median if median else float("nan")
    return (f"{median:.{digits}f} {unit} (median of {len(samples)}, range "
            f"{min(samples):.{digits}f}..{max(samples):.{digits}f}, spread {relative:.0%})")


def report(name, value):
    """Prints one `name: value` line (the format every benchmark script uses)."""
    print(f"{name}: {value}")
    sys.stdout.flush()


# --- timing --------------------------------------------------------------------------------
def time_call(fn, *args):
    """Seconds one `fn(*args)` takes (wall clock; CPU ops return when they are done)."""
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


class MatmulProbe:
    """Plain `n x n` `tf.matmul`s (float32, or `dtype`), two independent ones per call, timed one sample
    at a time. Two side by side measure the whole machine under either thread layout
    (`keras_elmo.process.cpu_setup`: with one thread per op, one product uses one core).

    Call `sample()` between a benchmark's own samples so the reference rate sees the same
    load; `matmul_gflops()` is the stand-alone version. One sample runs as many products as
    fill `min_seconds` (counted at the warm-up), so a short burst of load from another
    process does not swing it more than it swings the benchmark's own, longer, samples.

    Args:
        n: int, matrix side (2048).
        min_seconds: float, least duration of one sample (0.5).
        seed: int, for the random operands.

    Example:
    >>> probe = MatmulProbe(256, min_seconds=0.01)
    >>> probe.sample() > 0
    True
    """

    def __init__(self, n=MATMUL_SIZE, min_seconds=0.5, seed=0, dtype="float32"):
        tf = import_tensorflow()

        if not isinstance(n, int) or n < 1:
            raise ValueError(f"matmul size must be a positive int; received {n!r}.")
        if min_seconds < 0:
            raise ValueError(f"min_seconds must be >= 0; received {min_seconds!r}.")
        self.n = n
        generator = tf.random.Generator.from_seed(seed)
        self.dtype = dtype
        self._a = tf.cast(generator.normal((n, n), dtype=tf.float32), dtype)
        self._b = tf.cast(generator.normal((n, n), dtype=tf.float32), dtype)
        self._matmul = tf.function(lambda a, b: (tf.matmul(a, b), tf.matmul(b, a)))
        self.products_per_sample = 1
        self._run()  # warm-up: trace and first run
        once = min(time_call(self._run) for _ in range(2))
        self.products_per_sample = max(1, math.ceil(min_seconds / once))
        self.samples = []

    @property
    def flops(self):
        """`2 * 2 n^3`: the multiply-adds of one call (two products)."""
        return 2 * 2.0 * self.n ** 3

    def _run(self):
        for _ in range(self.products_per_sample):
            # Read one element so the product is surely done before the clock stops.
            first, second = self._matmul(self._a, self._b)
            first[0, 0].numpy(), second[0, 0].numpy()

    def sample(self):
        """Times one sample; records and returns its GFLOP/s."""
        rate = self.products_per_sample * self.flops / time_call(self._run) / 1e9
        self.samples.append(rate)
        return rate


def report_matmul_rates(probe, repeats=5):
    """Prints `probe`'s rate, then the machine's other reference rate measured now: float32
    always, bfloat16 where the CPU runs it natively (`cpu_setup.native_bfloat16`), so every
    figure can be read against the rate of its own dtype."""
    from keras_elmo.process.cpu_setup import native_bfloat16

    report(f"matmul {probe.n}^3 {probe.dtype}", format_samples(probe.samples, "GFLOP/s"))
    others = [d for d in ("float32", "bfloat16") if d != probe.dtype
              and (d == "float32" or native_bfloat16())]
    for dtype in others:
        other = MatmulProbe(probe.n, dtype=dtype)
        for _ in range(repeats):
            other.sample()
        report(f"matmul {probe.n}^3 {dtype}", format_samples(other.samples, "GFLOP/s"))
    if "bfloat16" not in others + [probe.dtype]:
        report(f"matmul {probe.n}^3 bfloat16", "not measured: not native on this CPU")


#: Run in a child in an environment of its own: the load line, then 3 matmul samples.
_CHILD_PROBE = ("import sys; sys.path.insert(0, sys.argv[1]); "
                "from _common import MatmulProbe, print_load; print_load(sys.argv[2]); "
                "probe = MatmulProbe(); print('GFLOP/s', *[probe.sample() for _ in range(3)])")


def matmul_in_child(env, when):
    """Prints the load line and the CPU settings of `env` (a child's `print_load`); returns
    the child's three float32 matmul samples in GFLOP/s. For benchmarks that time whole
    commands: the rate is measured in the commands' environment, between their runs."""
    here = os.path.dirname(os.path.abspath(__file__))
    done = subprocess.run([sys.executable, "-c", _CHILD_PROBE, here, when], env=env,
                          capture_output=True, text=True, check=True)
    lines = done.stdout.strip().splitlines()
    print("\n".join(line for line in lines if not line.startswith("GFLOP/s")))
    return [float(x) for line in lines if line.startswith("GFLOP/s") for x in line.split()[1:]]


def matmul_gflops(n=MATMUL_SIZE, repeats=5, min_seconds=0.5):
    """Median GFLOP/s of `repeats` samples of plain `n x n` float32 `tf.matmul`s (warm-up
    first; each sample lasts at least `min_seconds`, see `MatmulProbe`)."""
    if not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be a positive int; received {repeats!r}.")
    probe = MatmulProbe(n, min_seconds=min_seconds)
    for _ in range(repeats):
        probe.sample()
    return median_spread(probe.samples)[0]
