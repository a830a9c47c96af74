"""The first call as users write it, under every Keras 3 backend: per-stage timers, JAX's
compilation cache and XLA option, a stream of mixed shapes, and `embed`'s memory.

Keras fixes its backend when it is first imported, so every measurement runs in a process
of its own (`KERAS_BACKEND` set in its environment before Keras is imported; this script
with `--worker`), started from the environment this script was started with, as a user's
program starts (no `set_cpu_defaults`: a user's `elmo(ids)` does not call it). The driver
runs `--rounds` interleaved rounds, the backends' order turning each round, and samples
the same-run float32 matmul rate (`_common.MatmulProbe`, TensorFlow, in the driver) after
every process. It prints the CPU's model and flags and the load before, after and at each
process. Beside each wall-clock figure of a call, a stream or a compile it prints the
process's CPU seconds (`time.process_time()`, all its threads): on a machine shared with
other work they say what the work cost where the wall clock says mostly how long it
waited. Parts (`--parts`, all by default):

- `first` (issue 63, item 6): for each backend and each `--batch-sizes` value, a fresh
  process times, in order: `import keras` (the backend with it), `import keras_elmo`, the
  model (`BiLM(BiLMOptions.<--config>(), zero_init=True)`, built as `from_weights` builds
  it before it assigns a file's arrays; `--init random` draws Keras' initialisers), then
  `ElmoLayer(bilm)`, the first `batch_to_ids`, the FIRST call as users write it
  (`np.asarray(elmo(ids))`: TensorFlow eager, JAX eager with no `jit` of the user's,
  PyTorch under `torch.no_grad()`; `--call bilm` calls `bilm(ids)["layers"]` instead)
  on `--length`-token sentences drawn as benchmarks/inference.py draws them (seed 0),
  then `--calls` warm calls (their median), and the first call minus the warm median.
  Under JAX the first call's parts come from JAX's own event timers (`jax.monitoring`):
  tracing to a jaxpr, lowering to StableHLO, XLA's compile, with the count of functions
  compiled, and the rest (the run and the host work: `first - trace - lower - compile`).
- `cache` (JAX): the same first call in a process with JAX's persistent compilation cache
  on (`jax_compiled_calls.enable_compilation_cache`, a new folder each round), which
  writes the cache, then in a SECOND process on the same folder, which reads it: what a
  second process gains (the plain `first` process's first call minus the second's).
- `opt` (JAX): one process traces and lowers the layer's compiled function
  (`jax_compiled_calls._function(elmo, False)` at the call's shape class) and compiles it
  twice, with XLA's default options and with
  `compiler_options={"xla_backend_optimization_level": 1}` (the order turning each
  round), then times `--calls` warm calls of each executable, interleaved.
- `stream` (issue 63, speed, JAX as users call it): one process per backend calls the
  layer, as users write it, on `--sentences` sentences (seed 0; lengths drawn from a gamma
  distribution, mean 25 tokens, 1..100) in batches of 32 sorted by length, then on
  `--singles` (20) single sentences of random lengths drawn from them: the whole
  stream's seconds, first call and `batch_to_ids` included (imports and model not), and
  JAX / TensorFlow and PyTorch / TensorFlow round by round (the target: JAX <= 1.1x).
- `embed` (issue 63, item 5): the whole `keras-elmo embed --all` command on the same
  sentences under each backend, a random `--config` model written once by our own writer
  (`inference.published_files`, as benchmarks/backends.py `--embed` does): wall seconds,
  peak anonymous memory (`RssAnon`) and peak RSS of its processes, sampled every 10 ms
  (`embed_corpus.run_measured`), and each over TensorFlow's (the target: <= 1.1x).

Every figure is printed as one `name: <number> ...` line, per process as it runs (indented,
with the backend in brackets) and at the end as the median over the rounds with each
round's value (`<name>: <median> (rounds: a / b)`), then the ratios and targets.

Example:
    python benchmarks/first_call.py --rounds 2                       # published, all parts
    python benchmarks/first_call.py --parts first cache --batch-sizes 1 --rounds 1
    python benchmarks/first_call.py --config tiny --rounds 1 --calls 2 --sentences 8 \\
        --singles 2 --batch-sizes 2 --matmul-size 256               # tiny: the test's
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

BACKENDS = ("tensorflow", "jax", "torch")
PARTS = ("first", "cache", "opt", "stream", "embed")
#: The targets of issue 63, reported beside the figures (not asserted): first call minus a
#: warm call, seconds; JAX's stream over TensorFlow's; embed memory over TensorFlow's.
FIRST_CALL_TARGET_S, STREAM_TARGET, MEMORY_TARGET = 1.0, 1.1, 1.1
#: Sentences per stream call, and single-sentence calls after the batches.
STREAM_BATCH, STREAM_SINGLES = 32, 20
#: Sentence lengths of the stream: gamma(shape, scale) tokens (mean 25), clipped.
_GAMMA_SHAPE, _GAMMA_SCALE, _MIN_TOKENS, _MAX_TOKENS = 4.0, 6.25, 1, 100
#: The XLA option compared with the default in `opt`.
OPT_OPTIONS = {"xla_backend_optimization_level": 1}
#: JAX's event timers of a compilation (`jax.monitoring`), and our names for them.
JAX_EVENTS = {"/jax/core/compile/jaxpr_trace_duration": "trace",
              "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
              "/jax/core/compile/backend_compile_duration": "compile",
              "/jax/compilation_cache/cache_retrieval_time_sec": "cache read"}
#: The line a worker ends with: its figures as JSON.
_RESULT = "result"


def parse_args(argv):
    # Not `_common.doc_parser`: importing `_common` imports keras_elmo, and a worker times
    # its imports itself.
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], epilog="Example:" + __doc__.split("Example:")[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS),
                        help="Keras backends (default: all three)")
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS),
                        help="what to measure (default: all; module docstring)")
    parser.add_argument("--config", default="published", choices=("published", "small", "tiny"),
                        help="BiLMOptions preset, random weights (default: published)")
    parser.add_argument("--init", default="zeros", choices=("zeros", "random"),
                        help="the model's weights: zeros (`zero_init=True`, as `from_weights` "
                             "builds a model before it assigns the file's arrays) or random "
                             "draws (Keras' initialisers) (zeros)")
    parser.add_argument("--call", default="elmo", choices=("elmo", "bilm"),
                        help="the call timed: ElmoLayer(bilm)(ids) or bilm(ids) (elmo)")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 32],
                        help="sentences per call of `first`, `cache`, `opt` (1 32)")
    parser.add_argument("--length", type=int, default=20,
                        help="tokens per sentence of `first` (20)")
    parser.add_argument("--calls", type=int, default=5, help="warm calls timed (5)")
    parser.add_argument("--sentences", type=int, default=300,
                        help="sentences of `stream` and `embed` (300)")
    parser.add_argument("--singles", type=int, default=STREAM_SINGLES,
                        help="single-sentence calls at the end of `stream` (20)")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds (2)")
    parser.add_argument("--matmul-size", type=int, default=2048,
                        help="side of the float32 matmul probe (2048)")
    parser.add_argument("--model-dir", default=None,
                        help="where `embed` keeps its random model (default: "
                             "$TMPDIR/keras-elmo-bench-CONFIG, written once)")
    parser.add_argument("--worker", choices=("first", "opt", "stream"), help=argparse.SUPPRESS)
    parser.add_argument("--cache-dir", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--opt-first", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for name in ("length", "calls", "sentences", "singles", "rounds", "matmul_size"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1; received "
                         f"{getattr(args, name)}")
    if min(args.batch_sizes) < 1:
        parser.error(f"--batch-sizes must all be >= 1; received {args.batch_sizes}")
    return args


def report(name, value):
    """Prints one `name: value` line."""
    print(f"{name}: {value}", flush=True)


# --- sentences --------------------------------------------------------------------------------
def first_sentences(batch_size, length, seed=0):
    """`batch_size` sentences of `length` tokens, as benchmarks/inference.py draws them."""
    import numpy as np
    from backend_gpu import random_sentences

    return random_sentences(batch_size, length, np.random.default_rng(seed))


def stream_sentences(count, seed=0):
    """`count` sentences of drawn lengths (module docstring), tokens as inference.py's."""
    import numpy as np
    from backend_gpu import random_sentences

    rng = np.random.default_rng(seed)
    lengths = np.clip(np.round(rng.gamma(_GAMMA_SHAPE, _GAMMA_SCALE, size=count)),
                      _MIN_TOKENS, _MAX_TOKENS).astype(int)
    return [random_sentences(1, int(n), rng)[0] for n in lengths]


