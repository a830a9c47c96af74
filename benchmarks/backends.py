"""Published-size CPU inference under every Keras 3 backend, AllenNLP's Elmo beside.

Keras fixes its backend when it is first imported, so each backend runs in a process of
its own (`KERAS_BACKEND` set in its environment; this script with `--worker`), and the
driver interleaves them round by round, the order turning each round, with the peers
(`--peer LABEL=COMMAND`, `_peers.py`) taking their turn among them. A worker builds
`keras_elmo.BiLM` with random weights (`BiLMOptions` preset `--config`, published by
default: 2x4096/512) and times the biLM's call, all layers, on sentences drawn as
benchmarks/inference.py draws them (`--length` random tokens of realistic character
lengths, seed 0), each batch size in turn, `--calls` calls in a row (their median is the
round's figure), after two untimed calls (the first one's seconds are printed: the trace
and compilation):

- TensorFlow: the call in a `tf.function`, as benchmarks/inference.py times it (TensorFlow
  started as there and in the `keras-elmo` command: `import_tensorflow`);
- JAX: `jax.jit` of `BiLM.stateless_call` (XLA-compiled, the weights passed in);
- PyTorch: the call under `torch.no_grad()` (eager: Keras compiles nothing there).

The JAX and PyTorch runners are those of `backend_gpu.py` (the GPU script, which imports
nothing from this folder). Every worker starts as a program using the library does
(`keras_elmo.process.cpu_setup.set_cpu_defaults()`, the thread layout and oneDNN setting
that TensorFlow reads) and prints the CPU's model and flags, the load, the same-run
float32 matmul rate of its own backend (`--matmul-size`, 2048^3; a sample after each batch
size's calls; `_common.MatmulProbe` under TensorFlow, `backend_gpu.MatmulProbe` otherwise)
and the achieved GFLOP/s as a fraction of it (analytic FLOPs of
`inference.flops_per_position`), and memory by stage (`_memory.MemoryStages`: peak
anonymous memory sampled, RSS beside it): the imports (the floor), the model, the first
calls, the timed calls. The model's peak is that of the stages before the probes.

The driver then prints, per backend, each figure's median over the rounds with every
round's value, the ratios round by round (each backend over the fastest peer of the same
round, JAX and PyTorch over TensorFlow), the peak anonymous memory against TensorFlow's,
and the targets beside them (reported, not asserted): every backend >= AllenNLP's Elmo,
JAX >= 0.8x TensorFlow, peak anonymous memory <= 1.2x TensorFlow's. With `--embed`, each
round also times the whole `keras-elmo embed --all` command on one sentence under each
backend (wall seconds, peak anonymous memory of its processes).

With `--busy-core`, each worker then times the same calls again beside a busy core: another
process spinning on one core (`BusyCore`, pinned to the last usable core) from before the
first call of each batch size (untimed) to after the last; the driver reports each
backend's busy rate over its own quiet rate of the same process, TensorFlow's beside it,
and the target (each backend >= 0.4x its quiet rate). The peers run quiet only.

Example:
    python benchmarks/backends.py --rounds 3 --peer "allennlp=bash PATH/TO/allennlp.sh infer"
    python benchmarks/backends.py --backends jax torch --batch-sizes 1 --rounds 1
    python benchmarks/backends.py --embed --rounds 3                 # also the embed command
    python benchmarks/backends.py --config tiny --rounds 1 --calls 2  # seconds: the tests'
    python benchmarks/backends.py --backends tensorflow torch --busy-core --rounds 2
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

from _common import (STARTING_ENVIRONMENT, doc_parser, format_samples, median_spread,
                     print_load, report)
from _memory import MemoryStages, peak_text
from _peers import Peers

BACKENDS = ("tensorflow", "jax", "torch")
#: The stage whose anonymous memory at its end is the floor no model goes below.
_FLOOR = "import keras + keras_elmo (the floor)"
#: Stages that hold the probes, left out of the model's peak.
_PROBES = ("matmul probe", "timed calls")
#: The line a worker ends with: its figures as JSON.
_RESULT = "result"
#: AllenNLP's inference script (`allennlp.sh infer`) ends with the peak RSS of its process.
_PEER_MEMORY = r"peak_rss_MB=([0-9][0-9.]*)"
#: The targets, reported beside the figures: backend / fastest peer, JAX / TensorFlow,
#: peak anonymous memory / TensorFlow's.
PEER_TARGET, JAX_TARGET, MEMORY_TARGET = 1.0, 0.8, 1.2
#: PyTorch's targets (issue 63): over TensorFlow at batch 1 and at larger batches, and over
#: the fastest peer.
TORCH_TARGETS = {"tensorflow": {1: 0.8, "larger": 0.9}, "peer": 2.0}
#: Each backend's rate beside a busy core over its quiet rate, at least (`--busy-core`).
BUSY_TARGET = 0.4
#: What the busy core runs: one Python thread spinning, never sleeping.
_SPIN = "while True:\n    pass\n"


def parse_args(argv):
    parser = doc_parser(__doc__)
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS),
                        help="Keras backends, one process each (default: all three)")
    parser.add_argument("--config", default="published", choices=("published", "small", "tiny"),
                        help="BiLMOptions preset (default: published, 2x4096_512_2048cnn)")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[32, 1],
                        help="sentences per call (32 1)")
    parser.add_argument("--length", type=int, default=20, help="tokens per sentence (20)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds, each running every backend and peer once (3)")
    parser.add_argument("--calls", type=int, default=5,
                        help="timed calls of each batch size in a row in a worker (5)")
    parser.add_argument("--matmul-size", type=int, default=2048,
                        help="side of the float32 matmul probe (2048)")
    parser.add_argument("--peer", action="append", default=[], metavar="LABEL=COMMAND",
                        help="a peer's inference benchmark, run once per round (repeatable; "
                             "its last line names tokens/s as 'b1=41.6 b32=200.1' and may "
                             "name its peak RSS as 'peak_rss_MB=3500')")
    parser.add_argument("--embed", action="store_true",
                        help="each round, also time the whole `keras-elmo embed --all` "
                             "command on one sentence under each backend")
    parser.add_argument("--model-dir", default=None,
                        help="where --embed keeps its random-weight model (default: "
                             "$TMPDIR/keras-elmo-bench-CONFIG, written once)")
    parser.add_argument("--busy-core", action="store_true",
                        help="also time each backend's calls beside a process spinning on "
                             "one core, and report busy / quiet rates")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for name in ("length", "rounds", "calls"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1; received {getattr(args, name)}")
    if min(args.batch_sizes) < 1:
        parser.error(f"--batch-sizes must all be >= 1; received {args.batch_sizes}")
    return args


# --- one backend, in its own process --------------------------------------------------------
class BusyCore:
    """A process spinning on one core (the last this process may use) while the `with`
    block runs: the load another program puts beside a biLM."""

    def __enter__(self):
        self.process = subprocess.Popen([sys.executable, "-c", _SPIN],
                                        stdin=subprocess.DEVNULL)
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(self.process.pid, {max(os.sched_getaffinity(0))})
        time.sleep(0.2)  # spinning by the first call
        return self

    def __exit__(self, *exc):
        self.process.kill()
        self.process.wait()
        return False


def inference_function(bilm):
    """`char_ids -> layers`, the fastest way of the running backend (module docstring)."""
    import keras

    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        return tf.function(lambda ids: bilm(ids, training=False)["layers"])
    from backend_gpu import compiled_inference

    return compiled_inference(bilm)


def matmul_probe(n):
    """The running backend's float32 `n^3` matmul probe (`sample()`, `samples`)."""
    import keras

    if keras.backend.backend() == "tensorflow":
        from _common import MatmulProbe

        return MatmulProbe(n)
    from backend_gpu import MatmulProbe

    return MatmulProbe(n)


