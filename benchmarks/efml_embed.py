"""The whole `keras-elmo embed` command against ELMoForManyLangs' own embedding, one EFML model.

One published-size ELMoForManyLangs (EFML) model directory, made by EFML's own code
(`--make-model-command`, run as `CMD OUT --size published --han N --seed S`; reused when
present), laid out as the released models are, and given to both commands as it is:

    keras-elmo   keras-elmo embed MODEL_DIR IN.txt OUT.hdf5 --no-progress --batch-size B
    efml         PEER_COMMAND MODEL_DIR IN.txt OUT.npz --batch-size B

on the first `--sentences` lines of People's Daily held-out text (`--data`, tokens already
separated by spaces). Each command is timed from process start to exit (start-up, imports,
model load, reading, embedding, writing); rates are the file's whitespace tokens per
wall-clock second. Memory is the command's peak anonymous memory (`RssAnon`: what it
allocated itself) with its peak RSS beside, sampled every 10 ms and summed over the command's
process tree (`_memory_sampler.MemorySampler`). In each round the two commands run one after
the other, their order alternating between rounds; the load is printed around every run, and
a 2048^3 float32 matmul rate (`_common.MatmulProbe`) is measured in a child process in our
environment of the class before every round and after the last, with the load and the CPU
settings in effect there.

CPU classes (`--cpu-classes`, run one after the other; the class's variables replace any of
them the benchmark was started with, for both commands and the matmul probe):

    avx512         the machine as it is
    avx2           ONEDNN_MAX_CPU_ISA=AVX2 for both; the torch peer also gets
                   ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2
    avx2-default   as avx2, and TF_ENABLE_ONEDNN_OPTS=0 for ours (TensorFlow's default on
                   an AVX2-only CPU)

Outputs are compared too. EFML carries LSTM state from one batch to the next and runs its
length-sorted batches in random order, so only its first batch after a load is stateless:
the peer also embeds the first `--check-sentences` lines in one batch, which must match our
vectors of those lines (every layer); of the timed file, layer 0 must match everywhere and
only one batch of the biLSTM layers can. EFML skips empty lines (its keys count non-empty
lines), ours keeps them as zero-length datasets: keys are aligned by line.

The goal: ours >= 3x the peer's tokens/s (ratio of the medians) in less peak anonymous
memory, in every class.

Example:
    python benchmarks/efml_embed.py --peer-command "bash PATH/TO/efml.sh embed" \\
        --make-model-command "bash PATH/TO/efml.sh make-model" --repeats 3
    python benchmarks/efml_embed.py --cpu-classes avx512 avx2 avx2-default --peer-command ...
    python benchmarks/efml_embed.py --model-dir PATH/TO/zhs.model --repeats 1   # ours only
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

from _common import (STARTING_ENVIRONMENT, doc_parser, format_samples, matmul_in_child,
                     median_spread, print_load, report)
from _memory import peak_text
from _memory_sampler import MemorySampler

from keras_elmo.process.cpu_setup import cpu_flags

_HERE = os.path.dirname(os.path.abspath(__file__))
_DEFAULT_DATA = os.path.join(os.path.dirname(_HERE), "data", "people_daily", "heldout.txt")
#: Seconds between two samples of a command's memory.
_SAMPLE_INTERVAL = 0.01
#: The variables a CPU class sets; every class removes them from the starting environment.
_CLASS_VARIABLES = ("ONEDNN_MAX_CPU_ISA", "TF_ENABLE_ONEDNN_OPTS", "ATEN_CPU_CAPABILITY",
                    "MKL_ENABLE_INSTRUCTIONS")
_AVX2_CAP = {"ONEDNN_MAX_CPU_ISA": "AVX2"}
_TORCH_AVX2 = {**_AVX2_CAP, "ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}
#: class -> (our variables, the peer's variables)
CPU_CLASSES = {
    "avx512": ({}, {}),
    "avx2": (_AVX2_CAP, _TORCH_AVX2),
    "avx2-default": ({**_AVX2_CAP, "TF_ENABLE_ONEDNN_OPTS": "0"}, _TORCH_AVX2),
}
#: Files that mark a finished EFML model directory.
_MODEL_FILES = ("config.json", "char.dic", "token_embedder.pkl", "encoder.pkl")
GOAL_RATIO = 3.0
#: Our closing line ("...; 20.3 s (392 tokens/s), ...") and the peer's SUMMARY line.
_OURS_EMBED_SECONDS = re.compile(r"; ([0-9.]+) s \([0-9,.]+ tokens/s\)")
_PEER_SECONDS = re.compile(r"load ([0-9.]+) s, embed ([0-9.]+) s")


def parse_args(argv):
    parser = doc_parser(__doc__)
    parser.add_argument("--peer-command", default=None, metavar="CMD",
                        help="the peer's command, given MODEL_DIR IN.txt OUT.npz --batch-size B "
                             "(default: none, ours only)")
    parser.add_argument("--make-model-command", default=None, metavar="CMD",
                        help="makes the EFML model when absent, given OUT --size published "
                             "--han N --seed S")
    parser.add_argument("--model-dir", default=None,
                        help="the EFML model directory, made there when absent (default: "
                             "WORK_DIR/keras-elmo-bench-efml-published-hanN-seedS)")
    parser.add_argument("--work-dir", default=tempfile.gettempdir(),
                        help="where the model is cached and the runs write (default: $TMPDIR)")
    parser.add_argument("--han", type=int, default=6000,
                        help="CJK characters drawn for the made model's vocabularies (6000: "
                             "about 5,300 distinct characters and 5,600 words)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the made model (0)")
    parser.add_argument("--data", default=_DEFAULT_DATA,
                        help="text, one whitespace-tokenised sentence per line (default: "
                             "data/people_daily/heldout.txt)")
    parser.add_argument("--sentences", type=int, default=300, help="first lines embedded (300)")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds (3)")
    parser.add_argument("--batch-size", type=int, default=64, help="both commands' (64)")
    parser.add_argument("--cpu-classes", "--cpu-class", nargs="+", default=["avx512"],
                        choices=sorted(CPU_CLASSES), help="classes to run, in order (avx512)")
    parser.add_argument("--ours-command", default=None, metavar="CMD",
                        help="our command (default: the keras-elmo script beside this Python)")
    parser.add_argument("--ours-args", default="", help="extra arguments of keras-elmo embed")
    parser.add_argument("--check-sentences", type=int, default=32,
                        help="first lines the peer also embeds in one batch to compare "
                             "outputs (32, at most --batch-size; 0: no check)")
    parser.add_argument("--atol", type=float, default=1e-4,
                        help="largest |ours - EFML| counted as agreeing (1e-4)")
    parser.add_argument("--keep", action="store_true", help="keep the text and outputs")
    args = parser.parse_args(argv)
    if min(args.sentences, args.repeats, args.batch_size, args.han + 1) < 1:
        parser.error("--sentences, --repeats and --batch-size must be >= 1 and --han >= 0; "
                     f"received {args.sentences}, {args.repeats}, {args.batch_size}, {args.han}")
    if not 0 <= args.check_sentences <= min(args.batch_size, args.sentences):
        parser.error("--check-sentences must be in 0..min(--batch-size, --sentences) (one "
                     f"stateless EFML batch); received {args.check_sentences}")
    if not os.path.isfile(args.data):
        parser.error(f"--data {args.data} does not exist (expected one tokenised sentence "
                     "per line)")
    if "avx512" in args.cpu_classes and "avx512f" not in cpu_flags():
        parser.error("--cpu-classes avx512 needs a CPU with avx512f; this one has: "
                     f"{' '.join(sorted(cpu_flags())) or 'no AVX2'}")
    args.model_dir = args.model_dir or os.path.join(
        args.work_dir, f"keras-elmo-bench-efml-published-han{args.han}-seed{args.seed}")
    return args


def ensure_model(args):
    """The model directory: reused when its files are there, else made by
    `--make-model-command` into `DIR.partial`, renamed when complete."""
    if all(os.path.isfile(os.path.join(args.model_dir, f)) for f in _MODEL_FILES):
        return "reused"
    if not args.make_model_command:
        raise FileNotFoundError(f"no EFML model in {args.model_dir} (expected "
                                f"{', '.join(_MODEL_FILES)}); give --make-model-command.")
    partial = args.model_dir + ".partial"
    shutil.rmtree(partial, ignore_errors=True)
    command = [*shlex.split(args.make_model_command), partial, "--size", "published",
               "--han", str(args.han), "--seed", str(args.seed)]
    start = time.perf_counter()
    subprocess.run(command, check=True, env=STARTING_ENVIRONMENT)
    os.rename(partial, args.model_dir)
    return f"made in {time.perf_counter() - start:.0f} s by {shlex.join(command)}"


def first_lines(source, num_lines, path):
    """Writes the first `num_lines` lines of `source` as they are; returns them."""
    with open(source, encoding="utf-8") as handle:
        lines = [line.rstrip("\n") for _, line in zip(range(num_lines), handle)]
    if len(lines) < num_lines:
        raise ValueError(f"--data {source} has {len(lines)} lines; --sentences asked for "
                         f"{num_lines}.")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    return lines


def run_measured(command, env):
    """Runs one command; returns `(wall seconds, {"anon", "rss"} peak MiB over its process
    tree, CPU seconds, its output)`, or raises `RuntimeError` with the output's tail."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               env=env)
    with MemorySampler(process.pid, _SAMPLE_INTERVAL, tree=True) as sampler:
        output = process.stdout.read().decode("utf-8", "replace")
        # Exited but not reaped: the id cannot belong to another process while sampled.
        os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)
        peak = sampler.peak()
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    process.stdout.close()
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"{shlex.join(command)} failed ({process.returncode}): "
                           f"{output[-2000:]}")
    return seconds, peak, usage.ru_utime + usage.ru_stime, output


