"""Peers run beside a benchmark: another implementation's own benchmark command, in its own
process, once per round between this benchmark's rounds, its figures read from its output.

A peer is given as `LABEL=COMMAND` (a script's `--peer` option, repeatable). COMMAND runs
with `bash -c` in the environment the benchmark was started with, not the thread layout
and oneDNN choice the benchmark set for itself; put variables before the command to choose
the peer's own setting, e.g. both of TensorFlow's oneDNN settings as two peers:

    --peer "bilm-tf, oneDNN on=TF_ENABLE_ONEDNN_OPTS=1 bash bench_bilmtf.sh infer"
    --peer "bilm-tf, oneDNN off=TF_ENABLE_ONEDNN_OPTS=0 bash bench_bilmtf.sh infer"

The benchmark names the figures it compares, each a regular expression whose first group is
the number (`Peers.INFERENCE_FIGURES`: `b1x20 95.0 tok/s` or `b1=41.6`, the lines bilm-tf's
and AllenNLP's inference scripts print); they are read from the last line of the peer's
output where all of them match. Each round's ratio is ours against the fastest peer of that
round.

Example:
>>> peers = Peers(["echo=echo 'b1=10.0 b32=50.0'"], Peers.inference_figures([1, 32]))
>>> results = peers.run_round()  # doctest: +ELLIPSIS
peer echo: batch 1 10.0, batch 32 50.0 (...)
>>> results["echo"]
{'batch 1': 10.0, 'batch 32': 50.0}
"""

import re
import statistics
import subprocess
import time

from _common import STARTING_ENVIRONMENT, machine_load, report


class Peers:
    """The peers of one benchmark run and their figures, round by round.

    Args:
        specs: list of `"LABEL=COMMAND"` strings.
        figures: `{name: regex}`, the figures to read (first group: the number).
        timeout: float, seconds one peer run may take.
    """

    def __init__(self, specs, figures, timeout=3600):
        self.peers = []
        for spec in specs or []:
            label, sep, command = spec.partition("=")
            if not sep or not label.strip() or not command.strip():
                raise ValueError(f"--peer must be LABEL=COMMAND; received {spec!r}.")
            self.peers.append((label.strip(), command))
        self.figures = {name: re.compile(pattern) for name, pattern in figures.items()}
        self.timeout = timeout
        self.rounds = []  # [{label: {figure: value}}]

    @staticmethod
    def inference_figures(batch_sizes):
        """Tokens/s at each batch size, as `b1x20 95.0 tok/s` (bilm-tf) or `b1=41.6`
        (AllenNLP) print them."""
        return {f"batch {b}": rf"\bb{b}(?:x\d+)?[ =]([0-9][0-9.]*)" for b in batch_sizes}

    @staticmethod
    def training_figures(name):
        """Training tokens/s, the first `N tokens/s` of a line (bilm-tf's training script)."""
        return {name: r"([0-9][0-9,]*\.?[0-9]*) tokens/s"}

    def __bool__(self):
        return bool(self.peers)

    def run_round(self):
        """Runs every peer once; returns and keeps `{label: {figure: value}}` (a figure the
        output lacks is left out, and the output's tail is printed)."""
        results = {}
        for label, command in self.peers:
            start, load = time.perf_counter(), machine_load()[0]
            done = subprocess.run(["bash", "-c", command], capture_output=True, text=True,
                                  env=STARTING_ENVIRONMENT, timeout=self.timeout)
            figures = self._figures(done.stdout + done.stderr)
            results[label] = figures
            report(f"peer {label}", ", ".join(f"{k} {v:,.1f}" for k, v in figures.items())
                   + f" ({time.perf_counter() - start:.0f} s, load {load:.2f}"
                   + (f", exit {done.returncode}" if done.returncode else "") + ")")
            if not figures:
                print((done.stdout + done.stderr)[-1500:])
        self.rounds.append(results)
        return results

    def _figures(self, output):
        for line in reversed(output.splitlines()):
            found = {name: pattern.search(line) for name, pattern in self.figures.items()}
            if all(found.values()):
                return {name: float(match.group(1).replace(",", ""))
                        for name, match in found.items()}
        return {}

    def report(self, ours, figure_of=None):
        """Prints each peer's median per figure and, per round, ours over the fastest peer.

        Args:
            ours: `{name: [value per round]}`, the rounds in the order peers ran in; a name
                is a figure's, or one that `figure_of` maps to the figure it is compared with.
            figure_of: dict name -> figure, for our variants of one figure.
        """
        figure_of = figure_of or {}
        for label, _ in self.peers:
            for name in self.figures:
                values = [r[label][name] for r in self.rounds if name in r.get(label, {})]
                if values:
                    report(f"peer {label} {name}",
                           f"{statistics.median(values):,.1f} (rounds: "
                           + " / ".join(f"{v:,.1f}" for v in values) + ")")
        for name, values in ours.items():
            ratios = []
            for value, peers in zip(values, self.rounds):
                figure = figure_of.get(name, name)
                best = max((p[figure] for p in peers.values() if figure in p), default=None)
                if best:
                    ratios.append(value / best)
            if ratios:
                report(f"ours / fastest peer, {name}",
                       " / ".join(f"{r:.2f}x" for r in ratios) + " (round by round)")
