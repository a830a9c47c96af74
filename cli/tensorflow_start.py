"""Importing TensorFlow as the `keras-elmo` command does: its CPU settings, no start-up noise.

`import_tensorflow()` is how the command line, the example scripts and the benchmarks start.
Its measures change the process (file descriptor 2 while TensorFlow loads, `sys.modules`,
the garbage collector), so they live here, with the command, and nothing a library user
imports reaches them:

- the thread layout and the oneDNN choice for a biLM (`keras_elmo.process.cpu_setup`), and
  `TF_CPP_MIN_LOG_LEVEL=3` (TensorFlow's C++ log lines: "failed call to cuInit" on a machine
  without a GPU, oneDNN's DT_BOOL fallback notice, ...), each unless the user set it;
- the few lines TensorFlow's native runtime writes to file descriptor 2 while it loads,
  which no Python setting (`TF_CPP_MIN_LOG_LEVEL` included) removes, e.g.

      WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
      I0000 00:00:1795451024.523114 3125 cudart_stub.cc:31] Could not find cuda drivers ...

  are held back, everything else passes through; after the import, stderr is the terminal or
  file it was, untouched (`KERAS_ELMO_TF_STARTUP_LOG=1` shows them);
- while it imports, `IPython`, `matplotlib`, `PIL` and `scipy` look absent: Keras imports the
  first three when they are installed (for notebook display, image galleries and image
  files), TensorFlow's legacy Keras 2 code scipy (for sparse arrays given to its `fit`), each
  import optional there and used by no command. Left out, they cost neither start-up time
  nor anonymous memory (docs/performance.md, "Start-up"); they stay importable afterwards;
- the objects the import made (TensorFlow's and Keras' modules, classes and functions:
  hundreds of thousands, and they live as long as the process) are moved out of the garbage
  collector's reach (`gc.freeze()`), so that no later collection walks them again: neither
  the full collections during a run nor the ones at the interpreter's shutdown, which
  otherwise cost a command most of a second (docs/performance.md, "Start-up").

Call it before anything imports TensorFlow. A program using the library calls
`keras_elmo.process.cpu_setup.set_cpu_defaults()` for the CPU settings alone.

Example:
>>> tf = import_tensorflow()  # doctest: +SKIP
"""

import contextlib
import gc
import importlib
import os
import re
import sys
import threading

from keras_elmo.process.cpu_setup import set_cpu_defaults

#: Lines written by TensorFlow's native runtime while it loads.
NOISE = re.compile(
    r"WARNING: All log messages before absl::InitializeLog\(\) is called are written to "
    r"STDERR"
    r"|[IWE]\d{4} [\d:.]+\s+\d+ (cudart_stub|cpu_feature_guard|cuda_executor|cuda_platform|"
    r"cuda_diagnostics|cuda_dnn|cuda_fft|cuda_blas|port)\.cc:\d+\] .*"
    r"|To enable the following instructions: .*rebuild TensorFlow with the appropriate "
    r"compiler flags\.")
_ENVIRONMENT_SWITCH = "KERAS_ELMO_TF_STARTUP_LOG"
#: Packages Keras imports if present and no command uses (module docstring).
UNUSED_EXTRAS = ("IPython", "matplotlib", "PIL", "scipy")


def set_start_defaults():
    """Sets the CPU settings (`set_cpu_defaults`) and `TF_CPP_MIN_LOG_LEVEL=3`, each unless
    the user set it; returns the CPU settings in effect. Has an effect only before
    TensorFlow starts."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    return set_cpu_defaults()


def import_tensorflow():
    """`set_start_defaults()`, then imports TensorFlow (once) with its native start-up lines
    filtered (module docstring); returns the module."""
    if "tensorflow" in sys.modules:
        return importlib.import_module("tensorflow")
    set_start_defaults()
    with _without(UNUSED_EXTRAS):
        if os.environ.get(_ENVIRONMENT_SWITCH):
            tf = importlib.import_module("tensorflow")
        else:
            with _filtered_fd2():
                tf = importlib.import_module("tensorflow")
    gc.freeze()  # the import's objects live as long as the process (module docstring)
    return tf


@contextlib.contextmanager
def _without(names):
    """Inside the block, importing a package of `names` not yet imported raises
    `ModuleNotFoundError`, as for a package not installed (Python's rule for a `None` entry
    in `sys.modules`); afterwards the entries are gone and it imports as usual."""
    absent = [name for name in names if name not in sys.modules]
    for name in absent:
        sys.modules[name] = None
    try:
        yield
    finally:
        for name in absent:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


@contextlib.contextmanager
def _filtered_fd2():
    """fd 2 goes through a pipe; lines matching `NOISE` are dropped, the rest forwarded."""
    sys.stderr.flush()
    saved = os.dup(2)
    read_fd, write_fd = os.pipe()
    os.dup2(write_fd, 2)
    os.close(write_fd)
    forwarder = threading.Thread(target=_forward, args=(read_fd, saved), daemon=True)
    forwarder.start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)  # the pipe's last write end closes: the forwarder sees EOF
        forwarder.join(timeout=10)
        os.close(saved)


def _forward(read_fd, target_fd):
    pending = b""
    with os.fdopen(read_fd, "rb", buffering=0) as pipe:
        for chunk in iter(lambda: pipe.read(65536), b""):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            kept = [line + b"\n" for line in lines
                    if not NOISE.fullmatch(line.decode("utf-8", "replace").strip())]
            if kept:
                os.write(target_fd, b"".join(kept))
    if pending and not NOISE.fullmatch(pending.decode("utf-8", "replace").strip()):
        os.write(target_fd, pending)
