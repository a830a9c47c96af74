"""The JAX backend's functions (see `keras_elmo.backend`).

Keras compiles `fit`, `predict` and `evaluate` with `jax.jit`: inside, shapes may not
depend on values, so the char CNN encodes every position (`needs_static_shapes`), and ids
cannot be read, so their range is checked through `jax.debug.callback`.
"""

import jax
import jax.numpy as jnp

from keras_elmo.backend import portable
from keras_elmo.backend.portable import (LOOP_IMPLEMENTATIONS, kernel_product, read_variable,
                                         reverse_sequence, run_cells,
                                         run_layer_with_sequence_gradient, take_positions)

__all__ = ["LOOP_IMPLEMENTATIONS", "check_at_most", "check_id_range", "kernel_product",
           "needs_static_shapes", "read_variable", "reverse_sequence", "run_cells",
           "run_layer_with_sequence_gradient", "take_positions", "unique_rows"]


def needs_static_shapes(x=None):
    """True while `x` is a value being traced (`jax.jit`, Keras' compiled steps)."""
    return isinstance(x, jax.core.Tracer)


def unique_rows(ids):
    """The distinct rows of `(n, chars)` int ids `(U, chars)` and each row's index
    `(n,)` int32 into them (`jnp.unique`: outside `jit` only, its shape depends on values)."""
    ids = jnp.asarray(ids, jnp.int32)
    if ids.shape[0] == 0:
        return ids, jnp.zeros((0,), jnp.int32)
    rows, positions = jnp.unique(ids, axis=0, return_inverse=True)
    return rows, positions.reshape(-1).astype(jnp.int32)


def check_id_range(ids, max_id, message):
    """Refuses ids outside `[0, max_id]`: a `ValueError`, raised at once for ids with values
    and, inside `jit`, when the compiled call runs (through `jax.debug.callback`)."""
    if not isinstance(ids, jax.core.Tracer):
        return portable.check_id_range(ids, max_id, message)
    if ids.size == 0:
        return None

    def check(low, high):
        if int(low) < 0 or int(high) > max_id:
            raise ValueError(f"{message}; received ids from {int(low)} to {int(high)}.")

    jax.debug.callback(check, jnp.min(ids), jnp.max(ids))
    return None


def check_at_most(value, limit, message):
    """Refuses an int scalar above `limit` (a `ValueError`; inside `jit` when it runs)."""
    if not isinstance(value, jax.core.Tracer):
        return portable.check_at_most(value, limit, message)

    def check(v):
        portable.check_at_most(v, limit, message)

    jax.debug.callback(check, value)
    return None
