"""`LSTMProjectionCell`: one LSTM-with-projection layer of one direction (ELMO_SPEC.md section 3).

The cell owns the weights and computes one time step; `ResidualBiLSTM` runs the loop.
Weights are kept in Keras' gate order (i, f, c, o); `keras_elmo.weight_file` converts from
and to the published order (i, j, f, o). Like the published files, `bias` does not hold the
constant +1.0 forget bias: `input_gates` adds it, so a weight file round-trips bit for bit.
"""

import keras
import tensorflow as tf

from keras_elmo import constants
from keras_elmo.file_filled_weights import file_weight_initializer


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
        kernel_init = file_weight_initializer("glorot_uniform")  # zeros when a file fills them
        self.input_kernel = self.add_weight(name="input_kernel", shape=(input_dim, gate_dim),
                                            initializer=kernel_init)
        self.recurrent_kernel = self.add_weight(
            name="recurrent_kernel", shape=(self.projection_dim, gate_dim),
            initializer=kernel_init)
        self.bias = self.add_weight(name="bias", shape=(gate_dim,), initializer="zeros")
        self.projection_kernel = self.add_weight(
            name="projection_kernel", shape=(self.units, self.projection_dim),
            initializer=kernel_init)

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

        Plain ops: autodiff gives their gradient (`ResidualBiLSTM` trains through
        `keras_elmo.lstm_sequence_gradient` instead). `kernels` is `kernels()`'s value; a
        loop reads it once and passes it to every step (read here when None).
        """
        w_h, w_p = self.kernels() if kernels is None else kernels
        h, c = state
        z = input_gates + tf.matmul(h, w_h)  # (batch, 4U), gates i, f, c, o
        z_i, z_f, z_c, z_o = tf.split(z, constants.NUM_GATES, axis=-1)
        # The forget bias is already in input_gates.
        c = tf.sigmoid(z_f) * c + tf.sigmoid(z_i) * tf.tanh(z_c)
        if self.cell_clip is not None:
            c = tf.clip_by_value(c, -self.cell_clip, self.cell_clip)
        h = tf.matmul(tf.sigmoid(z_o) * tf.tanh(c), w_p)  # (batch, P)
        if self.proj_clip is not None:
            h = tf.clip_by_value(h, -self.proj_clip, self.proj_clip)
        return h, c

    def kernels(self):
        """`(W_h, W_p)` as tensors, shapes `(P, 4U)` and `(U, P)`: what every step reads."""
        return (tf.convert_to_tensor(self.recurrent_kernel),
                tf.convert_to_tensor(self.projection_kernel))

    def get_config(self):
        config = super().get_config()
        config.update(units=self.units, projection_dim=self.projection_dim,
                      cell_clip=self.cell_clip, proj_clip=self.proj_clip)
        return config
