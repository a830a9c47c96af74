"""The backend benchmarks at a tiny size: the GPU script (`benchmarks/backend_gpu.py`) on CPU
under JAX and PyTorch, without TensorFlow, and the CPU driver (`benchmarks/backends.py`)
over all three backends with a peer; each figure they print is there and positive."""

import ast
import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHMARKS = os.path.join(REPO, "benchmarks")

pytestmark = pytest.mark.slow

#: A figure's line: `name: <number> ...` (a difference may be negative).
_FIGURE = r"^{}: (-?[0-9][0-9,]*\.?[0-9]*)"


def figure(stdout, name):
    """The number that starts `name`'s line in `stdout` (fails the test when absent)."""
    found = re.search(_FIGURE.format(re.escape(name)), stdout, re.MULTILINE)
    assert found, f"no line {name!r} in:\n{stdout}"
    return float(found.group(1).replace(",", ""))


def run(command, backend=None, timeout=240):
    env = dict(os.environ)
    if backend:
        env["KERAS_BACKEND"] = backend
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=REPO)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def test_the_gpu_script_imports_nothing_from_the_benchmarks_and_no_tensorflow():
    with open(os.path.join(BENCHMARKS, "backend_gpu.py"), encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    siblings = {name[:-3] for name in os.listdir(BENCHMARKS) if name.endswith(".py")}
    imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module}
    assert not imported & (siblings | {"tensorflow", "tf_keras"}), imported


# JAX compiles each TF32 setting and batch size anew: one of each keeps it short. PyTorch
# runs both settings and looks for AllenNLP's modules (in an empty folder: a skip line).
@pytest.mark.parametrize("backend, settings, peer", [
    ("jax", ["on"], ["--no-allennlp"]),
    ("torch", ["off", "on"], ["--allennlp-path", "EMPTY"]),
], ids=["jax", "torch"])
def test_the_gpu_script_runs_tiny_on_cpu(backend, settings, peer, tmp_path):
    pytest.importorskip(backend)
    stdout = run([sys.executable, os.path.join(BENCHMARKS, "backend_gpu.py"), "--tiny",
                  "--calls", "1", "--steps", "1", "--warmup", "1", "--batch-sizes", "8",
                  "--train-batch-size", "8", "--tf32", *settings,
                  *[str(tmp_path) if arg == "EMPTY" else arg for arg in peer]], backend)
    assert re.search(r"^device: cpu \(", stdout, re.MULTILINE), stdout
    assert f"backend: {backend} " in stdout
    for setting in settings:
        prefix = f"tf32 {setting}"
        setting_line = re.search(rf"^{prefix}, setting: (.*)$", stdout, re.MULTILINE).group(1)
        assert setting_line.startswith(setting)
        assert ("jax_default_matmul_precision=" in setting_line if backend == "jax" else
                f"allow_tf32={setting == 'on'}, torch.backends.cudnn.allow_tf32="
                f"{setting == 'on'}" in setting_line)
        assert figure(stdout, f"{prefix}, inference batch 8 tokens/s") > 0
        assert figure(stdout, f"{prefix}, matmul 256^3 float32") > 0
        for bilm in ("frozen", "trainable"):
            assert figure(stdout, f"{prefix}, fine-tuning, {bilm} biLM, batch 8 tokens/s") > 0
    assert "tensorflow in this process: no" in stdout  # as on a machine without it
    if "--allennlp-path" in peer:  # AllenNLP beside where its modules import, else one line
        assert ("allennlp: skipped: its modules do not import here" in stdout or
                figure(stdout, "allennlp, tf32 off, inference batch 8 tokens/s") > 0), stdout


def test_the_cpu_driver_compares_every_backend_with_a_peer():
    for backend in ("jax", "torch"):
        pytest.importorskip(backend)
    stdout = run([sys.executable, os.path.join(BENCHMARKS, "backends.py"), "--config", "tiny",
                  "--rounds", "1", "--calls", "2", "--batch-sizes", "2", "1",
                  "--matmul-size", "256",
                  "--peer", "echo=echo 'b1=10.0 b2=50.0 peak_rss_MB=100'"], timeout=300)
    assert re.search(r"^load before: .* model: ", stdout, re.MULTILINE), stdout
    for backend in ("tensorflow", "jax", "torch"):
        for b in (2, 1):
            assert figure(stdout, f"{backend} batch {b} tokens/s") > 0
            assert re.search(rf"^ours / fastest peer, {backend} batch {b}: [0-9.]+x "
                             r"\(round by round\)$", stdout, re.MULTILINE), stdout
        assert figure(stdout, f"{backend} matmul 256^3 float32 GFLOP/s") > 0
        assert figure(stdout, f"{backend} peak anonymous memory of the model MiB") > 0
        assert f"  [{backend}] memory import keras + keras_elmo (the floor): peak anonymous" \
            in stdout
    for backend in ("jax", "torch"):
        assert re.search(rf"^{backend} / tensorflow, batch 2: [0-9.]+x", stdout, re.MULTILINE)
        assert f"{backend} imports tensorflow: no" in stdout
        assert re.search(rf"^target {backend} peak anonymous memory <= 1.2x tensorflow's: "
                         r"[0-9.]+x \((met|not met)\)$", stdout, re.MULTILINE), stdout
    assert figure(stdout, "peer echo batch 2") == 50.0
    assert figure(stdout, "peer echo peak RSS MiB") == 100
    assert re.search(r"^target jax >= 0.8x tensorflow, batch 1: [0-9.]+x \((met|not met)\)$",
                     stdout, re.MULTILINE), stdout
