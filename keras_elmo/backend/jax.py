"""The JAX backend's functions (see `keras_elmo.backend`).

Keras compiles `fit`, `predict` and `evaluate` with `jax.jit`: inside, shapes may not
depend on values, so the char CNN encodes every position (`needs_static_shapes`), and ids
cannot be read, so their range is checked through `jax.debug.callback`. JAX reports a
check that fails there as a `JaxRuntimeError` ("INTERNAL: CpuCallback error calling
callback:", the host's stack, then our one-line `ValueError` as its last line) and logs it;
ids with values are refused before the call instead (`keras_elmo.models.input_checks`).
"""

import jax
import jax.numpy as jnp
import numpy as np

from keras_elmo.backend import portable
from keras_elmo.backend.jax_compiled_calls import compiled_call, values_token_mask
from keras_elmo.backend.portable import (LOOP_IMPLEMENTATIONS, conv_max, kernel_product,
                                         read_variable, reverse_sequence, run_cells,
                                         run_layer_with_sequence_gradient, take_positions)

__all__ = ["LOOP_IMPLEMENTATIONS", "as_backend_values", "check_at_most", "check_id_range",
           "compiled_call", "conv_max", "host_array", "kernel_product", "numpy_view",
           "needs_static_shapes", "read_variable", "reverse_sequence", "run_cells",
           "run_layer_with_sequence_gradient", "take_positions", "unique_rows",
           "values_token_mask"]


def host_array(array):
    """A numpy array as a JAX array on the default device, moved there as it is (`jnp.asarray`
    would compile a conversion for every new shape)."""
    return jax.device_put(array)


def numpy_view(tensor):
    """A JAX array's values as numpy, without a copy where it is in host memory (read-only;
    Keras' `convert_to_numpy` copies)."""
    return np.asarray(tensor)


def as_backend_values(inputs):
    """`inputs` with each numpy int array moved to the device as it is (Keras converts a
    layer's numpy inputs with `jnp.asarray`, which compiles for every new shape)."""
    def move(x):
        if isinstance(x, np.ndarray) and x.dtype.kind in "iu":
            return jax.device_put(x)
        return x

    return jax.tree_util.tree_map(move, inputs)


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

    def check(v):  # raises itself: one frame of ours in JAX's report
        if int(v) > limit:
            raise ValueError(f"{message}; received {int(v)}.")

    jax.debug.callback(check, value)
    return None
