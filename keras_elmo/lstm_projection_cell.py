"""`LSTMProjectionCell`: one LSTM-with-projection layer of one direction (ELMO_SPEC.md section 3).

The cell owns the weights and computes one time step; `ResidualBiLSTM` runs the loop.
Weights are kept in Keras' gate order (i, f, c, o); `keras_elmo.weight_file` converts from
and to the published order (i, j, f, o). Like the published files, `bias` does not hold the
constant +1.0 forget bias: `input_gates` adds it, so a weight file round-trips bit for bit.
"""

import contextlib
import threading

import keras
import tensorflow as tf

from keras_elmo import constants

_AUTODIFF = threading.local()


@contextlib.contextmanager
def autodiff_step():
    """Steps traced inside this context use TensorFlow's autodiff, not the custom gradient.

    For graphs that outlive this process: a `tf.custom_gradient` inside the time loop, saved
    into a SavedModel, breaks every `GradientTape` call of the loaded function (TF_NOTES.md).
    Same numbers and gradients either way; only the backward pass is slower (TF_NOTES.md).

    Example:
    >>> with autodiff_step():
    ...     concrete = tf.function(bilm).get_concrete_function(spec)  # doctest: +SKIP
    """
    previous = getattr(_AUTODIFF, "active", False)
    _AUTODIFF.active = True
    try:
        yield
    finally:
        _AUTODIFF.active = previous


@keras.saving.register_keras_serializable(package="keras_elmo")
class LSTMProjectionCell(keras.layers.Layer):
    """An LSTM cell with a projection of its output and clipping, one step at a time.

    ```
    z = x W_x + h W_h + b               # gates i, f, c, o
    c' = clip(sigmoid(z_f + 1.0) * c + sigmoid(z_i) * tanh(z_c), -cell_clip, cell_clip)
    h' = clip((sigmoid(z_o) * tanh(c')) W_p, -proj_clip, proj_clip)
    ```

    Args:
        units: int, memory cell size (`lstm.dim`, 4096 published).
        projection_dim: int, size of the projected output `h` (512 published).
        cell_clip: float or None, clip value of `c`.
        proj_clip: float or None, clip value of `h`.
        **kwargs: base layer arguments.

    Call arguments (`step`):
        input_gates: `(batch, 4 * units)`, this step's `x W_x + b` from `input_gates()`.
        state: tuple `(h, c)` of shapes `(batch, projection_dim)` and `(batch, units)`.

    Example:
    >>> cell = LSTMProjectionCell(units=12, projection_dim=8)
    >>> cell.build((None, 8))
    >>> gates = cell.input_gates(np.ones((2, 8), "float32"))  # (2, 48)
    >>> h, c = cell.step(gates, cell.zero_state(2))
    >>> h.shape, c.shape
    (TensorShape([2, 8]), TensorShape([2, 12]))
    """

    def __init__(self, units, projection_dim, cell_clip=None, proj_clip=None, **kwargs):
        super().__init__(**kwargs)
        self.units = int(units)
        self.projection_dim = int(projection_dim)
        self.cell_clip = None if cell_clip is None else float(cell_clip)
        self.proj_clip = None if proj_clip is None else float(proj_clip)

    def build(self, input_shape):
        input_dim = int(input_shape[-1])
        gate_dim = constants.NUM_GATES * self.units
        self.input_kernel = self.add_weight(name="input_kernel", shape=(input_dim, gate_dim),
                                            initializer="glorot_uniform")
        self.recurrent_kernel = self.add_weight(
            name="recurrent_kernel", shape=(self.projection_dim, gate_dim),
            initializer="glorot_uniform")
        self.bias = self.add_weight(name="bias", shape=(gate_dim,), initializer="zeros")
        self.projection_kernel = self.add_weight(
            name="projection_kernel", shape=(self.units, self.projection_dim),
            initializer="glorot_uniform")

    def zero_state(self, batch_size):
        """Zero `(h, c)` for `batch_size` rows."""
        return (tf.zeros((batch_size, self.projection_dim), self.compute_dtype),
                tf.zeros((batch_size, self.units), self.compute_dtype))

    def input_gates(self, inputs):
        """`x W_x + b` (+1.0 on the forget gate) for all steps at once.

        `(..., input_dim)` -> `(..., 4 * units)`; `step` takes one step's slice of this.
        """
        leading = tf.shape(inputs)[:-1]
        flat = tf.reshape(inputs, (-1, inputs.shape[-1]))  # (N, input_dim)
        # The constant forget bias joins the stored bias here, once for all steps.
        bias = self.bias + tf.concat(
            [tf.zeros((self.units,), self.bias.dtype),
             tf.fill((self.units,), tf.constant(constants.FORGET_BIAS, self.bias.dtype)),
             tf.zeros((2 * self.units,), self.bias.dtype)], axis=0)  # gates i, f, c, o
        gates = tf.matmul(flat, self.input_kernel) + bias  # (N, 4 * units)
        return tf.reshape(gates, tf.concat([leading, [constants.NUM_GATES * self.units]], 0))

    def step(self, input_gates, state, kernels=None):
        """One step: returns the new `(h, c)`.

        `kernels` is what `step_kernels()` returns; a loop computes it once and passes it to
        every step (it is computed here, for inference, when None).
        """
        if kernels is None:
            kernels = self.step_kernels()
        h, c = state
        return lstm_projection_step(input_gates, h, c, kernels, cell_clip=self.cell_clip,
                                    proj_clip=self.proj_clip)

    def step_kernels(self, training=False):
        """The tensors every `step` reads: `(W_h, W_p)`, plus `(W_h^T, W_p^T)` for training.

        With `training=True` (and outside `autodiff_step()`), the steps get the hand-written
        gradient, which multiplies by the transposed kernels: on CPU a product with a
        transposed operand (`matmul(a, b, transpose_b=True)`) ran 2-5x slower than the same
        product with a contiguous copy of `b^T` (benchmarks/matmul_layouts.py), so a loop
        transposes each kernel once and every step's gradient uses the copy. Inference
        skips both the copies and the custom gradient (gradients still work, by autodiff).
        """
        w_h = tf.convert_to_tensor(self.recurrent_kernel)
        w_p = tf.convert_to_tensor(self.projection_kernel)
        if not training or getattr(_AUTODIFF, "active", False):
            return w_h, w_p
        return w_h, w_p, tf.transpose(w_h), tf.transpose(w_p)

    def get_config(self):
        config = super().get_config()
        config.update(units=self.units, projection_dim=self.projection_dim,
                      cell_clip=self.cell_clip, proj_clip=self.proj_clip)
        return config


