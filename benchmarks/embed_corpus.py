"""The whole `keras-elmo embed --all` command against AllenNLP's `elmo` command code, interleaved.

Times each command from process start to exit (Python start-up, imports, weight loading,
reading, embedding, writing the HDF5 file) on the first `--sentences` x SCALE lines of
People's Daily held-out text (`--data`, wrapping around when the file is shorter), with
the `--config` biLM (published size by default) and random weights written by our own
writer (the files of `benchmarks/inference.py`, reused when present). Rates are the
corpus' whitespace tokens per wall-clock second. Memory is the command's peak anonymous
memory (`RssAnon` of `/proc/<pid>/status`: what it allocated itself, not the pages of
mapped libraries), with its peak RSS beside, both sampled every 10 ms while it runs and
summed over the child and every process it starts (a peer's wrapper script and its Python
alike: `_memory_sampler.MemorySampler`). In each round the commands run one after the
other, their order alternating between rounds; the load is printed before and after every
run, and a 2048^3 float32 matmul rate is measured in our environment before each round and
after the last (`_common.matmul_in_child`).

The peer is given as a command that takes `OPTIONS WEIGHTS IN.txt OUT.hdf5` (for example
a wrapper around AllenNLP 0.9.0's `ElmoEmbedder.embed_file`, batch 64, all layers) with
`--peer-command "..."`; it runs at `--peer-scales` only (the peer is slow: its runs at
large scales take long, docs/performance.md). Without `--peer-command` only ours is timed.

Reported per scale: median tokens/s with the range, the peak anonymous memory and peak RSS
(largest of the runs), the ratio ours/peer of the medians, and seconds per 1,000 tokens
(flat = linear in corpus size).
The issue's goals: >= 3x the peer's tokens/s at 300 sentences, <= 1,280 MiB peak and below
the peer's, time linear and memory flat over 1x / 4x / 16x.

Example:
    python benchmarks/embed_corpus.py --peer-command "bash PATH/TO/allennlp.sh embed-file"
    python benchmarks/embed_corpus.py --scales 1 4 16 --repeats 3 --peer-scales 1
    python benchmarks/embed_corpus.py --scales 1 --repeats 1 --ours-args "--max-tokens 1024"
"""

import os
import shlex
import subprocess
import sys
import tempfile
import time

_PEER_ENVIRONMENT = dict(os.environ)  # before _common sets our thread layout and oneDNN

from _common import (doc_parser, format_samples, matmul_in_child, median_spread,  # noqa: E402
                     print_load, report)
from _memory import peak_text  # noqa: E402
from _memory_sampler import MemorySampler  # noqa: E402
from inference import published_files  # noqa: E402

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_DEFAULT_DATA = os.path.join(_ROOT, "data", "people_daily", "heldout.txt")
#: Seconds between two samples of a command's memory.
_SAMPLE_INTERVAL = 0.01


def parse_args(argv):
    parser = doc_parser(__doc__)
    parser.add_argument("--data", default=_DEFAULT_DATA,
                        help="held-out text, one tokenised sentence per line (default: "
                             "data/people_daily/heldout.txt)")
    parser.add_argument("--sentences", type=int, default=300, help="lines at scale 1 (300)")
    parser.add_argument("--scales", type=int, nargs="+", default=[1, 4, 16],
                        help="corpus sizes in units of --sentences (1 4 16)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="interleaved rounds at the smallest scale (3); 1 at the others")
    parser.add_argument("--peer-command", default=None, metavar="CMD",
                        help="the peer's command, given OPTIONS WEIGHTS IN OUT as its last "
                             "four arguments (default: none, ours only)")
    parser.add_argument("--peer-scales", type=int, nargs="*", default=[1],
                        help="scales the peer runs at (1)")
    parser.add_argument("--ours-args", default="",
                        help="extra arguments of `keras-elmo embed` (e.g. '--max-tokens 1024', "
                             "or '--max-tokens none' for no budget)")
    parser.add_argument("--config", default="published", choices=("published", "small", "tiny"),
                        help="BiLMOptions preset of the random model (default: published)")
    parser.add_argument("--model-dir", default=None,
                        help="where the random model is written/reused (default: "
                             "$TMPDIR/keras-elmo-bench-CONFIG)")
    parser.add_argument("--keep", action="store_true", help="keep the corpora and outputs")
    args = parser.parse_args(argv)
    if args.sentences < 1 or min(args.scales) < 1 or args.repeats < 1:
        parser.error("--sentences, --scales and --repeats must be >= 1; received "
                     f"{args.sentences}, {args.scales}, {args.repeats}")
    if not os.path.isfile(args.data):
        parser.error(f"--data {args.data} does not exist (expected the People's Daily "
                     "held-out text, one tokenised sentence per line)")
    return args


def write_corpus(source, num_lines, path):
    """The first `num_lines` lines of `source` (wrapping around); returns the token count."""
    with open(source, encoding="utf-8") as handle:
        lines = [line.rstrip("\n") for line in handle if line.strip()]
    chosen = [lines[i % len(lines)] for i in range(num_lines)]
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("\n".join(chosen) + "\n")
    return sum(len(line.split()) for line in chosen)


def run_measured(command, env, interval=_SAMPLE_INTERVAL):
    """Runs one command; returns `(wall seconds, figures, CPU seconds)`: `figures` the peak
    anonymous memory and peak RSS in MiB (`{"anon", "rss"}`) of the command's processes
    together, sampled every `interval` seconds; CPU seconds are user + system time of the
    child and the processes it waited for (`wait4`), steadier than wall time on a busy
    machine.

    Example:
    >>> seconds, peak, cpu = run_measured(["sleep", "0.1"], os.environ)
    >>> peak["rss"] >= peak["anon"] > 0
    True
    """
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               env=env)
    with MemorySampler(process.pid, interval, tree=True) as sampler:
        stderr = process.stderr.read()
        # Exited but not reaped: the id cannot belong to another process while sampled.
        os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)
        figures = sampler.peak()
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    process.stderr.close()
    if process.returncode != 0:
        raise RuntimeError(f"{shlex.join(command)} failed ({process.returncode}): "
                           f"{stderr.decode('utf-8', 'replace')[-2000:]}")
    return seconds, figures, usage.ru_utime + usage.ru_stime


