"""What the layers need that differs between Keras' backends, one module per backend.

Keras runs a model's `keras.ops` code on TensorFlow, JAX and PyTorch; the layers are
written in `keras.ops`, and the few things `keras.ops` does not say, or says too slowly on
one backend, come from here, as Keras' own `keras.src.backend` splits them:

    tensorflow/    TensorFlow: the chunked `tf.while_loop` LSTM loop (lstm_loop.py) and the
                   hand-written sequence gradient (sequence_gradient.py), XLA detection,
                   `tf.unique` de-duplication, assertion ops in traced graphs
    jax.py         JAX: `lax.scan` loop, `jnp.unique` outside `jit`, traced-shape detection
    torch.py       PyTorch: a Python loop, `torch.unique`
    portable.py    what JAX and PyTorch share, in `keras.ops`
    lstm_types.py  the step's kernels and values (plain Python)

The module is chosen once, by `keras.backend.backend()` when this package is first
imported (Keras itself fixes its backend at import: `KERAS_BACKEND`, or keras.json).

Functions (each backend defines all of them):
    needs_static_shapes(x)          True inside a call compiled with fixed shapes (XLA)
    unique_rows(ids)                distinct rows of (n, chars) int ids and where each row is
    check_id_range(ids, max_id, m)  ids in [0, max_id], else an error with message m
    check_at_most(value, limit, m)  an int scalar at most `limit`, else an error
    reverse_sequence(x, lengths, seq_axis, batch_axis)
    take_positions(x, order, axis)  each row's positions along `axis` in its own order
    kernel_product(kernel, x, one_row, in_out)   `W @ x` of a feature-major step
    conv_max(chars, kernel, filters_per_call)    max over positions of a valid 1-D
                                    convolution, the char CNN's (PyTorch: unfold + matmul)
    read_variable(variable)         a variable's value, read where it is called
    run_cells(...)                  the plain LSTM time loop (`ResidualBiLSTM`)
    run_layer_with_sequence_gradient(cells, gates)   TensorFlow only
    compiled_call(layer, inputs, training, max_batch_size)   a concrete call compiled
                                    (JAX: jax_compiled_calls.py); None: call as it is
    host_array(array)               a numpy array as this backend holds it, without an op
                                    (JAX: `device_put`; a `jnp.asarray` compiles per shape)
    ModuleHabits                    mixin of ElmoLayer and BiLM: PyTorch's state_dict names,
                                    train()/eval(), dtype moves (torch_module.py); else none
    as_backend_values(inputs)       JAX: numpy int ids moved as they are (Keras' conversion
                                    compiles per shape); else unchanged
    values_token_mask(ids)          JAX: the token mask of concrete ids, on the host; else None
    numpy_view(tensor)              a tensor's values as numpy, without a copy where JAX and
                                    PyTorch allow (Keras' `convert_to_numpy` copies)
    LOOP_IMPLEMENTATIONS            the `ResidualBiLSTM` loops this backend runs
    NAME                            "tensorflow", "jax" or "torch"

Example:
>>> from keras_elmo import backend
>>> backend.NAME  # under KERAS_BACKEND=jax
'jax'
"""

import importlib

import keras

_MODULES = {"tensorflow": "keras_elmo.backend.tensorflow", "jax": "keras_elmo.backend.jax",
            "torch": "keras_elmo.backend.torch"}

_backend = keras.backend.backend()
if _backend not in _MODULES:
    raise ImportError(f"keras-elmo runs on Keras' tensorflow, jax and torch backends; received "
                      f"KERAS_BACKEND={_backend!r} (set KERAS_BACKEND to one of "
                      f"{', '.join(sorted(_MODULES))} before keras is imported).")
_module = importlib.import_module(_MODULES[_backend])

NAME = _backend
LOOP_IMPLEMENTATIONS = _module.LOOP_IMPLEMENTATIONS
needs_static_shapes = _module.needs_static_shapes
unique_rows = _module.unique_rows
check_id_range = _module.check_id_range
check_at_most = _module.check_at_most
reverse_sequence = _module.reverse_sequence
kernel_product = _module.kernel_product
conv_max = _module.conv_max
read_variable = _module.read_variable
run_cells = _module.run_cells
take_positions = _module.take_positions
run_layer_with_sequence_gradient = _module.run_layer_with_sequence_gradient
compiled_call = getattr(_module, "compiled_call", lambda *args, **kwargs: None)
values_token_mask = getattr(_module, "values_token_mask", lambda ids: None)
host_array = getattr(_module, "host_array", lambda array: array)
as_backend_values = getattr(_module, "as_backend_values", lambda inputs: inputs)
numpy_view = getattr(_module, "numpy_view", keras.ops.convert_to_numpy)


class _NoModuleHabits:
    """`ModuleHabits` off PyTorch: nothing to add (a call without `training` is inference)."""

    def init_module_habits(self):
        pass

    def module_training(self):
        return False


if NAME == "torch":
    from keras_elmo.backend.torch_module import ModuleHabits
else:
    ModuleHabits = _NoModuleHabits
