"""keras-elmo on a GPU under JAX or PyTorch, without TensorFlow: inference and fine-tuning rates.

Runs where Keras 3 and keras-elmo are installed from wheels with JAX or PyTorch (CUDA) and no
TensorFlow: it imports nothing from this folder and never imports TensorFlow itself (the
line `tensorflow in this process` says whether anything else did). It builds the published
biLM (2x4096/512, `keras_elmo.BiLMOptions.published()`) with random weights (Keras'
initialisers, unseeded: `keras.utils.set_random_seed` would import TensorFlow wherever it
is installed) on the device the backend chose, and prints `name: value` lines:

- the device's name, the backend's and Keras' versions, and TF32: on PyTorch
  `torch.backends.cuda.matmul.allow_tf32` and `torch.backends.cudnn.allow_tf32`, both set
  off or on (`--tf32`); on JAX `jax_default_matmul_precision` (`float32` off,
  `tensorfloat32` on; left unset, JAX may use TF32 on NVIDIA GPUs since Ampere);
- the device's own float32 matmul rate (two `n x n` products per sample);
- inference tokens/s at `--batch-sizes` (32 and 128) of sentences of `--length` random
  tokens: the biLM's call, all layers, XLA-compiled on JAX (`jax.jit` of `stateless_call`),
  under `torch.no_grad()` on PyTorch;
- a fine-tuning step of a small tagger (`ElmoLayer` + `Dense`, Adam, sparse cross-entropy
  with the Keras mask) with the biLM frozen and with `trainable_bilm=True`: steps/s and
  tokens/s (`Model.train_on_batch`, XLA-compiled on JAX);
- the same with AllenNLP's `Elmo` on the same device, in a child process (PyTorch), when its
  modules import (`--allennlp-path PKGDIR` puts PKGDIR first on the child's `PYTHONPATH`);
  otherwise one line says it was skipped. It reads the weights our writer saved
  (`keras_elmo.save_published`), so both run the same model.

With `--tf32 off on` every figure is measured under each setting in turn. `--tiny` runs the
tests' tiny configuration, on CPU in seconds where there is no GPU (how the tests keep this
script from rotting); `benchmarks/backends.py` measures the CPU at the published size and
takes its model runners from this file. docs/performance.md, "Every Keras 3 backend", says
how to run it and what has been measured.

Example:
    KERAS_BACKEND=jax python backend_gpu.py --tf32 off on --allennlp-path PKGDIR
    KERAS_BACKEND=torch python backend_gpu.py --tf32 off on --allennlp-path PKGDIR
    KERAS_BACKEND=torch python backend_gpu.py --tiny            # CPU, seconds
"""

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

#: Backends this script runs (TensorFlow's figures: benchmarks/inference.py).
BACKENDS = ("jax", "torch")
TF32_SETTINGS = ("off", "on")
#: `jax_default_matmul_precision` for each TF32 setting.
JAX_PRECISION = {"off": "float32", "on": "tensorfloat32"}
#: Character lengths of English tokens (punctuation included), roughly as in running text:
#: the lengths and weights of benchmarks/inference.py, so the sentences are the same.
_TOKEN_LENGTHS = list(range(1, 14))
_LENGTH_WEIGHTS = [16, 17, 20, 15, 10, 8, 7, 4, 3, 2, 1, 0.6, 0.4]
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
#: Tags of the fine-tuned tagger (the Penn Treebank's 45).
NUM_TAGS = 45
_MIB = float(1 << 20)


def report(name, value):
    """Prints one `name: value` line (the format of every benchmark script)."""
    print(f"{name}: {value}", flush=True)


def format_samples(samples, unit, digits=1):
    """`"<median> <unit> (median of n, range lo..hi)"`."""
    return (f"{statistics.median(samples):.{digits}f} {unit} (median of {len(samples)}, range "
            f"{min(samples):.{digits}f}..{max(samples):.{digits}f})")


def random_sentences(batch_size, length, rng):
    """`batch_size` lists of `length` random tokens with realistic character lengths, drawn
    as benchmarks/inference.py draws them."""
    weights = [w / sum(_LENGTH_WEIGHTS) for w in _LENGTH_WEIGHTS]
    sizes = rng.choice(_TOKEN_LENGTHS, size=(batch_size, length), p=weights)
    return [["".join(rng.choice(list(_LETTERS), size=int(n))) for n in row] for row in sizes]


