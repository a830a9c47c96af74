"""Helpers of the benchmarks: memory stages (peak anonymous memory sampled, RSS beside), a
command's memory with the processes it starts, streaming probe, the embed-rate corpus, and
the tiny-size end-to-end runs of the inference, embed-rate and reduced-precision scripts."""

import os
import shlex
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "benchmarks"))

from _memory import MemoryStages, StreamingProbe, peak_text, tensorflow_allocator  # noqa: E402
from _memory_sampler import MemorySampler  # noqa: E402
from cpu_class import needs_bfloat16_products  # noqa: E402
from embed_corpus import run_measured  # noqa: E402
from embed_rate import corpus  # noqa: E402
from inference import round_medians  # noqa: E402

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
_MIB = 1 << 20


@linux_only
def test_a_stage_sees_its_own_anonymous_peak():
    stages = MemoryStages()
    try:
        start = stages.mark("start")
        block = np.ones(200 * _MIB // 4, np.float32)  # 200 MiB, touched
        time.sleep(0.1)  # held while the sampler runs (TensorFlow's ops release the GIL too)
        del block
        during = stages.mark("200 MiB allocated and freed")
        after = stages.mark("nothing")
        peaks = stages.peaks()
    finally:
        stages.close()
    for figures in (start, during, after):
        assert figures["anon_peak"] >= figures["anon"] > 0  # the end is inside the stage
        assert abs(figures["rss"] - figures["anon"] - figures["file"]) < 2
    assert during["anon_peak"] - during["anon"] >= 190  # the freed block is in this peak
    assert after["anon_peak"] - after["anon"] < 16  # ...and not in the next stage's
    if stages.per_stage:
        assert during["rss_peak"] - during["rss"] >= 190
        assert after["rss_peak"] - after["rss"] < 16
    assert peaks["anon"] >= during["anon_peak"] and peaks["rss"] >= during["rss_peak"]
    assert peaks["rss"] >= peaks["anon"]
    lines = dict(stages.lines())
    assert list(lines) == ["start", "200 MiB allocated and freed", "nothing"]
    assert lines["200 MiB allocated and freed"].startswith(
        f"peak anonymous {during['anon_peak']:.0f} MiB (RSS ")


def test_peak_text_puts_anonymous_memory_first():
    assert peak_text(774.2, 896.7) == "peak anonymous memory 774 MiB (RSS 897 MiB)"
    assert peak_text(1234.0, 1500.4) == "peak anonymous memory 1,234 MiB (RSS 1,500 MiB)"


@linux_only
def test_the_sampler_keeps_the_largest_reading_of_each_window():
    with MemorySampler(interval=0.002) as sampler:
        sampler.take()
        block = np.ones(100 * _MIB // 4, np.float32)
        time.sleep(0.05)
        del block
        time.sleep(0.05)  # readings of after the free, so none in flight still holds the block
        window = sampler.take()
        now = sampler.read()
        assert window["anon"] - now["anon"] >= 90
        assert sampler.peak()["anon"] - now["anon"] < 16  # a new window started at take()
    with pytest.raises(ValueError, match="interval"):
        MemorySampler(interval=0)


@linux_only
def test_a_commands_peak_counts_the_processes_it_starts():
    allocate = (f"{shlex.quote(sys.executable)} -c 'import numpy, time; "
                f"block = numpy.ones({100 * _MIB // 4}, numpy.float32); time.sleep(0.3)'")
    # "; true": bash runs python as its child instead of replacing itself with it.
    seconds, peak, cpu = run_measured(["bash", "-c", allocate + "; true"], dict(os.environ))
    assert peak["anon"] >= 100  # python's block, though the child is bash
    assert peak["rss"] >= peak["anon"]
    assert seconds >= 0.3 and cpu > 0
    with pytest.raises(RuntimeError, match="failed"):
        run_measured(["bash", "-c", "exit 3"], dict(os.environ))


def test_tensorflow_allocator_names_one_of_three():
    assert tensorflow_allocator() in ("onednn-pool", "onednn-system", "system")


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
     ["memory import tensorflow + keras (the floor): peak anonymous",
      "allocator of large tensors: ", "batch 1 bound", "batch 1, embedders' path bound",
      "batch 2 back-to-back tokens/s (3 calls in a row)",
      "peak memory of the model (loading and calls, probes excluded): peak anonymous memory ",
      "peak memory: peak anonymous memory "]),
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
    for name in ("batch 1", "batch 1, embedders' path"):
        calls = lines[f"{name} tokens/s"]  # "<median> tokens/s (median of 6, range lo..hi, ..."
        assert "(median of 6," in calls
        low, high = (float(v) for v in calls.split("range ")[1].split(",")[0].split(".."))
        ratios = lines[f"ours / fastest peer, {name}"].split(" (round by round)")[0]
        ratios = [float(r.rstrip("x")) for r in ratios.split(" / ")]
        assert len(ratios) == 2  # one per round: the median of its 3 calls over the peer's 1.0
        assert all(low - 0.1 <= r <= high + 0.1 for r in ratios), (ratios, calls)
