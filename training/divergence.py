"""Divergence checks of a training run: a non-finite loss, gradient norm or weight stops it.

A diverged run (a learning rate far too high, an overflow) must never overwrite a good
state: the trainer checks every step's loss and gradient norm (`check_step`), and the
weights before every checkpoint (`check_weights`), and stops at once with
`TrainingDivergedError`, a one-line `ValueError` naming the step. Nothing of the diverged
step is saved, so the newest checkpoint is the last finite one and weights.hdf5 is not
written (`keras_elmo.formats.weight_file.save_bilm_weights` refuses non-finite arrays as well).

Example:
>>> check_step(12, {"forward": 30.0, "backward": 31.0, "count": 10.0}, 2.5)  # fine
>>> check_step(13, {"forward": float("nan"), "backward": 31.0, "count": 10.0}, 2.5)
Traceback (most recent call last):
...
keras_elmo.training.divergence.TrainingDivergedError: training diverged at step 13: loss nan, gradient norm 2.5 (expected finite values).
"""

import math

import tensorflow as tf


class TrainingDivergedError(ValueError):
    """The loss, the gradient norm or a weight of a training run is NaN or infinite."""


def check_step(step, sums, norm):
    """Raises `TrainingDivergedError` when a step's loss or gradient norm is not finite.

    Args:
        step: int, the global step just taken (1-based).
        sums: dict with `forward`, `backward` (summed NLL) and `count` (targets), numbers
            or scalar tensors of the whole global batch.
        norm: the global gradient norm before clipping.
    """
    count = max(float(sums["count"]), 1.0)
    loss = 0.5 * (float(sums["forward"]) + float(sums["backward"])) / count
    norm = float(norm)
    if not (math.isfinite(loss) and math.isfinite(norm)):
        raise TrainingDivergedError(f"training diverged at step {step}: loss {loss:.6g}, "
                                    f"gradient norm {norm:.6g} (expected finite values).")


def non_finite_variables(variables):
    """`[(name, count)]` of the float variables holding NaN or infinite values, in order.

    Counted where the variables live (no copy of the weights to the host).
    """
    found = []
    for variable in variables:
        if not tf.as_dtype(variable.dtype).is_floating:
            continue
        finite = tf.math.count_nonzero(tf.math.is_finite(variable), dtype=tf.int64)
        bad = int(tf.size(variable, out_type=tf.int64) - finite)
        if bad:
            found.append((getattr(variable, "path", None) or variable.name, bad))
    return found


def check_weights(step, variables):
    """Raises `TrainingDivergedError` when a weight is not finite after `step`."""
    found = non_finite_variables(variables)
    if found:
        name, bad = found[0]
        more = f" (and {len(found) - 1} more variables)" if len(found) > 1 else ""
        raise TrainingDivergedError(f"training diverged at step {step}: weight {name} holds "
                                    f"{bad} non-finite values{more}.")
