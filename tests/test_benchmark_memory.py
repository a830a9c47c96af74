"""Helpers of the inference and embed-rate benchmarks: memory stages, streaming probe, the
embed-rate corpus, and the tiny-size end-to-end runs of both scripts."""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "benchmarks"))

from _memory import MemoryStages, StreamingProbe  # noqa: E402
from cpu_class import needs_bfloat16_products  # noqa: E402
from embed_rate import corpus  # noqa: E402
from inference import round_medians  # noqa: E402

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")


@linux_only
def test_a_stage_sees_its_own_peak():
    stages = MemoryStages()
    stages.mark("start")
    block = np.ones(64 << 18, np.float32)  # 64 MiB, touched
    del block
    during = stages.mark("64 MiB allocated and freed")
    after = stages.mark("nothing")
    assert during["peak"] - during["rss"] >= 60  # the freed block is in this stage's peak
    if stages.per_stage:
        assert after["peak"] - after["rss"] < 8  # ...and not in the next one's
    assert stages.peak_mib() >= during["peak"]
    assert abs(during["rss"] - during["anon"] - during["file"]) < 2
    assert [name for name, _ in stages.lines()] == ["start", "64 MiB allocated and freed",
                                                    "nothing"]


def test_streaming_probe_counts_the_bytes_it_reads():
    probe = StreamingProbe([tf.ones((256, 1024)), tf.Variable(tf.ones((3, 4)))])
    assert probe.total_bytes == 4 * (256 * 1024 + 12)
    assert probe.sample() > 0 and len(probe.samples) == 1


def test_embed_rate_corpus_varies_lengths_and_repeats_words():
    sentences = corpus(400, median_length=20, max_length=50, vocab_size=300,
                       rng=np.random.default_rng(0))
    lengths = [len(s) for s in sentences]
    assert len(sentences) == 400 and 1 <= min(lengths) and max(lengths) <= 50
    assert 17 <= np.median(lengths) <= 23 and np.std(lengths) > 5
    words = [w for s in sentences for w in s]
    assert len(set(words)) < len(words) / 10  # Zipf: frequent words repeat


def test_a_rounds_figure_is_the_median_of_its_own_calls():
    assert round_medians([3.0, 1.0, 2.0, 10.0, 30.0, 20.0], 3) == [2.0, 20.0]
    assert round_medians([5.0, 4.0], 1) == [5.0, 4.0]
    assert round_medians([1.0, 3.0, 8.0, 9.0], 2) == [2.0, 8.5]


@pytest.mark.parametrize("script, args, expected", [
    ("inference.py", ["--config", "tiny", "--repeats", "1", "--batch-sizes", "1", "2",
                      "--back-to-back", "3"],
     ["memory import tensorflow + keras: resident", "library pages released after the imports:",
      "memory library pages released (the floor): resident", "batch 1 bound",
      "batch 2 back-to-back tokens/s (3 calls in a row)", "peak memory of the model"]),
    ("embed_rate.py", ["--config", "tiny", "--repeats", "1", "--sentences", "40"],
     ["embed file tokens/s", "embed file / model alone"]),
    pytest.param("reduced_precision.py",
                 ["--models", "tiny", "--batch-size", "2", "--length", "3"],
                 ["tiny layer 0: max |bfloat16 - float32|", "tiny layer 2:"],
                 marks=needs_bfloat16_products),
])
def test_scripts_run_at_tiny_size(tmp_path, script, args, expected):
    done = subprocess.run(
        [sys.executable, os.path.join(REPO, "benchmarks", script), *args,
         "--weights-dir", str(tmp_path / "model")],
        capture_output=True, text=True, timeout=300, cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    for line in expected:
        assert line in done.stdout, done.stdout
    assert os.path.isfile(tmp_path / "model" / "weights.hdf5")  # written by our own writer


def test_inference_compares_each_rounds_median_with_the_peer(tmp_path):
    done = subprocess.run(
        [sys.executable, os.path.join(REPO, "benchmarks", "inference.py"), "--config", "tiny",
         "--repeats", "2", "--calls-per-round", "3", "--batch-sizes", "1",
         "--back-to-back", "0", "--peer", "echo=echo 'b1x20 1.0 tok/s'",
         "--weights-dir", str(tmp_path / "model")],
        capture_output=True, text=True, timeout=300, cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    lines = dict(line.split(": ", 1) for line in done.stdout.splitlines() if ": " in line)
    assert lines["peer echo batch 1"] == "1.0 (rounds: 1.0 / 1.0)"
    for name in ("batch 1", "batch 1, one-row kernels"):
        calls = lines[f"{name} tokens/s"]  # "<median> tokens/s (median of 6, range lo..hi, ..."
        assert "(median of 6," in calls
        low, high = (float(v) for v in calls.split("range ")[1].split(",")[0].split(".."))
        ratios = lines[f"ours / fastest peer, {name}"].split(" (round by round)")[0]
        ratios = [float(r.rstrip("x")) for r in ratios.split(" / ")]
        assert len(ratios) == 2  # one per round: the median of its 3 calls over the peer's 1.0
        assert all(low - 0.1 <= r <= high + 0.1 for r in ratios), (ratios, calls)
