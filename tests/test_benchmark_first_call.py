"""The first-call benchmark (`benchmarks/first_call.py`) at a tiny size under all three
backends, every part: each figure it prints is there, and positive where it must be."""

import os
import re
import subprocess
import sys

import pytest

from test_benchmark_backends import figure

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO, "benchmarks", "first_call.py")
BACKENDS = ("tensorflow", "jax", "torch")
BATCH = 2

pytestmark = pytest.mark.slow



@pytest.fixture(scope="module")
def stdout(tmp_path_factory):
    for backend in BACKENDS:
        pytest.importorskip(backend)
    # 14 processes (a tiny model each, the driver and the model writer among them): about
    # 80-100 s on 2 quiet cores; the generous timeout is for a machine shared with others.
    done = subprocess.run(
        [sys.executable, SCRIPT, "--config", "tiny", "--rounds", "1", "--calls", "2",
         "--sentences", "8", "--singles", "2", "--batch-sizes", str(BATCH), "--matmul-size",
         "256", "--model-dir", str(tmp_path_factory.mktemp("model"))],
        capture_output=True, text=True, timeout=1800, cwd=REPO)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]
    return done.stdout


def test_the_machine_is_described(stdout):
    assert re.search(r"^cpu model: \S", stdout, re.MULTILINE), stdout
    assert re.search(r"^load before: [0-9.]+ ", stdout, re.MULTILINE), stdout
    assert figure(stdout, "matmul 256^3 float32 (same run, between the processes)") > 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_first_call_stages(stdout, backend):
    prefix = f"{backend} batch {BATCH}"
    for stage in ("import keras s", "build BiLM s", "first call s", "warm call s"):
        assert figure(stdout, f"{prefix} {stage}") > 0
    for stage in ("import keras_elmo s", "build ElmoLayer s", "batch_to_ids s"):
        assert figure(stdout, f"{prefix} {stage}") >= 0
    gap = figure(stdout, f"{prefix} first minus warm s")
    assert gap == pytest.approx(figure(stdout, f"{prefix} first call s") -
                                figure(stdout, f"{prefix} warm call s"), abs=2e-3)
    figure(stdout, f"target {prefix} first minus warm <= 1.0 s")


def test_the_jax_first_call_parts_cache_and_options(stdout):
    prefix = f"jax batch {BATCH}"
    for part in ("trace", "lower", "compile"):
        assert figure(stdout, f"{prefix} first call {part} s") > 0
    assert figure(stdout, f"{prefix} first call functions compiled") >= 1
    figure(stdout, f"{prefix} first call rest (run, host work) s")
    for process in ("first", "second"):
        assert figure(stdout, f"{prefix} cache {process} process first call s") > 0
    assert figure(stdout, f"{prefix} cache second process first call cache read s") > 0
    figure(stdout, f"{prefix} second process gain from the cache s")
    for variant in ("default", "level 1"):
        assert figure(stdout, f"jax opt batch {BATCH} {variant} compile s") > 0
        assert figure(stdout, f"jax opt batch {BATCH} {variant} warm call s") > 0
    for what in ("compile", "warm call"):
        assert figure(stdout, f"jax opt batch {BATCH} level 1 / default {what}") > 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_stream_and_embed(stdout, backend):
    assert figure(stdout, f"{backend} stream s") > 0
    assert figure(stdout, f"{backend} stream first call s") > 0
    assert figure(stdout, f"{backend} stream calls") == 1 + 2  # one batch of 8, two singles
    for name in ("embed s", "embed peak anonymous MiB", "embed peak RSS MiB"):
        assert figure(stdout, f"{backend} {name}") > 0
    if backend != "tensorflow":
        assert figure(stdout, f"stream {backend} / tensorflow") > 0
        for kind in ("anonymous", "RSS"):
            assert figure(stdout, f"embed {backend} / tensorflow, peak {kind}") > 0