def stream_batches(sentences, singles=STREAM_SINGLES, seed=1):
    """The stream's calls: `sentences` sorted by length in batches of `STREAM_BATCH`, then
    `singles` single sentences drawn from them."""
    import numpy as np

    ordered = sorted(sentences, key=len)
    batches = [ordered[i:i + STREAM_BATCH] for i in range(0, len(ordered), STREAM_BATCH)]
    picks = np.random.default_rng(seed).integers(0, len(sentences), size=singles)
    return batches + [[sentences[int(i)]] for i in picks]


# --- one backend, in its own process ------------------------------------------------------------
class JaxEvents:
    """Sums JAX's compile-stage event timers (`JAX_EVENTS`) between `take()`s."""

    def __init__(self):
        import jax

        self.seconds, self.counts = {}, {}
        jax.monitoring.register_event_duration_secs_listener(self._record)

    def _record(self, event, duration, **kwargs):
        name = JAX_EVENTS.get(event)
        if name:
            self.seconds[name] = self.seconds.get(name, 0.0) + duration
            self.counts[name] = self.counts.get(name, 0) + 1

    def take(self):
        """`{name: seconds}` and `{name: count}` since the last take; then resets."""
        taken = dict(self.seconds), dict(self.counts)
        self.seconds, self.counts = {}, {}
        return taken