def batch_sentences(batch_sizes, length, seed=0):
    """`{batch size: sentences}`, drawn in `batch_sizes`' order from one seeded generator."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return {b: random_sentences(b, length, rng) for b in batch_sizes}


# --- the backend -----------------------------------------------------------------------------
def backend_name():
    """Keras' backend (`keras.backend.backend()`)."""
    import keras

    return keras.backend.backend()


def check_backend():
    """Raises `ValueError` unless Keras runs on JAX or PyTorch."""
    if backend_name() not in BACKENDS:
        raise ValueError(f"KERAS_BACKEND={backend_name()}: this benchmark runs "
                         f"{' or '.join(BACKENDS)} (set KERAS_BACKEND before Python starts); "
                         "benchmarks/inference.py measures TensorFlow.")


def device_name():
    """`"NAME (gpu)"` of the device the backend computes on, or `"cpu (MODEL)"`."""
    from keras_elmo.process.cpu_setup import cpu_model

    if backend_name() == "jax":
        import jax

        device = jax.devices()[0]
        if device.platform != "cpu":
            return f"{device.device_kind} ({device.platform}, {jax.device_count()} device(s))"
    elif backend_name() == "torch":
        import torch

        if torch.cuda.is_available():
            return f"{torch.cuda.get_device_name(0)} (cuda, {torch.cuda.device_count()} " \
                   "device(s))"
    return f"cpu ({cpu_model()}, {os.cpu_count()} cores)"


def versions():
    """`"jax 0.x, keras 3.x, keras-elmo 0.x"` (or torch's)."""
    import keras

    import keras_elmo

    backend = __import__(backend_name())
    return (f"{backend_name()} {backend.__version__}, keras {keras.__version__}, "
            f"keras-elmo {keras_elmo.__version__}")


def set_tf32(setting):
    """Sets TF32 `"off"` or `"on"` for the products that follow; returns a context manager
    (JAX's precision applies while it is open) and a line saying what is in effect."""
    if backend_name() == "jax":
        import jax

        precision = JAX_PRECISION[setting]
        return jax.default_matmul_precision(precision), \
            f"{setting} (jax_default_matmul_precision={precision})"
    import torch

    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = setting == "on"
    return contextlib.nullcontext(), torch_tf32_line(setting)


def torch_tf32_line(setting):
    """What PyTorch's two TF32 switches are now."""
    import torch

    return (f"{setting} (torch.backends.cuda.matmul.allow_tf32="
            f"{torch.backends.cuda.matmul.allow_tf32}, torch.backends.cudnn.allow_tf32="
            f"{torch.backends.cudnn.allow_tf32})")


def synchronize(tensors):
    """Waits until the device has computed `tensors` (JAX and CUDA return early)."""
    if backend_name() == "jax":
        import jax

        jax.block_until_ready(tensors)
    elif backend_name() == "torch":
        import torch

        if torch.cuda.is_available():
            torch.cuda.synchronize()


def time_call(fn, *args):
    """Seconds one `fn(*args)` takes, the device's work included."""
    start = time.perf_counter()
    synchronize(fn(*args))
    return time.perf_counter() - start


def compiled_inference(bilm):
    """`char_ids -> layers` as each backend runs it fastest: `jax.jit` of the biLM's
    `stateless_call` on JAX (XLA-compiled; the weights passed in, not copied), the call under
    `torch.no_grad()` on PyTorch. `char_ids` is a backend tensor (`to_device`).

    Returns:
        a function of int32 `(batch, T, 50)` -> float32 `(batch, L + 1, T, 2P)`.
    """
    check_backend()
    if backend_name() == "jax":
        import jax

        call = jax.jit(lambda trainable, frozen, ids: bilm.stateless_call(
            trainable, frozen, ids, training=False)[0]["layers"])
        # The weights' values now (a fine-tuned or frozen biLM's lists differ), not copies.
        return lambda ids: call([v.value for v in bilm.trainable_variables],
                                [v.value for v in bilm.non_trainable_variables], ids)
    import torch

    def call(ids):
        with torch.no_grad():
            return bilm(ids, training=False)["layers"]

    return call