def worker(args):
    """Times one backend (module docstring); prints its lines, then `result: {json}`."""
    from keras_elmo.process.cpu_setup import describe_cpu, set_cpu_defaults

    stages = MemoryStages()
    set_cpu_defaults()
    stages.mark("python start")
    if os.environ.get("KERAS_BACKEND") == "tensorflow":  # as benchmarks/inference.py starts it
        from keras_elmo.cli.tensorflow_start import import_tensorflow

        import_tensorflow()
    import keras
    import numpy as np

    import keras_elmo
    from backend_gpu import batch_sentences, time_call, to_device, versions
    from inference import flops_per_position

    stages.mark(_FLOOR)
    options = getattr(keras_elmo.BiLMOptions, args.config)()
    bilm = keras_elmo.BiLM(options)
    stages.mark("BiLM with random weights")
    report("backend", versions())
    report("cpu", describe_cpu())
    sentences = batch_sentences(args.batch_sizes, args.length)
    inputs = {b: to_device(keras_elmo.batch_to_ids(s)) for b, s in sentences.items()}
    infer = inference_function(bilm)
    first = {}
    for b in args.batch_sizes:
        first[b] = time_call(infer, inputs[b])
        time_call(infer, inputs[b])
        stages.mark(f"batch {b}: first two calls")
    probe = matmul_probe(args.matmul_size)
    stages.mark("matmul probe")
    seconds = {b: [] for b in args.batch_sizes}
    for b in args.batch_sizes:
        seconds[b] = [time_call(infer, inputs[b]) for _ in range(args.calls)]
        probe.sample()
    stages.mark("timed calls")
    busy = {}
    if args.busy_core:
        for b in args.batch_sizes:
            with BusyCore():
                time_call(infer, inputs[b])
                busy[b] = [time_call(infer, inputs[b]) for _ in range(args.calls)]
    matmul = median_spread(probe.samples)[0]
    flops = flops_per_position(options)["total"] * (args.length + 2)  # <S>, </S> too
    result = {"backend": keras.backend.backend(), "matmul": probe.samples,
              "tokens_per_s": {}, "fraction": {}, "first_call": first,
              "tensorflow": "tensorflow" in sys.modules}
    report(f"matmul {args.matmul_size}^3 float32 ({result['backend']})",
           format_samples(probe.samples, "GFLOP/s"))
    for b in args.batch_sizes:
        tokens = [b * args.length / s for s in seconds[b]]
        result["tokens_per_s"][b] = median_spread(tokens)[0]
        result["fraction"][b] = b * flops / median_spread(seconds[b])[0] / 1e9 / matmul
        report(f"batch {b} tokens/s", format_samples(tokens, "tokens/s"))
        report(f"batch {b} achieved", f"{result['fraction'][b]:.0%} of the matmul rate; first "
               f"call (trace, compilation) {first[b]:.1f} s")
        if b in busy:
            tokens = [b * args.length / s for s in busy[b]]
            result.setdefault("busy_tokens_per_s", {})[b] = median_spread(tokens)[0]
            report(f"batch {b} tokens/s beside a busy core", format_samples(tokens, "tokens/s") +
                   f"; {result['busy_tokens_per_s'][b] / result['tokens_per_s'][b]:.2f}x "
                   "its quiet rate")
    for name, text in stages.lines():
        report(f"memory {name}", text)
    model = [f for name, f in stages.stages if f and name not in _PROBES]
    if model:  # (no figures without /proc/self/status)
        result["floor"] = dict(stages.stages)[_FLOOR]["anon"]
        result["anon"] = max(f["anon_peak"] for f in model)
        result["rss"] = max(f["rss_peak"] for f in model)
        report("peak memory of the model (loading and calls, probes excluded)",
               peak_text(result["anon"], result["rss"]) +
               f"; anonymous floor after the imports {result['floor']:.0f} MiB")
    report("tensorflow in this process", "yes" if result["tensorflow"] else "no")
    stages.close()
    report(_RESULT, json.dumps(result))