def compare(ours_file, peer_file, lines):
    """`(pairs, {layer: max |ours - EFML|}, [max over layers per pair])` of the sentences
    in both files: our key is the line index, the peer's the index among non-empty lines."""
    import h5py
    import numpy as np

    non_empty = [i for i, line in enumerate(lines) if line.split()]
    worst, per_sentence = {}, []
    with h5py.File(ours_file, "r") as ours, np.load(peer_file) as peer:
        for k, i in enumerate(non_empty[:len(peer.files)]):
            a, b = ours[str(i)][...], peer[str(k)]  # (layers, n, 2P) each
            if a.shape != b.shape:
                raise ValueError(f"line {i}: ours {a.shape}, EFML's {b.shape}")
            diff = np.abs(a - b).max(axis=(1, 2))  # (layers,)
            for layer, d in enumerate(diff):
                worst[layer] = max(worst.get(layer, 0.0), float(d))
            per_sentence.append(diff)
    return len(per_sentence), worst, per_sentence


def check_outputs(name, files, lines, args, peer_env, work):
    """Prints the output comparison of one class: the peer's one-batch run of the first
    `--check-sentences` lines against ours, and the timed files (module docstring)."""
    atol = args.atol
    if args.check_sentences:
        path, out = os.path.join(work, "check.txt"), os.path.join(work, "check.npz")
        first_lines(args.data, args.check_sentences, path)
        seconds, _, _, _ = run_measured(
            [*shlex.split(args.peer_command), args.model_dir, path, out,
             "--batch-size", str(args.batch_size)], peer_env)
        pairs, worst, _ = compare(files["keras-elmo"], out, lines)
        ok = all(d <= atol for d in worst.values())
        report(f"{name} outputs, first {pairs} sentences in one EFML batch",
               "max |ours - EFML| by layer " + " / ".join(f"{d:.1e}" for d in worst.values())
               + f": {'agree' if ok else 'DIFFER'} within {atol:g} (that EFML run "
               f"{seconds:.0f} s)")
        os.remove(out)
    pairs, worst, per = compare(files["keras-elmo"], files["efml"], lines)
    token_layer = sum(1 for d in per if d[0] <= atol)
    every_layer = sum(1 for d in per if d.max() <= atol)
    report(f"{name} outputs, the timed file (last round)",
           f"layer 0 agrees for {token_layer} of {pairs} sentences (max {worst[0]:.1e}); every "
           f"layer for {every_layer} (EFML's first batch after loading; its later batches "
           "start from the state the one before left)")