def to_device(array):
    """A numpy array as the backend's tensor on its device."""
    import keras

    return keras.ops.convert_to_tensor(array)


class MatmulProbe:
    """Two plain `n x n` float32 products per sample on the backend's device (JAX: one jitted
    function; PyTorch: under `no_grad`), each sample as many as fill `min_seconds`; the same
    interface as benchmarks/_common.py's TensorFlow `MatmulProbe` (`sample()`, `samples`).

    Example:
    >>> MatmulProbe(64, min_seconds=0.01).sample() > 0  # doctest: +SKIP
    True
    """

    def __init__(self, n, min_seconds=0.5, seed=0):
        import numpy as np

        check_backend()
        self.n, self.dtype = n, "float32"
        rng = np.random.default_rng(seed)
        a, b = (to_device(rng.standard_normal((n, n), dtype=np.float32)) for _ in range(2))
        if backend_name() == "jax":
            import jax

            products = jax.jit(lambda a, b: (a @ b, b @ a))
            self._run_once = lambda: products(a, b)
        else:
            import torch

            def run_once():
                with torch.no_grad():
                    return a @ b, b @ a

            self._run_once = run_once
        self.products_per_sample = 1
        time_call(self._run)  # warm-up: compile and first run
        once = min(time_call(self._run) for _ in range(2))
        self.products_per_sample = max(1, int(min_seconds / once + 0.999))
        self.samples = []

    @property
    def flops(self):
        """`2 * 2 n^3`: the multiply-adds of one call (two products)."""
        return 2 * 2.0 * self.n ** 3

    def _run(self):
        return [self._run_once() for _ in range(self.products_per_sample)]

    def sample(self):
        """Times one sample; records and returns its GFLOP/s."""
        rate = self.products_per_sample * self.flops / time_call(self._run) / 1e9
        self.samples.append(rate)
        return rate


def device_memory_peak():
    """The device's peak memory in MiB where the backend tells it (GPUs), else None."""
    if backend_name() == "torch":
        import torch

        if torch.cuda.is_available():
            return torch.cuda.max_memory_allocated() / _MIB
        return None
    import jax

    stats = jax.devices()[0].memory_stats() or {}
    return stats["peak_bytes_in_use"] / _MIB if "peak_bytes_in_use" in stats else None


# --- fine-tuning ---------------------------------------------------------------------------
def tagger(bilm, trainable_bilm):
    """`char ids -> tag probabilities`: `ElmoLayer(bilm)` + `Dense(NUM_TAGS)`, compiled with
    Adam and sparse cross-entropy (the Keras mask leaves padding out of the loss)."""
    import keras

    import keras_elmo

    char_ids = keras.Input(shape=(None, bilm.options.max_characters_per_token),
                           dtype="int32")
    vectors = keras_elmo.ElmoLayer(bilm, trainable_bilm=trainable_bilm)(char_ids)
    tags = keras.layers.Dense(NUM_TAGS, activation="softmax")(vectors)
    model = keras.Model(char_ids, tags)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    return model


def time_steps(step, warmup, steps):
    """Seconds of each of `steps` calls of `step()` after `warmup` untimed ones."""
    for _ in range(warmup):
        step()
    return [time_call(step) for _ in range(steps)]


