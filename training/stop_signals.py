"""`StopSignals`: SIGINT and SIGTERM ask a training run to stop cleanly after its step.

Schedulers, `timeout` and Ctrl-C stop a process with a signal. Inside `with StopSignals()`
the first SIGINT or SIGTERM only records itself (`signum`); the training loop checks it
after every step, then saves a checkpoint and weights.hdf5 and exits non-zero with a line
saying how to resume. A second signal raises `KeyboardInterrupt` at once (abandon the step;
the last checkpoint stays). Handlers are installed only in the main thread and the previous
ones are restored on exit.

Example:
>>> with StopSignals() as signals:  # doctest: +SKIP
...     for batch in dataset:
...         step(batch)
...         if signals.signum is not None:
...             break
"""

import signal
import threading

#: The signals that request a clean stop.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopSignals:
    """Records the first SIGINT/SIGTERM (`signum`, `name`) instead of dying at once."""

    def __init__(self):
        self.signum = None
        self._previous = {}

    @property
    def name(self):
        """`"SIGTERM"` / `"SIGINT"` of the recorded signal, or None."""
        return None if self.signum is None else signal.Signals(self.signum).name

    def _handle(self, signum, frame):  # noqa: ARG002 - the signal module's signature
        if self.signum is not None:
            raise KeyboardInterrupt(signal.Signals(signum).name)  # the second: abandon the step
        self.signum = signum

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc_info):
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous = {}
