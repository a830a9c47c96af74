"""`keras-elmo embed --runner DirectRunner --num-workers 2` against the single-process `embed`.

Times each whole command from process start to exit (Python start-up, imports, the
pipeline's own steps, every worker's start-up and model loading, reading, embedding,
writing) on `--sentences` lines of People's Daily held-out text (`--data`, repeated to that
many lines), at the `--config` size (published by default) with random weights written by
our own writer (`benchmarks/inference.py`'s files, reused when present). Both variants use
the same cores: the single process TensorFlow's two threads of the command's layout (one
per op, two ops at once, `keras_elmo.process.cpu_setup`), each of the `--num-workers`
Beam workers its share (one core each on 2 cores: one thread per op, one op at a time;
`cpu_setup.worker_thread_layout`). Rates are the corpus' whitespace tokens per wall-clock
second; the ratio is the pipeline's over the single process's, round by round.

Memory: the peak anonymous memory (`RssAnon`) and RSS of every process of a command,
sampled every 10 ms: the single process; the pipeline's launcher (it imports Beam, never
TensorFlow) and each worker process (`sdk_worker_main`) on its own, and the sum over them.

The variants run one after the other in each round, their order alternating between
rounds; the load is printed before and after every run, and a 2048^3 float32 matmul's
GFLOP/s is measured after every run (the machine's rate in the same session). The
pipeline's own line (its `seconds` from building to the manifest) is printed beside the
whole command's time: the difference is start-up and exit.

Example:
    python benchmarks/embed_beam.py --rounds 3
    python benchmarks/embed_beam.py --sentences 600 --rounds 1 --config small
"""

import os
import re
import shlex
import subprocess
import sys
import tempfile
import threading
import time

from _common import (MatmulProbe, doc_parser, format_samples, median_spread, print_load,
                     report)
from _memory import peak_text
from _memory_sampler import descendants, read_status
from embed_corpus import write_corpus
from inference import published_files

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_DEFAULT_DATA = os.path.join(_ROOT, "data", "people_daily", "heldout.txt")
#: Seconds between two samples of the processes' memory.
_SAMPLE_INTERVAL = 0.01
#: What marks a Beam worker process in its command line.
_WORKER_MARK = "sdk_worker_main"


def parse_args(argv):
    parser = doc_parser(__doc__)
    parser.add_argument("--data", default=_DEFAULT_DATA,
                        help="held-out text, one tokenised sentence per line (default: "
                             "data/people_daily/heldout.txt)")
    parser.add_argument("--sentences", type=int, default=4800, help="lines embedded (4800)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (3)")
    parser.add_argument("--num-workers", type=int, default=2,
                        help="the DirectRunner's worker processes (2)")
    parser.add_argument("--config", default="published", choices=("published", "small", "tiny"),
                        help="BiLMOptions preset of the random model (default: published)")
    parser.add_argument("--model-dir", default=None,
                        help="where the random model is written/reused (default: "
                             "$TMPDIR/keras-elmo-bench-CONFIG)")
    parser.add_argument("--beam-args", default="",
                        help="extra arguments of the pipeline's command (e.g. "
                             "'--shard-lines 1200')")
    args = parser.parse_args(argv)
    if args.sentences < 1 or args.rounds < 1 or args.num_workers < 1:
        parser.error("--sentences, --rounds and --num-workers must be >= 1; received "
                     f"{args.sentences}, {args.rounds}, {args.num_workers}")
    if not os.path.isfile(args.data):
        parser.error(f"--data {args.data} does not exist (expected the People's Daily "
                     "held-out text, one tokenised sentence per line)")
    return args