# --- AllenNLP beside --------------------------------------------------------------------------
def allennlp_figures(args):
    """AllenNLP's `Elmo` (PyTorch) on the weights in `args.model_dir`, the same sentences,
    batch sizes and tagger: the lines `main` prints for ours, prefixed `allennlp`. Runs in a
    child process (`--allennlp-child`) that imports no Keras."""
    import numpy as np
    import torch
    from allennlp.modules.elmo import Elmo, batch_to_ids

    device = "cuda" if torch.cuda.is_available() else "cpu"
    cuda = device == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    files = [os.path.join(args.model_dir, name) for name in ("options.json", "weights.hdf5")]
    sentences = batch_sentences(sorted(set(args.batch_sizes + [args.train_batch_size])),
                                args.length)
    labels = np.random.default_rng(1).integers(0, NUM_TAGS, (args.train_batch_size,
                                                             args.length))
    for setting in args.tf32:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = \
            setting == "on"
        prefix = f"allennlp, tf32 {setting}"
        report(f"{prefix}, device", f"{torch.cuda.get_device_name(0) if cuda else 'cpu'}; "
               f"torch {torch.__version__}; tf32 {torch_tf32_line(setting)}")
        elmo = Elmo(*files, num_output_representations=1, dropout=0.0,
                    requires_grad=False).to(device)
        lstm = elmo._elmo_lstm._elmo_lstm  # noqa: SLF001  (its state, reset per batch)
        for b in args.batch_sizes:
            ids = batch_to_ids(sentences[b]).to(device)

            def infer():
                lstm.reset_states()  # independent batches, as ours
                with torch.no_grad():
                    elmo._elmo_lstm(ids)  # noqa: SLF001  (all layers, as ours)
                sync()

            seconds = time_steps(infer, args.warmup, args.calls)
            report(f"{prefix}, inference batch {b} tokens/s",
                   format_samples([b * args.length / s for s in seconds], "tokens/s"))
        for trainable in (False, True):
            if trainable:
                elmo = Elmo(*files, num_output_representations=1, dropout=0.0,
                            requires_grad=True).to(device)
                lstm = elmo._elmo_lstm._elmo_lstm  # noqa: SLF001
            head = torch.nn.Linear(elmo.get_output_dim(), NUM_TAGS).to(device)
            parameters = [p for p in [*elmo.parameters(), *head.parameters()]
                          if p.requires_grad]
            optimizer = torch.optim.Adam(parameters, lr=1e-3)
            ids = batch_to_ids(sentences[args.train_batch_size]).to(device)
            targets = torch.as_tensor(labels, device=device)

            def step():
                lstm.reset_states()
                out = elmo(ids)
                mask = out["mask"].bool()  # (batch, T)
                logits = head(out["elmo_representations"][0])  # (batch, T, NUM_TAGS)
                loss = torch.nn.functional.cross_entropy(logits[mask], targets[mask])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                sync()

            seconds = time_steps(step, args.warmup, args.steps)
            report_steps(f"{prefix}, fine-tuning, {'trainable' if trainable else 'frozen'} "
                         f"biLM, batch {args.train_batch_size}", seconds,
                         args.train_batch_size * args.length)
        if cuda:
            report(f"{prefix}, device memory peak",
                   f"{torch.cuda.max_memory_allocated() / _MIB:,.0f} MiB")


def report_steps(name, seconds, tokens):
    """Prints a fine-tuning figure: tokens/s, steps/s beside it."""
    report(f"{name} tokens/s", format_samples([tokens / s for s in seconds], "tokens/s") +
           f"; {statistics.median([1 / s for s in seconds]):.2f} steps/s")


def run_allennlp(args, argv):
    """Runs `allennlp_figures` in a child with `--allennlp-path` first on its path, or
    prints why it is skipped. The child's lines pass through."""
    env = dict(os.environ)
    if args.allennlp_path:
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (args.allennlp_path, env.get("PYTHONPATH")) if p)
    found = subprocess.run([sys.executable, "-c", "import torch, allennlp.modules.elmo"],
                           env=env, capture_output=True, text=True)
    if found.returncode != 0:
        report("allennlp", "skipped: its modules do not import here (" +
               (found.stderr.strip().splitlines() or ["?"])[-1] +
               "); --allennlp-path PKGDIR names the folder that holds allennlp/")
        return
    subprocess.run([sys.executable, os.path.abspath(__file__), *argv, "--allennlp-child",
                    "--model-dir", args.model_dir], env=env, check=True)


