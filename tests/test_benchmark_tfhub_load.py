"""`benchmarks/tfhub_load.py` at the tiny size (the fixture module `google_elmo`): each
figure it prints is there and positive, for the readers alone and, slow, for every variant
(TensorFlow's loader, ours from a directory and from the download cache)."""

import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO, "benchmarks", "tfhub_load.py")
#: A variant's summary line: `name: work <median> (<min>..<max>) s; ...; peak anonymous ...`.
_SUMMARY = (r"^{}: work ([0-9.]+) \(([0-9.]+)\.\.([0-9.]+)\) s; imports [0-9.]+ .*"
            r"peak anonymous ([0-9,]+) .*VmHWM ([0-9,]+) ")


def run(tmp_path, *variants):
    done = subprocess.run([sys.executable, SCRIPT, "--size", "tiny", "--repeats", "1",
                           "--dir", str(tmp_path), "--variants", *variants],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def check_summary(stdout, variant):
    found = re.search(_SUMMARY.format(re.escape(variant)), stdout, re.MULTILINE)
    assert found, f"no summary line for {variant!r} in:\n{stdout}"
    work, low, high, anon, hwm = (float(g.replace(",", "")) for g in found.groups())
    assert 0 < low <= work <= high
    assert anon > 0 and hwm > 0


def test_the_readers_alone_print_their_figures(tmp_path):
    stdout = run(tmp_path, "read-crc", "read-nocrc", "parse-pb")
    for variant in ("read-crc", "read-nocrc", "parse-pb"):
        check_summary(stdout, variant)
    assert re.search(r"^cpu: .*flags .*avx2", stdout, re.MULTILINE)
    assert re.search(r"^load before: [0-9.]+", stdout, re.MULTILINE)
    assert re.search(r"^matmul 2048\^3 float32: [0-9.]+ GFLOP/s", stdout, re.MULTILINE)
    assert not os.listdir(tmp_path)  # without --keep the work folder goes


@pytest.mark.slow
def test_every_variant_prints_its_figures_and_the_ratio(tmp_path):
    stdout = run(tmp_path, "tf-loader", "ours-dir", "ours-cache", "read-crc")
    for variant in ("tf-loader", "ours-dir", "ours-cache", "read-crc"):
        check_summary(stdout, variant)
    assert "output (2, 7, 32)" in stdout  # the same batch, the fixture's elmo width
    assert re.search(r"^ours-cache, first use .*: [0-9.]+ s", stdout, re.MULTILINE)
    for ours in ("ours-dir", "ours-cache"):
        assert re.search(rf"^{ours} / tf-loader \(load \+ call\): [0-9.]+x", stdout,
                         re.MULTILINE)


def test_the_cache_check_benchmark_prints_both_variants(tmp_path):
    """benchmarks/cache_check.py on a 100 kB model: both variants' medians and the ratio."""
    done = subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", "cache_check.py"),
                           "--repeats", "2", "--size-bytes", "100000", "--dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    for line in ("model: 2 files, ", "before (each file hashed at each use): ",
                 "after (stat compared, nothing hashed): ", "speed-up (medians): "):
        assert line in done.stdout, (line, done.stdout[-2000:])
    assert os.listdir(tmp_path) == []  # its cache is removed