def start_worker(args):
    """Imports Keras and keras_elmo (timed), builds the model (timed); returns
    `(figures, elmo, call, events)`: `call(sentences)` runs the call as users write it
    and returns numpy; `events` a `JaxEvents` under JAX, else None."""
    start = time.perf_counter()
    import keras
    figures = {"import keras s": time.perf_counter() - start}
    start = time.perf_counter()
    import keras_elmo
    import numpy as np
    figures["import keras_elmo s"] = time.perf_counter() - start
    backend = keras.backend.backend()
    events = None
    if backend == "jax":
        if args.cache_dir:
            from keras_elmo.backend.jax_compiled_calls import enable_compilation_cache

            enable_compilation_cache(args.cache_dir)
        events = JaxEvents()
    start = time.perf_counter()
    bilm = keras_elmo.BiLM(getattr(keras_elmo.BiLMOptions, args.config)(),
                           zero_init=args.init == "zeros")
    figures["build BiLM s"] = time.perf_counter() - start
    start = time.perf_counter()
    elmo = keras_elmo.ElmoLayer(bilm)
    figures["build ElmoLayer s"] = time.perf_counter() - start
    if events:
        events.take()  # building compiles nothing, or it shows in the model's seconds
    layer = elmo if args.call == "elmo" else bilm

    def run(ids):
        out = layer(ids)
        return out if args.call == "elmo" else out["layers"]

    if backend == "torch":
        import torch

        def call(ids):
            with torch.no_grad():
                return run(ids).detach().cpu().numpy()
    else:
        def call(ids):
            return np.asarray(run(ids))
    return figures, layer, call, events


