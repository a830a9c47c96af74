"""`ProgressLog`: the training progress line and its TensorBoard scalars.

Every `log_every` steps one line, e.g.

    step 1200 | epoch 1 | loss 4.8123 | ppl 123.0 | 2,410 tok/s | lr 0.2 | 0:05:12 | 26% of --max-minutes, ETA 0:14:48

(rewritten in place on a terminal, one line each otherwise), and the same figures as
TensorBoard scalars: `loss`, `perplexity`, `forward_loss`, `backward_loss`, `tokens_per_second`,
`learning_rate`, `gradient_norm`. `loss` is the training objective of the interval
(`0.5 * (forward + backward)` mean NLL per target token); with the sampled softmax it is the
sampled estimate, so its `perplexity = exp(loss)` is only indicative: `keras-elmo
perplexity` gives the exact full-softmax figure. `tokens` count every sentence position,
`<S>` and `</S>` included. With a `RunPlan` the line ends with the share done of the limit
reached first and the time left to it. `heldout(step, result)` writes a held-out perplexity
line and the scalars `heldout_forward_perplexity`, `heldout_backward_perplexity`,
`heldout_perplexity`.
A storage fault of the TensorBoard file (full, quota, read-only) stops the run as any write
does: one `StorageError` line naming the logs folder.

Example:
>>> log = ProgressLog(log_every=100, logs_dir=None)
>>> log.update(step=1, epoch=0, sums={"forward": 9.2, "backward": 9.0, "count": 4.0},
...            tokens=6, learning_rate=0.2, gradient_norm=1.0)
"""

import math
import sys
import time

from keras_elmo.process.progress import format_clock
from keras_elmo.process.storage_errors import storage_guard


class ProgressLog:
    """Accumulates step results and reports them every `log_every` steps.

    Args:
        log_every: int, steps between reports.
        logs_dir: str or None, TensorBoard directory (None: no scalars).
        stream: text stream of the progress line (stdout).
        plan: optional `RunPlan` (percentage and ETA on each line).
    """

    def __init__(self, log_every=50, logs_dir=None, stream=None, plan=None):
        self.log_every = max(1, int(log_every))
        self.stream = stream or sys.stdout
        self.writer = None
        self.logs_dir = logs_dir
        if logs_dir:
            import tensorflow as tf

            with self._guard():
                self.writer = tf.summary.create_file_writer(logs_dir)
        self.start = time.monotonic()
        self.plan = plan
        self.epoch, self.epoch_tokens, self.run_tokens = None, 0, 0
        self._reset()
        self.last = None
        self.history = []  # every report's figures, in order

    def _reset(self):
        self.forward = self.backward = self.count = 0.0
        self.tokens = 0
        self.norm = 0.0
        self.steps = 0
        self.interval_start = time.monotonic()

    def update(self, step, epoch, sums, tokens, learning_rate, gradient_norm):
        """Adds one step's summed NLLs, token count, etc.; reports on multiples of log_every."""
        self.forward += float(sums["forward"])
        self.backward += float(sums["backward"])
        self.count += float(sums["count"])
        self.tokens += int(tokens)
        self.norm += float(gradient_norm)
        self.steps += 1
        if epoch != self.epoch:
            self.epoch, self.epoch_tokens = epoch, 0
        self.epoch_tokens += int(tokens)
        self.run_tokens += int(tokens)
        if step % self.log_every == 0:
            self.report(step, epoch, learning_rate)

    def report(self, step, epoch, learning_rate, final=False):
        """Writes the line and the scalars of the steps since the last report."""
        if not self.steps:
            return self.last
        seconds = max(time.monotonic() - self.interval_start, 1e-9)
        count = max(self.count, 1.0)
        forward, backward = self.forward / count, self.backward / count
        loss = 0.5 * (forward + backward)
        figures = {"loss": loss, "perplexity": math.exp(min(loss, 700.0)),
                   "forward_loss": forward, "backward_loss": backward,
                   "tokens_per_second": self.tokens / seconds,
                   "learning_rate": float(learning_rate),
                   "gradient_norm": self.norm / self.steps}
        line = (f"step {step} | epoch {epoch + 1} | loss {loss:.4f} | "
                f"ppl {figures['perplexity']:.1f} | {figures['tokens_per_second']:,.0f} tok/s | "
                f"lr {figures['learning_rate']:g} | {format_clock(time.monotonic() - self.start)}")
        if self.plan is not None and not final:
            where = self.plan.describe(step, epoch, self.epoch_tokens, self.run_tokens,
                                       time.monotonic() - self.start)
            line += f" | {where}" if where else ""
        tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.stream.write(("\r" + line + " " * 4) if tty and not final else line + "\n")
        self.stream.flush()
        self._scalars(step, figures)
        self.last = dict(figures, step=step)
        self.history.append(self.last)
        self._reset()
        return self.last

    def heldout(self, step, result, seconds=0.0):
        """Writes a held-out line and scalars from `keras_elmo.evaluation.perplexity.evaluate`;
        the `seconds` it took are left out of the next line's tokens/s. The line ends with
        the run's clock (`| 0:05:02`, evaluations included), as progress lines do."""
        self.interval_start += seconds
        tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.stream.write(("\n" if tty else "") + f"step {step} | held-out perplexity: "
                          f"forward {result['forward']:.1f} | backward {result['backward']:.1f}"
                          f" | average {result['average']:.1f} ({result['sentences']:,} "
                          f"sentences) | {format_clock(time.monotonic() - self.start)}\n")
        self.stream.flush()
        self._scalars(step, {"heldout_forward_perplexity": result["forward"],
                             "heldout_backward_perplexity": result["backward"],
                             "heldout_perplexity": result["average"]})

    def _scalars(self, step, figures):
        if self.writer is None:
            return
        import tensorflow as tf

        with self._guard(), self.writer.as_default(step=step):
            for name, value in figures.items():
                # = tf.summary.scalar, which needs the tensorboard package
                tf.summary.write(name, tf.constant(value, tf.float32),
                                 metadata=_scalar_metadata())
            self.writer.flush()

    def close(self):
        if self.writer is not None:
            with self._guard():
                self.writer.close()

    def _guard(self):
        return storage_guard(self.logs_dir, "the TensorBoard logs")


def _scalar_metadata():
    """Summary metadata that marks a value for TensorBoard's scalars dashboard."""
    import tensorflow as tf

    metadata = tf.compat.v1.SummaryMetadata
    return metadata(plugin_data=metadata.PluginData(plugin_name="scalars"))