def _inside(x, clip):
    """Where `clip_by_value(x, -clip, clip)` passes its gradient (1.0) or blocks it (0.0)."""
    if clip is None:
        return 1.0
    return tf.cast(tf.logical_and(x >= -clip, x <= clip), x.dtype)


def lstm_projection_step(input_gates, h, c, kernels, cell_clip, proj_clip):
    """The step of `LSTMProjectionCell`, with a hand-written gradient for training.

    `kernels` is `(recurrent_kernel, projection_kernel)`, shapes `(P, 4U)`, `(U, P)`: plain
    ops, differentiated by autodiff. With their transposes `(4U, P)`, `(P, U)` appended
    (`LSTMProjectionCell.step_kernels(training=True)`), the step gets a backward pass that
    reuses the gate activations of the forward pass instead of re-deriving every gate
    (measured about +44% training tokens/s on CPU, TF_NOTES.md) and multiplies by the
    contiguous transposes. Same numbers and gradients either way. Shapes: `input_gates`
    `(batch, 4U)`, `h` `(batch, P)`, `c` `(batch, U)` -> `(h', c')`.
    """

    def step(gates_x, h, c, w_h, w_p, w_h_t=None, w_p_t=None):
        z = gates_x + tf.matmul(h, w_h)  # (batch, 4U), gates i, f, c, o
        z_i, z_f, z_c, z_o = tf.split(z, constants.NUM_GATES, axis=-1)
        i, f = tf.sigmoid(z_i), tf.sigmoid(z_f)  # forget bias already in gates_x
        g, o = tf.tanh(z_c), tf.sigmoid(z_o)
        c_raw = f * c + i * g
        c_new = c_raw if cell_clip is None else tf.clip_by_value(c_raw, -cell_clip, cell_clip)
        t = tf.tanh(c_new)
        m = o * t  # (batch, U)
        h_raw = tf.matmul(m, w_p)  # (batch, P)
        h_new = h_raw if proj_clip is None else tf.clip_by_value(h_raw, -proj_clip, proj_clip)

        def grad(dh_new, dc_new):
            dh_raw = dh_new * _inside(h_raw, proj_clip)
            dm = tf.matmul(dh_raw, w_p_t)  # (batch, U)
            dc_raw = (dc_new + dm * o * (1.0 - t * t)) * _inside(c_raw, cell_clip)
            dz = tf.concat([dc_raw * g * i * (1.0 - i), dc_raw * c * f * (1.0 - f),
                            dc_raw * i * (1.0 - g * g), dm * t * o * (1.0 - o)], axis=-1)
            return (dz, tf.matmul(dz, w_h_t), dc_raw * f, tf.matmul(h, dz, transpose_a=True),
                    tf.matmul(m, dh_raw, transpose_a=True), None, None)

        return (h_new, c_new), grad

    if len(kernels) == 2 or getattr(_AUTODIFF, "active", False):
        return step(input_gates, h, c, *kernels[:2])[0]
    return tf.custom_gradient(step)(input_gates, h, c, *kernels)
