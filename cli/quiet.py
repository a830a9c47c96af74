"""No native start-up noise from TensorFlow on the command line's stderr.

Loading TensorFlow's C++ runtime writes a few lines to file descriptor 2 that no Python
setting (`TF_CPP_MIN_LOG_LEVEL` included) removes, e.g.

    WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
    I0000 00:00:1795451024.523114 3125 cudart_stub.cc:31] Could not find cuda drivers ...

`quiet_native_startup()` holds back exactly those lines while `import tensorflow` runs (the
first time any command needs it) and passes everything else through; after the import,
stderr is the terminal or file it was, untouched. `KERAS_ELMO_TF_STARTUP_LOG=1` turns the
filter off.

Example:
>>> with quiet_native_startup():  # doctest: +SKIP
...     run_a_command_that_imports_tensorflow()
"""

import contextlib
import os
import re
import sys
import threading

from keras_elmo.first_import import around_first_import, remove_hook

#: Lines written by TensorFlow's native runtime while it loads.
NOISE = re.compile(
    r"WARNING: All log messages before absl::InitializeLog\(\) is called are written to "
    r"STDERR"
    r"|[IWE]\d{4} [\d:.]+\s+\d+ (cudart_stub|cpu_feature_guard|cuda_executor|cuda_platform|"
    r"cuda_diagnostics|cuda_dnn|cuda_fft|cuda_blas|port)\.cc:\d+\] .*"
    r"|To enable the following instructions: .*rebuild TensorFlow with the appropriate "
    r"compiler flags\.")
_ENVIRONMENT_SWITCH = "KERAS_ELMO_TF_STARTUP_LOG"


@contextlib.contextmanager
def quiet_native_startup():
    """While active, the first `import tensorflow` runs with its start-up lines filtered."""
    if os.environ.get(_ENVIRONMENT_SWITCH) or "tensorflow" in sys.modules:
        yield
        return
    hook = around_first_import("tensorflow", _filtered_fd2)
    try:
        yield
    finally:
        remove_hook(hook)


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
