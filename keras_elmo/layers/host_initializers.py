"""`HostZeros` and `HostConstant`: initializers of the weights a file or a constant fills,
made on the host.

Keras' own `"zeros"` and `Constant` build each variable's value with the backend's ops;
under JAX every new shape is then a small XLA compilation (tens of milliseconds each, about
a second for a biLM's weights, spent on values that loading overwrites next). Under JAX
these hand it numpy's values, moved as they are; TensorFlow and PyTorch make the constant
with their own op, as Keras does.

Example:
>>> bias = layer.add_weight(name="bias", shape=(8,), initializer=HostZeros())
"""

import keras
import numpy as np
from keras import ops

from keras_elmo import backend


@keras.saving.register_keras_serializable(package="keras_elmo")
class HostConstant(keras.initializers.Initializer):
    """Initializer of a constant, as numpy: `HostConstant(v)(shape, dtype)` is
    `np.full(shape, v)`.

    Args:
        value: float or array broadcastable to the shape (0.0).

    Call arguments:
        shape: tuple of ints, the variable's shape.
        dtype: the variable's dtype (`"float32"`, `"bfloat16"`, ...).

    Example:
    >>> HostConstant(1.5)((2,), "float32")
    array([1.5, 1.5], dtype=float32)
    """

    def __init__(self, value=0.0):
        self.value = value

    def __call__(self, shape, dtype=None):
        dtype = keras.backend.standardize_dtype(dtype or keras.config.floatx())
        host_dtype = "float32" if dtype == "bfloat16" else dtype  # numpy has no bfloat16
        value = np.asarray(self.value, host_dtype)
        if backend.NAME == "jax":  # Keras casts a float32 array to bfloat16 itself
            return backend.host_array(np.broadcast_to(value, shape).copy())
        # TensorFlow and PyTorch make a constant without compiling anything: their own op
        # (a numpy copy first would be one more copy of the weights held at once).
        if value.ndim == 0:
            return ops.full(shape, value.item(), dtype)
        return ops.cast(ops.convert_to_tensor(np.broadcast_to(value, shape).copy()), dtype)

    def get_config(self):
        value = self.value
        return {"value": value.tolist() if hasattr(value, "tolist") else value}


@keras.saving.register_keras_serializable(package="keras_elmo")
class HostZeros(HostConstant):
    """Initializer of zeros, as numpy: `HostZeros()(shape, dtype)` is `np.zeros(shape)`.

    Example:
    >>> HostZeros()((2, 3), "float32").shape
    (2, 3)
    """

    def __init__(self):
        super().__init__(0.0)

    def get_config(self):
        return {}