def jax_parts(events, total):
    """The first call's parts under JAX from `events.take()`, and the rest."""
    seconds, counts = events.take()
    parts = {f"{name} s": seconds.get(name, 0.0) for name in ("trace", "lower", "compile")}
    parts["functions compiled"] = counts.get("compile", 0)
    if "cache read" in seconds:
        parts["cache read s"] = seconds["cache read"]
    parts["rest (run, host work) s"] = total - sum(
        seconds.get(name, 0.0) for name in ("trace", "lower", "compile"))
    return parts


def first_worker(args):
    """One backend, one batch size: the stages of the process's first call."""
    figures, _, call, events = start_worker(args)
    import numpy as np

    import keras_elmo

    batch = args.batch_sizes[0]
    sentences = first_sentences(batch, args.length)
    start = time.perf_counter()
    ids = keras_elmo.batch_to_ids(sentences)
    figures["batch_to_ids s"] = time.perf_counter() - start
    start, cpu = time.perf_counter(), time.process_time()
    call(ids)
    figures["first call s"] = time.perf_counter() - start
    figures["first call CPU s"] = time.process_time() - cpu
    if events:
        for name, value in jax_parts(events, figures["first call s"]).items():
            figures[f"first call {name}"] = value
    warm, warm_cpu = [], []
    for _ in range(args.calls):
        start, cpu = time.perf_counter(), time.process_time()
        call(ids)
        warm.append(time.perf_counter() - start)
        warm_cpu.append(time.process_time() - cpu)
    figures["warm call s"] = float(np.median(warm))
    figures["warm call CPU s"] = float(np.median(warm_cpu))
    figures["first minus warm s"] = figures["first call s"] - figures["warm call s"]
    figures["first minus warm CPU s"] = figures["first call CPU s"] - figures["warm call CPU s"]
    for name, value in figures.items():
        report(name, f"{value:.3f}" if isinstance(value, float) else value)
    return figures


def opt_worker(args):
    """JAX: XLA's default options against `OPT_OPTIONS`: compile seconds, warm calls."""
    figures, layer, _, _ = start_worker(args)
    import jax
    import numpy as np

    import keras_elmo
    from keras_elmo.backend import jax_compiled_calls as calls

    for batch in args.batch_sizes:
        ids = keras_elmo.batch_to_ids(first_sentences(batch, args.length))
        padded = calls._pad(ids, calls.shape_class(batch),
                            calls.shape_class(ids.shape[1], calls.MIN_STEPS))
        values = ([v.value for v in layer.trainable_variables],
                  [v.value for v in layer.non_trainable_variables], padded)
        variants = ("level 1", "default") if args.opt_first else ("default", "level 1")
        executables = {}
        # Traced and lowered once: `jit` keeps both, so a second time would read its cache.
        start = time.perf_counter()
        traced = calls._function(layer, False).trace(*values)
        figures[f"batch {batch} trace s"] = time.perf_counter() - start
        start = time.perf_counter()
        lowered = traced.lower()
        figures[f"batch {batch} lower s"] = time.perf_counter() - start
        for variant in variants:  # each compiles anew: the options are part of the key
            start, cpu = time.perf_counter(), time.process_time()
            executables[variant] = lowered.compile(
                OPT_OPTIONS if variant == "level 1" else None)
            figures[f"batch {batch} {variant} compile s"] = time.perf_counter() - start
            figures[f"batch {batch} {variant} compile CPU s"] = time.process_time() - cpu
        warm = {variant: [] for variant in variants}
        warm_cpu = {variant: [] for variant in variants}
        for variant in variants:  # one untimed run each
            jax.block_until_ready(executables[variant](*values))
        for _ in range(args.calls):
            for variant in variants:
                start, cpu = time.perf_counter(), time.process_time()
                jax.block_until_ready(executables[variant](*values))
                warm[variant].append(time.perf_counter() - start)
                warm_cpu[variant].append(time.process_time() - cpu)
        for variant in variants:
            figures[f"batch {batch} {variant} warm call s"] = float(np.median(warm[variant]))
            figures[f"batch {batch} {variant} warm call CPU s"] = float(
                np.median(warm_cpu[variant]))
    for name, value in figures.items():
        report(name, f"{value:.3f}")
    return figures