def time_split(label, seconds, last_line):
    """The whole command's `seconds` split by the parts its own last line times."""
    if label == "keras-elmo":
        found = _OURS_EMBED_SECONDS.search(last_line)
        return (f"embedding {found[1]} s (its closing line) + start-up, model load and "
                f"writing {seconds - float(found[1]):.1f} s") if found else "(not split)"
    found = _PEER_SECONDS.search(last_line)
    return (f"model load {found[1]} s + embedding {found[2]} s (its SUMMARY line) + start-up "
            f"and saving {seconds - float(found[1]) - float(found[2]):.1f} s"
            ) if found else "(not split)"


def run_class(name, args, lines, tokens, commands, work):
    """The interleaved rounds of one CPU class; prints its runs and summary."""
    base = {k: v for k, v in STARTING_ENVIRONMENT.items() if k not in _CLASS_VARIABLES}
    ours_vars, peer_vars = CPU_CLASSES[name]
    envs = {"keras-elmo": {**base, **ours_vars}, "efml": {**base, **peer_vars}}
    for label, variables in (("keras-elmo", ours_vars), ("efml", peer_vars)):
        if label in commands:
            report(f"class {name}, {label} environment",
                   " ".join(f"{k}={v}" for k, v in variables.items()) or "as started")
    runs, gflops, files = {label: [] for label in commands}, [], {}
    for round_index in range(args.repeats):
        gflops += matmul_in_child(envs["keras-elmo"], f"before {name} round {round_index + 1}")
        order = list(commands) if round_index % 2 == 0 else list(commands)[::-1]
        for label in order:
            out = os.path.join(work, f"{label}_{name}_{round_index}"
                                     + (".hdf5" if label == "keras-elmo" else ".npz"))
            load_before = os.getloadavg()[0]
            seconds, peak, cpu, output = run_measured(commands[label](out), envs[label])
            load_after = os.getloadavg()[0]
            last = ([line for line in output.splitlines() if line.strip()] or [""])[-1]
            runs[label].append((seconds, peak, cpu, last))
            report(f"run {name} {label} round {round_index + 1}",
                   f"{seconds:.1f} s, {tokens / seconds:,.1f} tokens/s, "
                   f"{peak_text(peak.get('anon', 0.0), peak.get('rss', 0.0))}, "
                   f"{cpu:.1f} CPU s (load {load_before:.2f} -> {load_after:.2f})")
            report("    its last line", last or "(none)")
            report("    time", f"{seconds:.1f} s = {time_split(label, seconds, last)}")
            if label in files and not args.keep:
                os.remove(files[label])
            files[label] = out
    gflops += matmul_in_child(envs["keras-elmo"], f"after {name}")
    report(f"{name} matmul 2048^3 float32 (our environment)", format_samples(gflops, "GFLOP/s"))
    medians = {}
    for label, samples in runs.items():
        rates = [tokens / s for s, _, _, _ in samples]
        anon, rss = (max(p.get(key, 0.0) for _, p, _, _ in samples) for key in ("anon", "rss"))
        medians[label] = (median_spread(rates)[0], anon, rss,
                          median_spread([c for _, _, c, _ in samples])[0])
        report(f"{name} {label}", f"{format_samples(rates, 'tokens/s')}, "
                                  f"{peak_text(anon, rss)} (largest of the runs)")
        seconds, _, _, last = sorted(samples, key=lambda run: run[0])[len(samples) // 2]
        report(f"{name} {label} time, the median run",
               f"whole command {seconds:.1f} s = {time_split(label, seconds, last)}")
    if "efml" in medians:
        ours, peer = medians["keras-elmo"], medians["efml"]
        ratio = ours[0] / peer[0]
        per_round = [p[0] / o[0] for o, p in zip(runs["keras-elmo"], runs["efml"])]
        report(f"{name} ratio keras-elmo / efml",
               f"{ratio:.2f}x tokens/s (medians; round by round "
               + " / ".join(f"{r:.2f}x" for r in per_round)
               + f"), {peer[3] / ours[3]:.2f}x by CPU time; memory {ours[1]:,.0f} vs "
               f"{peer[1]:,.0f} MiB anonymous, RSS {ours[2]:,.0f} vs {peer[2]:,.0f}")
        met = ratio >= GOAL_RATIO and ours[1] < peer[1]
        report(f"{name} goal (>= {GOAL_RATIO:g}x, less anonymous memory)",
               "met" if met else "NOT met")
        check_outputs(name, files, lines, args, envs["efml"], work)
    if not args.keep:
        for path in files.values():
            os.remove(path)


def main(argv=None):
    args = parse_args(argv)
    print_load("at start")
    report("model", f"{args.model_dir}: {ensure_model(args)}")
    work = tempfile.mkdtemp(prefix="keras-elmo-efml-embed-", dir=args.work_dir)
    text = os.path.join(work, "in.txt")
    lines = first_lines(args.data, args.sentences, text)
    tokens = sum(len(line.split()) for line in lines)
    report("text", f"first {len(lines):,} lines of {args.data}: {tokens:,} tokens, "
                   f"{sum(1 for line in lines if not line.split())} empty lines")
    script = os.path.join(os.path.dirname(sys.executable), "keras-elmo")
    ours = (shlex.split(args.ours_command) if args.ours_command else
            [script] if os.path.isfile(script) else [sys.executable, "-m", "keras_elmo.cli"])
    batch = ["--batch-size", str(args.batch_size)]
    commands = {"keras-elmo": lambda out: [*ours, "embed", args.model_dir, text, out,
                                           "--no-progress", *batch,
                                           *shlex.split(args.ours_args)]}
    if args.peer_command:
        commands["efml"] = lambda out: [*shlex.split(args.peer_command), args.model_dir,
                                        text, out, *batch]
    for label, command in commands.items():
        report(f"command {label}", shlex.join(command("OUT")))
    for name in args.cpu_classes:
        print()
        run_class(name, args, lines, tokens, commands, work)
    if not args.keep:
        shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
