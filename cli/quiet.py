"""The command line's TensorFlow import: no native start-up noise, no unused extras.

Loading TensorFlow's C++ runtime writes a few lines to file descriptor 2 that no Python
setting (`TF_CPP_MIN_LOG_LEVEL` included) removes, e.g.

    WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
    I0000 00:00:1795451024.523114 3125 cudart_stub.cc:31] Could not find cuda drivers ...

`import_tensorflow()` imports TensorFlow with exactly those lines held back and everything
else passed through; after the import, stderr is the terminal or file it was, untouched.
Then it hands back the library pages the import touched and a biLM never reads again
(`keras_elmo.process.library_pages`: a quarter of a published-size embed's peak memory).
During the import, `IPython`, `matplotlib`, `PIL` and `scipy` look absent: Keras imports the
first three when they are installed (for notebook display, image galleries and image files,
which no command uses), TensorFlow's legacy Keras 2 code scipy (for sparse arrays given to
its `fit`); each import is optional there. IPython and matplotlib were 0.4-0.6 s of every
command's start-up (measured: `import tensorflow` 2.07-2.18 s with them, 1.56-1.77 s
without), PIL and scipy another 0.2 s (`import tensorflow, keras` 1.74-1.89 -> 1.57-1.68 s;
`requests`, which TensorFlow imports unconditionally, cannot be left out). They stay
importable afterwards; only the command's process is concerned.
Every subcommand that needs TensorFlow calls it once its own argument checks have passed
(so that a bad argument is one line and no TensorFlow start-up). `KERAS_ELMO_TF_STARTUP_LOG=1`
turns the filter off.

Example:
>>> tf = import_tensorflow()  # doctest: +SKIP
"""

import contextlib
import importlib
import os
import re
import sys
import threading

from keras_elmo.process.library_pages import release_library_pages

#: Lines written by TensorFlow's native runtime while it loads.
NOISE = re.compile(
    r"WARNING: All log messages before absl::InitializeLog\(\) is called are written to "
    r"STDERR"
    r"|[IWE]\d{4} [\d:.]+\s+\d+ (cudart_stub|cpu_feature_guard|cuda_executor|cuda_platform|"
    r"cuda_diagnostics|cuda_dnn|cuda_fft|cuda_blas|port)\.cc:\d+\] .*"
    r"|To enable the following instructions: .*rebuild TensorFlow with the appropriate "
    r"compiler flags\.")
_ENVIRONMENT_SWITCH = "KERAS_ELMO_TF_STARTUP_LOG"
#: Packages Keras imports if present and no command uses (see the module docstring).
UNUSED_EXTRAS = ("IPython", "matplotlib", "PIL", "scipy")


def import_tensorflow():
    """Imports TensorFlow (once) with its native start-up lines filtered, then releases the
    library pages it touched (`release_library_pages`); returns the module."""
    if "tensorflow" in sys.modules:
        return importlib.import_module("tensorflow")
    with _without(UNUSED_EXTRAS):
        if os.environ.get(_ENVIRONMENT_SWITCH):
            tf = importlib.import_module("tensorflow")
        else:
            with _filtered_fd2():
                tf = importlib.import_module("tensorflow")
    release_library_pages()
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