def stream_worker(args):
    """One backend: the stream of mixed shapes (module docstring), first call included."""
    figures, _, call, events = start_worker(args)
    import keras_elmo

    batches = stream_batches(stream_sentences(args.sentences), args.singles)
    seconds = []
    start, cpu = time.perf_counter(), time.process_time()
    for sentences in batches:
        began = time.perf_counter()
        call(keras_elmo.batch_to_ids(sentences))
        seconds.append(time.perf_counter() - began)
    figures["stream s"] = time.perf_counter() - start
    figures["stream CPU s"] = time.process_time() - cpu
    figures["stream first call s"] = seconds[0]
    figures["stream calls"] = len(batches)
    figures["stream tokens"] = sum(len(s) for b in batches for s in b)
    if events:
        taken, counts = events.take()
        figures["stream compile s"] = taken.get("compile", 0.0)
        figures["stream trace and lower s"] = taken.get("trace", 0.0) + taken.get("lower", 0.0)
        figures["stream functions compiled"] = counts.get("compile", 0)
    for name, value in figures.items():
        report(name, f"{value:.3f}" if isinstance(value, float) else value)
    return figures


def worker(args):
    result = {"first": first_worker, "opt": opt_worker, "stream": stream_worker}[args.worker](
        args)
    report(_RESULT, json.dumps(result))


# --- the driver -------------------------------------------------------------------------------
class Driver:
    """Runs the workers and commands round by round; keeps every figure by name."""

    def __init__(self, args):
        from _common import STARTING_ENVIRONMENT, MatmulProbe

        self.args = args
        self.environment = STARTING_ENVIRONMENT
        self.probe = MatmulProbe(args.matmul_size)
        self.figures = {}  # name -> [value per round] (None where it failed)
        self.failures = []

    def record(self, name, value, round_index):
        values = self.figures.setdefault(name, [])
        values.extend([None] * (round_index + 1 - len(values)))
        values[round_index] = value

    def run_worker(self, backend, mode, extra=()):
        """Runs one worker process; prints its lines indented; returns its figures."""
        args = self.args
        command = [sys.executable, os.path.abspath(__file__), "--worker", mode, "--config",
                   args.config, "--init", args.init, "--call", args.call,
                   "--length", str(args.length),
                   "--calls", str(args.calls), "--sentences", str(args.sentences),
                   "--singles", str(args.singles), *extra]
        label = f"{backend} {mode}" + (" " + " ".join(extra) if extra else "")
        print(f"  [{label}] load {os.getloadavg()[0]:.2f}", flush=True)
        done = subprocess.run(command, env={**self.environment, "KERAS_BACKEND": backend},
                              capture_output=True, text=True)
        self.probe.sample()
        result = None
        for line in done.stdout.splitlines():
            if line.startswith(f"{_RESULT}: "):
                result = json.loads(line[len(_RESULT) + 2:])
            else:
                print(f"  [{label}] {line}", flush=True)
        if result is None:
            self.failures.append(label)
            print(f"  [{label}] failed (exit {done.returncode}):\n{done.stderr[-3000:]}",
                  flush=True)
        return result

    def first(self, backend, round_index, batch, cache=None):
        """`first` (and the `cache` processes with `cache=(folder, which)`)."""
        extra = ["--batch-sizes", str(batch)]
        if cache:
            extra += ["--cache-dir", cache[0]]
        result = self.run_worker(backend, "first", extra) or {}
        prefix = f"{backend} batch {batch}" + (f" cache {cache[1]}" if cache else "")
        for name, value in result.items():
            self.record(f"{prefix} {name}", value, round_index)
        return result

    def cache(self, round_index, batch):
        folder = tempfile.mkdtemp(prefix="keras-elmo-jax-cache-")
        self.first("jax", round_index, batch, (folder, "first process"))
        self.first("jax", round_index, batch, (folder, "second process"))

    def opt(self, round_index):
        extra = ["--batch-sizes", *map(str, self.args.batch_sizes)]
        extra += ["--opt-first"] if round_index % 2 else []
        for name, value in (self.run_worker("jax", "opt", extra) or {}).items():
            self.record(f"jax opt {name}", value, round_index)

    def stream(self, backend, round_index):
        for name, value in (self.run_worker(backend, "stream") or {}).items():
            self.record(f"{backend} {name}", value, round_index)

    def embed(self, backend, round_index, files):
        from embed_corpus import run_measured

        sentences, options_file, weight_file = files
        output = sentences + f".{backend}.hdf5"
        command = [sys.executable, "-m", "keras_elmo.cli", "embed", sentences, output,
                   "--all", "--options-file", options_file, "--weight-file", weight_file,
                   "--quiet"]
        print(f"  [{backend} embed] load {os.getloadavg()[0]:.2f}", flush=True)
        try:
            seconds, peak, cpu = run_measured(
                command, {**self.environment, "KERAS_BACKEND": backend})
        except RuntimeError as error:
            self.failures.append(f"{backend} embed")
            print(f"  [{backend} embed] failed: {str(error)[-1500:]}", flush=True)
            return
        finally:
            if os.path.exists(output):
                os.remove(output)
        self.probe.sample()
        figures = {"embed s": seconds, "embed CPU s": cpu,
                   "embed peak anonymous MiB": peak.get("anon", 0.0),
                   "embed peak RSS MiB": peak.get("rss", 0.0)}
        for name, value in figures.items():
            print(f"  [{backend} embed] {name}: {value:.1f}", flush=True)
            self.record(f"{backend} {name}", value, round_index)


