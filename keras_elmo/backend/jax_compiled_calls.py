"""JAX: a layer called as users call it (`elmo(ids)`, no `jax.jit` of their own) runs
compiled, and sees its variables as they are at each call.

Run op by op, a JAX call of the biLM dispatches thousands of small operations, each
compiled for its own shapes the first time it is seen: seconds per call, and seconds more
for every new batch size or length. Here the layer's whole call is one `jax.jit` function
of its variables' values and its inputs (`stateless_call`, as Keras' own JAX trainer runs
a model): the values are read from the variables at every call, so `assign`,
`set_weights` and `load_weights` are seen, and the non-trainable values the call updates
(dropout seeds, a stateful biLM's carried state) are assigned back after it.

XLA compiles a function once per input shape, so the inputs are first padded to a few
shape classes (`shape_class`): all-zero char rows, which are no token. A padded position
or row changes no real position's output (each row is its own sentence, read within its
own length; the mix's layer norm counts real positions only), and the outputs are cut
back to the call's shape.

Inside a user's own `jax.jit` (tracers) and in a functional model being built (symbolic
tensors) the layer is traced as before: `compiled_call` returns None and the call goes on.

Compiled functions are kept per layer object and `training` value (a `WeakKeyDictionary`,
so they go with the layer), and JAX's persistent compilation cache, when the program has
set one (`enable_compilation_cache`), hands a later process the executables of an earlier
one.

Example:
>>> out = compiled_call(elmo, ids, training=False)  # None where the call must trace
"""

import os
import weakref

import jax
import numpy as np

#: The smallest length class: shorter sentences share one compiled function.
MIN_STEPS = 8

_compiled = weakref.WeakKeyDictionary()  # layer -> {training: jitted function}


def shape_class(size, minimum=1):
    """The padded size of an axis of `size`: the next of 1, 2, 3, 4, 6, 8, 12, 16, 24, ...
    (powers of two and their halfway points, at least `minimum`): a few shapes, each compiled
    once, and at most a third of the padded work wasted."""
    size = max(int(size), int(minimum))
    if size <= 2:
        return size
    power = 1 << (size - 1).bit_length()  # the next power of two
    return power * 3 // 4 if size <= power * 3 // 4 else power


def is_concrete(inputs):
    """True when every leaf of `inputs` is a value (a numpy or a concrete JAX array), not a
    tracer or a symbolic tensor."""
    leaves = jax.tree_util.tree_leaves(inputs)
    return bool(leaves) and all(
        isinstance(leaf, (np.ndarray, jax.Array)) and not isinstance(leaf, jax.core.Tracer)
        for leaf in leaves)


def compiled_call(layer, inputs, training=False, max_batch_size=None):
    """`layer.call(inputs, training=training)` as one compiled function, or None where the
    call must be traced as it is (see the module docstring).

    Args:
        layer: a built Keras layer whose `call(inputs, training=..., inputs_checked=...)`
            takes int ids `(batch, T, ...)` (or a dict of them), checked on the host by its
            `__call__`, and returns tensors with the batch on axis 0 and T on axis 1 (rank 2
            and 3) or 2 (rank 4).
        inputs: the call's inputs.
        training: the call's `training` (each value compiles its own function).
        max_batch_size: int or None, the most rows the layer takes (a stateful biLM's
            `max_batch_size`): a batch is not padded past it.

    Returns:
        the call's outputs, cut back to the inputs' batch and length; None when `inputs` are
        not concrete.
    """
    if not layer.built or not is_concrete(inputs):
        return None
    first = jax.tree_util.tree_leaves(inputs)[0]
    batch, steps = int(first.shape[0]), int(first.shape[1])
    rows = shape_class(batch)
    if max_batch_size is not None:
        if batch > max_batch_size:  # the call itself refuses it, in its own words
            return None
        rows = min(rows, max_batch_size)
    padded = jax.tree_util.tree_map(
        lambda x: _pad(x, rows, shape_class(steps, MIN_STEPS)), inputs)
    trainable = [v.value for v in layer.trainable_variables]
    non_trainable = [v.value for v in layer.non_trainable_variables]
    if not is_concrete(trainable + non_trainable):  # values traced by the caller (jax.grad
        return None  # through stateless_call): the call is part of the caller's trace
    function = _function(layer, bool(training))
    outputs, non_trainable = function(trainable, non_trainable, padded)
    for variable, value in zip(layer.non_trainable_variables, non_trainable):
        variable.assign(value)
    return jax.tree_util.tree_map(lambda x: _cut(x, batch, steps), outputs)


def values_token_mask(ids):
    """bool `(batch, T)`, True where a row of concrete int ids `(batch, T, chars)` holds a
    token, computed on the host (Keras asks a layer for its mask after each call: as JAX ops
    that would compile for every new shape); None for traced ids."""
    if not is_concrete(ids):
        return None
    return jax.device_put(np.any(np.asarray(ids) != 0, axis=-1))


def enable_compilation_cache(directory):
    """JAX's persistent compilation cache in `directory`: a later process that compiles the
    same layer call for the same shapes loads the executable instead (see
    docs/backends.md for what it saves). The cache is trusted code: a folder only you
    write to."""
    from jax.experimental.compilation_cache import compilation_cache

    os.makedirs(directory, exist_ok=True)
    compilation_cache.set_cache_dir(directory)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    compilation_cache.reset_cache()  # JAX reads the setting once: also after a compilation


def _function(layer, training):
    """The layer's jitted `stateless_call` for one `training` value, made once."""
    functions = _compiled.setdefault(layer, {})
    if training not in functions:
        held = weakref.ref(layer)  # the cache's value must not keep its key alive

        def pure(trainable, non_trainable, inputs):
            # `inputs_checked`: the layer's `__call__` checked the ids on the host before
            # (keras_elmo.models.input_checks), so the compiled call holds no check of its
            # own, whose host callback would keep JAX's persistent cache from storing it.
            return held().stateless_call(trainable, non_trainable, inputs, training=training,
                                         inputs_checked=True)

        functions[training] = jax.jit(pure)
    return functions[training]


def _pad(x, rows, steps):
    """`x` `(batch, T, ...)` with zeros appended up to `(rows, steps, ...)`, on the host (a
    JAX pad would compile for every new shape, the cost this module saves)."""
    x = np.asarray(x)
    widths = [(0, rows - x.shape[0]), (0, steps - x.shape[1])] + [(0, 0)] * (x.ndim - 2)
    return np.pad(x, widths) if any(w[1] for w in widths) else x


def _cut(x, batch, steps):
    """An output of the padded call cut back: batch on axis 0, T on axis 1 (rank <= 3) or 2
    (a rank-4 `(batch, L + 1, T, dim)` stack of layers)."""
    if x.ndim < 2:
        return x
    time_axis = 2 if x.ndim == 4 else 1
    index = [slice(0, batch)] + [slice(None)] * (x.ndim - 1)
    index[time_axis] = slice(0, steps)
    if all(device.platform == "cpu" for device in x.devices()):
        # On the host: a JAX slice would compile for every new shape.
        return jax.device_put(np.asarray(x)[tuple(index)], next(iter(x.devices())))
    return x[tuple(index)]