class ProcessTreeSampler:
    """Per-process peaks of `RssAnon` and `VmRSS` over a process and its descendants, and
    the peak of their sum, read every `interval` seconds by a daemon thread."""

    def __init__(self, pid, interval=_SAMPLE_INTERVAL):
        self.pid, self.interval = pid, interval
        self.peaks = {}  # pid -> {"anon", "rss"}
        self.commands = {}  # pid -> its command line
        self.total = {"anon": 0.0, "rss": 0.0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def sample(self):
        total = {"anon": 0.0, "rss": 0.0}
        for pid in [self.pid] + descendants(self.pid):
            figures = read_status(pid)
            if not figures:
                continue
            if pid not in self.commands:
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as handle:
                        self.commands[pid] = handle.read().replace(b"\0", b" ").decode(
                            "utf-8", "replace")
                except OSError:
                    self.commands[pid] = ""
            peak = self.peaks.setdefault(pid, {"anon": 0.0, "rss": 0.0})
            for key, value in figures.items():
                peak[key] = max(peak[key], value)
                total[key] += value
        for key in total:
            self.total[key] = max(self.total[key], total[key])

    def _run(self):
        while not self._stop.wait(self.interval):
            self.sample()

    def close(self):
        self._stop.set()
        self._thread.join()

    def workers(self):
        """Peaks of the Beam worker processes, by pid."""
        return {pid: peak for pid, peak in self.peaks.items()
                if _WORKER_MARK in self.commands.get(pid, "")
                and not self.commands[pid].startswith("/bin/sh")}  # not its shell


def run_measured(command):
    """Runs one command; returns `(wall seconds, sampler, stdout, CPU seconds)`: CPU seconds
    are user + system time of the command and of the processes it waited for (`wait4`: the
    Beam workers too, which the launcher waits for), steadier than wall time on a busy
    machine."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    sampler = ProcessTreeSampler(process.pid)
    errors = []
    reader = threading.Thread(target=lambda: errors.append(process.stderr.read()), daemon=True)
    reader.start()
    stdout = process.stdout.read()
    reader.join()
    # Exited but not reaped: the id cannot belong to another process while sampled.
    os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)
    sampler.close()
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"{shlex.join(command)} failed ({process.returncode}): "
                           f"{errors[0].decode('utf-8', 'replace')[-2000:]}")
    return seconds, sampler, stdout.decode("utf-8", "replace"), usage.ru_utime + usage.ru_stime


def main(argv=None):
    args = parse_args(argv)
    options_file, weight_file = published_files(args.config, args.model_dir)
    work = tempfile.mkdtemp(prefix="keras-elmo-embed-beam-")
    corpus = os.path.join(work, "corpus.txt")
    tokens = write_corpus(args.data, args.sentences, corpus)
    model = ["--options-file", options_file, "--weight-file", weight_file, "--all"]
    commands = {
        "single": lambda out: [sys.executable, "-m", "keras_elmo.cli", "embed", corpus,
                               out + ".hdf5", *model, "--no-progress"],
        "beam": lambda out: [sys.executable, "-m", "keras_elmo.cli", "embed", corpus, out,
                             *model, "--runner", "DirectRunner", "--num-workers",
                             str(args.num_workers), *shlex.split(args.beam_args)],
    }
    for name, command in commands.items():
        report(f"command {name}", shlex.join(command("OUT")))
    report("corpus", f"{args.sentences:,} sentences, {tokens:,} tokens")
    print_load("before")
    probe = MatmulProbe()
    results = {name: [] for name in commands}
    for round_index in range(args.rounds):
        order = list(commands) if round_index % 2 == 0 else list(commands)[::-1]
        for name in order:
            out = os.path.join(work, f"{name}_{round_index}")
            load_before = os.getloadavg()[0]
            seconds, sampler, stdout, cpu = run_measured(commands[name](out))
            load_after = os.getloadavg()[0]
            gflops = probe.sample()
            inner = re.search(r"; ([\d.]+) s \(", stdout)
            workers = sampler.workers()
            launcher = sampler.peaks.get(sampler.pid, {"anon": 0.0, "rss": 0.0})
            results[name].append({"seconds": seconds, "total": dict(sampler.total),
                                  "workers": list(workers.values()), "launcher": launcher,
                                  "inner": float(inner.group(1)) if inner else None,
                                  "cpu": cpu})
            detail = ""
            if name == "beam":
                detail = (f"; launcher {peak_text(launcher['anon'], launcher['rss'])}; "
                          + "; ".join(f"worker {peak_text(p['anon'], p['rss'])}"
                                      for p in workers.values()) + "; " + _shards(out))
            report(f"run {name} round {round_index + 1}",
                   f"{seconds:.1f} s (the command's own: "
                   f"{inner.group(1) if inner else '?'} s), {tokens / seconds:,.1f} tokens/s, "
                   f"{cpu:.1f} CPU s, "
                   f"all processes {peak_text(sampler.total['anon'], sampler.total['rss'])}"
                   f"{detail}; matmul {gflops:.0f} GFLOP/s (load {load_before:.2f} -> "
                   f"{load_after:.2f})")
            _remove(out)
    print_load("after")
    print()
    report("matmul 2048^3", format_samples(probe.samples, "GFLOP/s", 0))
    for name, runs in results.items():
        rates = [tokens / run["seconds"] for run in runs]
        anon = max(run["total"]["anon"] for run in runs)
        rss = max(run["total"]["rss"] for run in runs)
        report(f"{name}", f"{format_samples(rates, 'tokens/s')}, all processes "
                          f"{peak_text(anon, rss)} (largest of the runs)")
    workers = [w for run in results["beam"] for w in run["workers"]]
    if workers:
        report("beam worker", f"{peak_text(max(w['anon'] for w in workers), max(w['rss'] for w in workers))} "
                              f"(largest of {len(workers)} worker processes; smallest "
                              f"{min(w['anon'] for w in workers):,.0f} MiB anonymous)")
        launchers = [run["launcher"] for run in results["beam"]]
        report("beam launcher", peak_text(max(p["anon"] for p in launchers),
                                          max(p["rss"] for p in launchers)))
    ratios = [single["seconds"] / beam["seconds"]
              for single, beam in zip(results["single"], results["beam"])]
    report("ratio beam / single, round by round",
           " / ".join(f"{ratio:.2f}x" for ratio in ratios)
           + f" (median {median_spread(ratios)[0]:.2f}x; goal >= 0.80x)")
    cpu_ratios = [single["cpu"] / beam["cpu"]
                  for single, beam in zip(results["single"], results["beam"])]
    report("ratio by CPU time (single's CPU s / beam's), round by round",
           " / ".join(f"{ratio:.2f}x" for ratio in cpu_ratios))
    os.remove(corpus)
    os.rmdir(work)
    return 0


def _shards(folder):
    """The pipeline's shards from its manifest: tokens and seconds of each (the pipeline's
    own time beyond its longest shard is the workers' start-up, model loading, the other
    steps and waiting)."""
    import json

    with open(os.path.join(folder, "manifest.json"), encoding="utf-8") as handle:
        manifest = json.load(handle)
    shards = manifest["shards"]
    return (f"{len(shards)} shards: " + ", ".join(
        f"{shard['tokens']:,} tokens in {shard['seconds']:.1f} s" for shard in shards))


def _remove(path):
    import shutil

    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path + ".hdf5"):
        os.remove(path + ".hdf5")


if __name__ == "__main__":
    sys.exit(main())