def embed_files(args):
    """`(sentences file, options.json, weights.hdf5)`: the stream's sentences, one a line,
    and the random `--config` model of benchmarks/inference.py."""
    from inference import published_files

    options_file, weight_file = published_files(args.config, args.model_dir)
    path = os.path.join(tempfile.mkdtemp(prefix="keras-elmo-first-call-"), "sentences.txt")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("".join(" ".join(s) + "\n" for s in stream_sentences(args.sentences)))
    return path, options_file, weight_file


def drive(args):
    from _common import print_load
    from keras_elmo.process.cpu_setup import cpu_flags, cpu_model

    report("cpu model", cpu_model())
    report("cpu flags", " ".join(sorted(cpu_flags())) or "none of those keras-elmo reads")
    print_load("before")
    driver = Driver(args)
    files = embed_files(args) if "embed" in args.parts else None
    backends = list(args.backends)
    for index in range(args.rounds):
        shift = index % len(backends)
        order = backends[shift:] + backends[:shift]
        print(f"round {index + 1}: order {', '.join(order)}; load {os.getloadavg()[0]:.2f}",
              flush=True)
        for backend in order:
            batches = args.batch_sizes if index % 2 == 0 else args.batch_sizes[::-1]
            if "first" in args.parts:
                for batch in batches:
                    driver.first(backend, index, batch)
            if backend == "jax" and "cache" in args.parts:
                for batch in batches:
                    driver.cache(index, batch)
            if backend == "jax" and "opt" in args.parts:
                driver.opt(index)
            if "stream" in args.parts:
                driver.stream(backend, index)
            if files:
                driver.embed(backend, index, files)
    print()
    summarize(args, driver)
    print_load("after")
    return 1 if driver.failures else 0


def rounds_text(values, digits=3):
    """`"median (rounds: a / b)"`, rounds that failed left out."""
    done = [v for v in values if v is not None]
    return (f"{statistics.median(done):.{digits}f} (rounds: " +
            " / ".join("failed" if v is None else f"{v:.{digits}f}" for v in values) + ")")