# --- the run -----------------------------------------------------------------------------------
def parse_args(argv):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], epilog="Example:" + __doc__.split("Example:")[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action="store_true",
                        help="the tests' tiny configuration (seconds on a CPU)")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[32, 128],
                        help="inference batch sizes (32 128)")
    parser.add_argument("--train-batch-size", type=int, default=32,
                        help="sentences per fine-tuning step (32)")
    parser.add_argument("--length", type=int, default=20, help="tokens per sentence (20)")
    parser.add_argument("--calls", type=int, default=10,
                        help="timed inference calls per batch size (10)")
    parser.add_argument("--steps", type=int, default=10,
                        help="timed fine-tuning steps of each tagger (10)")
    parser.add_argument("--warmup", type=int, default=2,
                        help="untimed calls and steps first, compilation included (2)")
    parser.add_argument("--tf32", nargs="+", choices=TF32_SETTINGS, default=["off"],
                        help="TF32 settings to measure under, in turn (off)")
    parser.add_argument("--matmul-size", type=int, default=None,
                        help="side of the matmul probe (default: 8192 on a GPU, 2048 on a "
                             "CPU, 256 with --tiny)")
    parser.add_argument("--allennlp-path", default=None, metavar="PKGDIR",
                        help="folder holding AllenNLP's allennlp/ package, put first on the "
                             "peer's PYTHONPATH (default: as installed, if at all)")
    parser.add_argument("--no-allennlp", action="store_true", help="ours only")
    parser.add_argument("--allennlp-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model-dir", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for name in ("length", "calls", "steps", "train_batch_size"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1; received "
                         f"{getattr(args, name)}")
    if min(args.batch_sizes) < 1 or args.warmup < 0:
        parser.error(f"--batch-sizes must be >= 1 and --warmup >= 0; received "
                     f"{args.batch_sizes}, {args.warmup}")
    return args


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    if args.allennlp_child:
        allennlp_figures(args)
        return 0
    # JAX would take 75% of the GPU's memory at its start: the AllenNLP child needs some.
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import numpy as np

    import keras_elmo

    try:
        check_backend()
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    options = (keras_elmo.BiLMOptions.tiny() if args.tiny
               else keras_elmo.BiLMOptions.published())
    device = device_name()
    report("backend", versions())
    report("device", device)
    report("config", f"{'tiny' if args.tiny else 'published'} ({options.num_layers}x"
           f"{options.lstm_units}/{options.projection_dim}, {options.num_filters} filters), "
           f"random weights, sentences of {args.length} tokens")
    n = args.matmul_size or (256 if args.tiny else 2048 if device.startswith("cpu") else 8192)
    bilm = keras_elmo.BiLM(options)
    model_dir = None if args.no_allennlp else tempfile.mkdtemp(prefix="keras-elmo-gpu-bench-")
    if model_dir:  # the weights AllenNLP reads: the same model
        keras_elmo.save_published(bilm, model_dir)
    sizes = sorted(set(args.batch_sizes + [args.train_batch_size]))
    ids = {b: keras_elmo.batch_to_ids(s) for b, s in batch_sentences(sizes, args.length).items()}
    labels = np.random.default_rng(1).integers(0, NUM_TAGS, (args.train_batch_size,
                                                             args.length))
    infer = compiled_inference(bilm)
    for setting in args.tf32:
        scope, line = set_tf32(setting)
        prefix = f"tf32 {setting}"
        report(f"{prefix}, setting", line)
        with scope:
            probe = MatmulProbe(n)
            for b in args.batch_sizes:
                x = to_device(ids[b])
                seconds = time_steps(lambda: infer(x), args.warmup, args.calls)
                probe.sample()
                report(f"{prefix}, inference batch {b} tokens/s",
                       format_samples([b * args.length / s for s in seconds], "tokens/s"))
            report(f"{prefix}, matmul {n}^3 float32", format_samples(probe.samples, "GFLOP/s"))
            for trainable in (False, True):
                model = tagger(bilm, trainable)
                x, y = to_device(ids[args.train_batch_size]), to_device(labels)
                seconds = time_steps(lambda: model.train_on_batch(x, y), args.warmup,
                                     args.steps)
                report_steps(f"{prefix}, fine-tuning, {'trainable' if trainable else 'frozen'} "
                             f"biLM, batch {args.train_batch_size}", seconds,
                             args.train_batch_size * args.length)
    peak = device_memory_peak()
    if peak is not None:
        report("device memory peak", f"{peak:,.0f} MiB")
    report("tensorflow in this process", "yes" if "tensorflow" in sys.modules else "no")
    if model_dir:
        del bilm, model, infer
        args.model_dir = model_dir
        try:
            run_allennlp(args, argv)
        finally:
            shutil.rmtree(model_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
