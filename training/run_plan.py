"""`RunPlan`: where a training run stops, and how far along it is (percentage and ETA).

A run stops at the first of three limits: `n_epochs` epochs, `--max-steps` (a global step)
or `--max-minutes` (of this run). The progress line shows the share done of the limit that
will be reached first, and the time left to it, estimated from this run's own pace:

    step 1200 | epoch 1 | loss 4.81 | ... | 0:05:12 | 26% of --max-minutes, ETA 0:14:48

The epoch limit is estimated from tokens: the corpus holds `n_train_tokens` tokens
(`<S>`/`</S>` not counted), the steps report how many positions they consumed (boundaries
included), so an epoch's share is an estimate (shown with `~`) until the epoch ends.

Example:
>>> plan = RunPlan(start_step=0, max_steps=1000, max_minutes=None, n_epochs=10,
...                n_train_tokens=1_000_000)
>>> plan.describe(step=250, epoch=0, epoch_tokens=60_000, run_tokens=60_000, seconds=30.0)
'25% of --max-steps, ETA 0:01:30'
"""

from keras_elmo.process.progress import format_clock


class RunPlan:
    """The limits of one run and its progress towards the first of them.

    Args:
        start_step: int, the global step the run started (resumed) at.
        max_steps: int or None, the global step to stop at.
        max_minutes: float or None, minutes of this run.
        n_epochs: int, epochs in all (counted over resumed runs too).
        n_train_tokens: int or None, tokens of one epoch's corpus (0/None: no epoch estimate).
    """

    def __init__(self, start_step, max_steps, max_minutes, n_epochs, n_train_tokens):
        self.start_step = int(start_step)
        self.max_steps = max_steps
        self.max_minutes = max_minutes
        self.n_epochs = int(n_epochs)
        self.n_train_tokens = int(n_train_tokens or 0)

    def estimates(self, step, epoch, epoch_tokens, run_tokens, seconds):
        """`{limit: (fraction done, seconds left)}` of each limit that can be estimated."""
        found = {}
        if self.max_minutes is not None:
            total = 60.0 * self.max_minutes
            found["--max-minutes"] = (min(seconds / total, 1.0), max(total - seconds, 0.0))
        steps_done = step - self.start_step
        if self.max_steps is not None and steps_done > 0:
            left = max(self.max_steps - step, 0)
            found["--max-steps"] = (min(step / self.max_steps, 1.0),
                                    left * seconds / steps_done)
        if self.n_train_tokens and run_tokens > 0 and self.n_epochs > 0:
            in_epoch = min(epoch_tokens / self.n_train_tokens, 0.99)
            done = (epoch + in_epoch) / self.n_epochs
            left_tokens = (self.n_epochs - epoch - in_epoch) * self.n_train_tokens
            found["epochs"] = (min(done, 1.0), left_tokens * seconds / run_tokens)
        return found

    def fraction_done(self, step, epoch, epoch_tokens, seconds):
        """Share of the run done, in [0, 1], towards the limit it is nearest to.

        The largest of: `step / max_steps`; `seconds` of this run over `max_minutes`; and
        `(epoch + epoch_tokens / n_train_tokens) / n_epochs` (the share of an epoch capped
        at 0.99 until it ends). A learning-rate schedule reads it. The step share is the
        same in a resumed run; the minutes are this run's; `epoch_tokens` counts the
        tokens this run has seen of its current epoch (a run resumed mid-epoch starts that
        count at 0, so an epoch-limited schedule lags by what came before the resume).
        """
        shares = [0.0]
        if self.max_steps:
            shares.append(step / self.max_steps)
        if self.max_minutes:
            shares.append(seconds / (60.0 * self.max_minutes))
        if self.n_train_tokens and self.n_epochs > 0:
            in_epoch = min(epoch_tokens / self.n_train_tokens, 0.99)
            shares.append((epoch + in_epoch) / self.n_epochs)
        return min(max(shares), 1.0)

    def describe(self, step, epoch, epoch_tokens, run_tokens, seconds):
        """`"26% of --max-minutes, ETA 0:14:48"` for the limit reached first ("" if none)."""
        found = self.estimates(step, epoch, epoch_tokens, run_tokens, seconds)
        if not found:
            return ""
        limit, (fraction, left) = min(found.items(), key=lambda item: item[1][1])
        share = f"~{fraction:.0%} of {self.n_epochs} epoch(s)" if limit == "epochs" else \
            f"{fraction:.0%} of {limit}"
        return f"{share}, ETA {format_clock(left)}"