def ratio_line(name, over, under, target=None, larger_is_worse=True):
    """One `name: <median>x (rounds: ...)` line of per-round ratios, with the target."""
    ratios = [a / b for a, b in zip(over, under) if a is not None and b]
    if not ratios:
        return
    median = statistics.median(ratios)
    text = f"{median:.2f}x (rounds: " + " / ".join(f"{r:.2f}x" for r in ratios) + ")"
    if target is not None:
        met = median <= target if larger_is_worse else median >= target
        text += f"; target <= {target}x: {'met' if met else 'not met'}"
    report(name, text)


def summarize(args, driver):
    """The medians over the rounds, then the ratios and the targets."""
    from _common import format_samples

    figures = driver.figures
    report(f"matmul {args.matmul_size}^3 float32 (same run, between the processes)",
           format_samples(driver.probe.samples, "GFLOP/s"))
    for name, values in figures.items():
        report(name, rounds_text(values, 0 if "MiB" in name else 3))
    for backend in args.backends:
        for batch in args.batch_sizes:
            gap = figures.get(f"{backend} batch {batch} first minus warm s")
            if gap and any(v is not None for v in gap):
                median = statistics.median(v for v in gap if v is not None)
                report(f"target {backend} batch {batch} first minus warm <= "
                       f"{FIRST_CALL_TARGET_S} s", f"{median:.3f} s "
                       f"({'met' if median <= FIRST_CALL_TARGET_S else 'not met'})")
    for batch in args.batch_sizes:
        plain = figures.get(f"jax batch {batch} first call s")
        cached = figures.get(f"jax batch {batch} cache second process first call s")
        if plain and cached:
            gains = [a - b for a, b in zip(plain, cached) if a is not None and b is not None]
            if gains:
                report(f"jax batch {batch} second process gain from the cache s",
                       rounds_text(gains))
        default = figures.get(f"jax opt batch {batch} default compile s")
        level = figures.get(f"jax opt batch {batch} level 1 compile s")
        if default and level:
            ratio_line(f"jax opt batch {batch} level 1 / default compile", level, default)
            ratio_line(f"jax opt batch {batch} level 1 / default compile CPU",
                       figures[f"jax opt batch {batch} level 1 compile CPU s"],
                       figures[f"jax opt batch {batch} default compile CPU s"])
            ratio_line(f"jax opt batch {batch} level 1 / default warm call",
                       figures[f"jax opt batch {batch} level 1 warm call s"],
                       figures[f"jax opt batch {batch} default warm call s"])
            ratio_line(f"jax opt batch {batch} level 1 / default warm call CPU",
                       figures[f"jax opt batch {batch} level 1 warm call CPU s"],
                       figures[f"jax opt batch {batch} default warm call CPU s"])
    reference = figures.get("tensorflow stream s")
    for backend in ("jax", "torch"):
        if reference and figures.get(f"{backend} stream s"):
            ratio_line(f"stream {backend} / tensorflow", figures[f"{backend} stream s"],
                       reference, STREAM_TARGET if backend == "jax" else None)
            ratio_line(f"stream {backend} / tensorflow, CPU seconds",
                       figures[f"{backend} stream CPU s"], figures["tensorflow stream CPU s"])
    for kind in ("anonymous", "RSS"):
        reference = figures.get(f"tensorflow embed peak {kind} MiB")
        for backend in ("jax", "torch"):
            if reference and figures.get(f"{backend} embed peak {kind} MiB"):
                ratio_line(f"embed {backend} / tensorflow, peak {kind}",
                           figures[f"{backend} embed peak {kind} MiB"], reference,
                           MEMORY_TARGET if kind == "anonymous" else None)
    if driver.failures:
        report("failed", ", ".join(driver.failures))


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    return drive(args)


if __name__ == "__main__":
    sys.exit(main())