def main(argv=None):
    args = parse_args(argv)
    options_file, weight_file = published_files(args.config, args.model_dir)
    work = tempfile.mkdtemp(prefix="keras-elmo-embed-corpus-")
    corpora = {}
    for scale in sorted(set(args.scales)):
        path = os.path.join(work, f"corpus_{scale}x.txt")
        corpora[scale] = (path, write_corpus(args.data, args.sentences * scale, path))
    ours_env = dict(os.environ)
    commands = {
        "keras-elmo": lambda inp, out: [
            sys.executable, "-m", "keras_elmo.cli", "embed", inp, out, "--all",
            "--options-file", options_file, "--weight-file", weight_file, "--quiet",
            *shlex.split(args.ours_args)],
    }
    if args.peer_command:
        commands["allennlp"] = lambda inp, out: [
            *shlex.split(args.peer_command), options_file, weight_file, inp, out]
    report("command keras-elmo", shlex.join(commands["keras-elmo"]("IN", "OUT.hdf5")))
    if args.peer_command:
        report("command allennlp", shlex.join(commands["allennlp"]("IN", "OUT.hdf5")))
    print_load("before")
    gflops = []  # float32 matmul samples in our environment, before each round and after
    results = {}  # (name, scale) -> list of (seconds, {"anon", "rss"} peak MiB, CPU seconds)
    smallest = min(args.scales)
    for scale in sorted(set(args.scales)):
        path, tokens = corpora[scale]
        report(f"corpus {scale}x", f"{args.sentences * scale:,} sentences, {tokens:,} tokens")
        names = [n for n in commands if n == "keras-elmo" or scale in args.peer_scales]
        for round_index in range(args.repeats if scale == smallest else 1):
            gflops += matmul_in_child(ours_env, f"before {scale}x round {round_index + 1}")
            order = names if round_index % 2 == 0 else names[::-1]
            for name in order:
                out = os.path.join(work, f"{name}_{scale}x_{round_index}.hdf5")
                env = ours_env if name == "keras-elmo" else _PEER_ENVIRONMENT
                load_before = os.getloadavg()[0]
                seconds, peak, cpu = run_measured(commands[name](path, out), env)
                load_after = os.getloadavg()[0]
                results.setdefault((name, scale), []).append((seconds, peak, cpu))
                report(f"run {name} {scale}x round {round_index + 1}",
                       f"{seconds:.1f} s, {tokens / seconds:,.1f} tokens/s, "
                       f"{peak_text(peak.get('anon', 0.0), peak.get('rss', 0.0))}, "
                       f"{cpu:.1f} CPU s (load {load_before:.2f} -> {load_after:.2f})")
                if not args.keep:
                    os.remove(out)
    gflops += matmul_in_child(ours_env, "after")
    print()
    report("matmul 2048^3 float32 (our environment)", format_samples(gflops, "GFLOP/s"))
    for (name, scale), runs in sorted(results.items(), key=lambda item: (item[0][1], item[0][0])):
        tokens = corpora[scale][1]
        rates = [tokens / s for s, _, _ in runs]
        seconds = median_spread([s for s, _, _ in runs])[0]
        cpu = median_spread([c for _, _, c in runs])[0]
        anon, rss = (max(p.get(key, 0.0) for _, p, _ in runs) for key in ("anon", "rss"))
        report(f"{name} {scale}x", f"{format_samples(rates, 'tokens/s')}, "
                                   f"{peak_text(anon, rss)} (largest of the runs), "
                                   f"{1000 * seconds / tokens:.2f} s and "
                                   f"{1000 * cpu / tokens:.2f} CPU s per 1,000 tokens")
    for scale in sorted(set(args.scales)):
        if ("allennlp", scale) in results:
            tokens = corpora[scale][1]
            ours, peer = (median_spread([tokens / s for s, _, _ in results[(name, scale)]])[0]
                          for name in ("keras-elmo", "allennlp"))
            ours_cpu, peer_cpu = (median_spread([c for _, _, c in results[(name, scale)]])[0]
                                  for name in ("keras-elmo", "allennlp"))
            rounds = [p / o for (o, _, _), (p, _, _) in zip(results[("keras-elmo", scale)],
                                                            results[("allennlp", scale)])]
            report(f"ratio keras-elmo / allennlp {scale}x",
                   f"{ours / peer:.2f}x tokens/s (wall; round by round "
                   f"{' / '.join(f'{r:.2f}x' for r in rounds)}), "
                   f"{peer_cpu / ours_cpu:.2f}x by CPU time")
    if not args.keep:
        for path, _ in corpora.values():
            os.remove(path)
        os.rmdir(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