# --- the driver ----------------------------------------------------------------------------------
class PeersWithMemory(Peers):
    """`Peers` whose output may also name its peak RSS (`_PEER_MEMORY`, "peak RSS MiB"):
    read where present, a peer without it still counts."""

    def _figures(self, output):
        figures = super()._figures(output)
        for line in reversed(output.splitlines()):
            found = re.search(_PEER_MEMORY, line)
            if found and figures:
                figures["peak RSS MiB"] = float(found.group(1))
                break
        return figures


def environment(backend):
    """The environment this benchmark started with (each process applies keras-elmo's CPU
    defaults itself, as a program using the library and the command do), `backend` chosen."""
    return {**STARTING_ENVIRONMENT, "KERAS_BACKEND": backend}


def run_worker(backend, args):
    """Runs one worker under `backend`; prints its lines indented; returns its result."""
    command = [sys.executable, os.path.abspath(__file__), "--worker", "--config", args.config,
               "--length", str(args.length), "--calls", str(args.calls),
               "--matmul-size", str(args.matmul_size), "--batch-sizes",
               *map(str, args.batch_sizes)] + (["--busy-core"] if args.busy_core else [])
    print(f"  [{backend}] load {os.getloadavg()[0]:.2f}")
    done = subprocess.run(command, env=environment(backend), capture_output=True, text=True)
    result = None
    for line in done.stdout.splitlines():
        if line.startswith(f"{_RESULT}: "):
            result = json.loads(line[len(_RESULT) + 2:])
        else:
            print(f"  [{backend}] {line}")
    if result is None:
        print(f"  [{backend}] failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return result


def embed_files(args):
    """`(sentence file, options.json, weights.hdf5)` for `--embed`: one sentence of
    `--length` tokens, the random model of benchmarks/inference.py."""
    from backend_gpu import random_sentences
    from inference import published_files
    import numpy as np

    options_file, weight_file = published_files(args.config, args.model_dir)
    path = os.path.join(tempfile.mkdtemp(prefix="keras-elmo-backends-"), "sentence.txt")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(" ".join(random_sentences(1, args.length,
                                               np.random.default_rng(0))[0]) + "\n")
    return path, options_file, weight_file


def run_embed(backend, files):
    """Times `keras-elmo embed --all` on `files` under `backend`: `(seconds, peak)` or None."""
    from embed_corpus import run_measured

    sentence, options_file, weight_file = files
    command = [sys.executable, "-m", "keras_elmo.cli", "embed", sentence,
               sentence + f".{backend}.hdf5", "--all", "--options-file", options_file,
               "--weight-file", weight_file, "--quiet"]
    try:
        seconds, peak, cpu = run_measured(command, environment(backend))
    except RuntimeError as error:
        report(f"embed {backend}", f"failed: {str(error)[-600:]}")
        return None
    report(f"embed {backend}", f"{seconds:.2f} s ({cpu:.1f} CPU s), "
           f"{peak_text(peak.get('anon', 0.0), peak.get('rss', 0.0))}")
    return seconds, peak


def rounds_text(values, digits=1):
    """`"median (rounds: a / b / c)"`."""
    return (f"{statistics.median(values):,.{digits}f} (rounds: " +
            " / ".join(f"{v:,.{digits}f}" for v in values) + ")")


def ratios_text(ratios):
    return " / ".join(f"{r:.2f}x" for r in ratios) + " (round by round)"


def drive(args):
    """Runs the rounds and prints the comparison (module docstring)."""
    print_load("before")
    peers = PeersWithMemory(args.peer, Peers.inference_figures(args.batch_sizes))
    files = embed_files(args) if args.embed else None
    results = {b: [] for b in args.backends}  # per round, None where the worker failed
    embeds = {b: [] for b in args.backends}
    turns = list(args.backends) + (["peers"] if peers else [])
    for index in range(args.rounds):
        shift = index % len(turns)
        order = turns[shift:] + turns[:shift]
        report(f"round {index + 1}", f"order {', '.join(order)}; load "
               f"{os.getloadavg()[0]:.2f}")
        for turn in order:
            if turn == "peers":
                peers.run_round()
                continue
            results[turn].append(run_worker(turn, args))
            if files:
                embeds[turn].append(run_embed(turn, files))
    print()
    summarize(args, results, embeds, peers)
    print_load("after")


def summarize(args, results, embeds, peers):
    """The medians over the rounds, the ratios and the targets."""
    ok = {b: [r for r in rounds if r] for b, rounds in results.items()}
    for backend, rounds in ok.items():
        if not rounds:
            report(f"{backend}", "no round ran (see its lines above)")
            continue
        for b in args.batch_sizes:
            report(f"{backend} batch {b} tokens/s",
                   rounds_text([r["tokens_per_s"][str(b)] for r in rounds]))
            report(f"{backend} batch {b} fraction of its matmul rate",
                   " / ".join(f"{r['fraction'][str(b)]:.0%}" for r in rounds) +
                   " (first call " + " / ".join(f"{r['first_call'][str(b)]:.1f}"
                                                for r in rounds) + " s)")
        for b in args.batch_sizes if "busy_tokens_per_s" in rounds[0] else ():
            report(f"{backend} batch {b} beside a busy core, busy / quiet",
                   rounds_text([busy_ratio(r, b) for r in rounds], 2) + "; busy tokens/s " +
                   " / ".join(f"{r['busy_tokens_per_s'][str(b)]:,.1f}" for r in rounds))
        report(f"{backend} matmul {args.matmul_size}^3 float32 GFLOP/s",
               rounds_text([statistics.median(r["matmul"]) for r in rounds]))
        if "anon" in rounds[0]:
            report(f"{backend} peak anonymous memory of the model MiB",
                   rounds_text([r["anon"] for r in rounds], 0) + "; RSS " +
                   " / ".join(f"{r['rss']:,.0f}" for r in rounds) + "; floor after the "
                   "imports " + " / ".join(f"{r['floor']:,.0f}" for r in rounds))
        report(f"{backend} imports tensorflow",
               "yes" if any(r["tensorflow"] for r in rounds) else "no")
        done = [e for e in embeds[backend] if e]
        if done:
            report(f"{backend} embed, one sentence, whole command",
                   rounds_text([s for s, _ in done], 2) + " s; peak anonymous " +
                   " / ".join(f"{p.get('anon', 0.0):,.0f}" for _, p in done) + " MiB")
    if peers:
        peers.report({f"{backend} batch {b}": [r["tokens_per_s"][str(b)] if r else float("nan")
                                               for r in results[backend]]
                      for backend in args.backends for b in args.batch_sizes},
                     figure_of={f"{backend} batch {b}": f"batch {b}"
                                for backend in args.backends for b in args.batch_sizes})
        for label, _ in peers.peers:
            memory = [r[label]["peak RSS MiB"] for r in peers.rounds
                      if "peak RSS MiB" in r.get(label, {})]
            if memory:
                report(f"peer {label} peak RSS MiB", rounds_text(memory, 0))
    reference = results.get("tensorflow")
    for backend in args.backends:
        if backend == "tensorflow" or not reference:
            continue
        pairs = [(r, t) for r, t in zip(results[backend], reference) if r and t]
        for b in args.batch_sizes:
            ratios = [r["tokens_per_s"][str(b)] / t["tokens_per_s"][str(b)] for r, t in pairs]
            if ratios:
                report(f"{backend} / tensorflow, batch {b}", ratios_text(ratios))
        memory = [r["anon"] / t["anon"] for r, t in pairs if "anon" in r and "anon" in t]
        if memory:
            report(f"{backend} / tensorflow, peak anonymous memory of the model",
                   ratios_text(memory))
    report_targets(args, results, peers)


def busy_ratio(result, b):
    """A worker's rate at batch `b` beside a busy core over its quiet rate."""
    return result["busy_tokens_per_s"][str(b)] / result["tokens_per_s"][str(b)]


def report_targets(args, results, peers):
    """One line per target: the median ratio and whether it is met (not asserted)."""
    def median_ratio(backend, over):
        ratios = [over(r, i) for i, r in enumerate(results.get(backend, [])) if r]
        ratios = [x for x in ratios if x]
        return statistics.median(ratios) if ratios else None

    def peer_best(index, b):
        round_ = peers.rounds[index] if index < len(peers.rounds) else {}
        return max((p[f"batch {b}"] for p in round_.values() if f"batch {b}" in p),
                   default=None)

    tf_rounds = results.get("tensorflow", [])
    for backend in args.backends:
        for b in args.batch_sizes:
            if peers:
                ratio = median_ratio(backend, lambda r, i: (
                    r["tokens_per_s"][str(b)] / peer_best(i, b) if peer_best(i, b) else None))
                if ratio is not None:
                    report(f"target {backend} >= the fastest peer, batch {b}",
                           f"{ratio:.2f}x ({'met' if ratio >= PEER_TARGET else 'not met'})")
            if backend == "torch" and peers:
                target = TORCH_TARGETS["peer"]
                ratio = median_ratio(backend, lambda r, i: (
                    r["tokens_per_s"][str(b)] / peer_best(i, b) if peer_best(i, b) else None))
                if ratio is not None:
                    report(f"target torch >= {target}x the fastest peer, batch {b}",
                           f"{ratio:.2f}x ({'met' if ratio >= target else 'not met'})")
            if backend == "torch" and tf_rounds:
                target = TORCH_TARGETS["tensorflow"][1 if b == 1 else "larger"]
                ratio = median_ratio(backend, lambda r, i: (
                    r["tokens_per_s"][str(b)] / tf_rounds[i]["tokens_per_s"][str(b)]
                    if i < len(tf_rounds) and tf_rounds[i] else None))
                if ratio is not None:
                    report(f"target torch >= {target}x tensorflow, batch {b}",
                           f"{ratio:.2f}x ({'met' if ratio >= target else 'not met'})")
            if args.busy_core:
                ratio = median_ratio(backend, lambda r, i: busy_ratio(r, b))
                if ratio is not None:
                    reference = median_ratio("tensorflow", lambda r, i: busy_ratio(r, b))
                    beside = ("" if backend == "tensorflow" or reference is None
                              else f"; tensorflow {reference:.2f}x")
                    report(f"target {backend} beside a busy core >= {BUSY_TARGET}x its quiet "
                           f"rate, batch {b}", f"{ratio:.2f}x "
                           f"({'met' if ratio >= BUSY_TARGET else 'not met'}{beside})")
            if backend == "jax" and tf_rounds:
                ratio = median_ratio(backend, lambda r, i: (
                    r["tokens_per_s"][str(b)] / tf_rounds[i]["tokens_per_s"][str(b)]
                    if i < len(tf_rounds) and tf_rounds[i] else None))
                if ratio is not None:
                    report(f"target jax >= {JAX_TARGET}x tensorflow, batch {b}",
                           f"{ratio:.2f}x ({'met' if ratio >= JAX_TARGET else 'not met'})")
        if backend != "tensorflow" and tf_rounds:
            ratio = median_ratio(backend, lambda r, i: (
                r["anon"] / tf_rounds[i]["anon"] if i < len(tf_rounds) and tf_rounds[i]
                and "anon" in r and "anon" in tf_rounds[i] else None))
            if ratio is not None:
                report(f"target {backend} peak anonymous memory <= {MEMORY_TARGET}x "
                       "tensorflow's", f"{ratio:.2f}x "
                       f"({'met' if ratio <= MEMORY_TARGET else 'not met'})")


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        worker(args)
    else:
        drive(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
