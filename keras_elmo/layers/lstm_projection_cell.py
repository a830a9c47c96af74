"""`LSTMProjectionCell`: one LSTM-with-projection layer of one direction (docs/model.md section 3).

The cell owns the weights and the one definition of a time step (`step_values`): the plain
loop of `ResidualBiLSTM` and the training loop of `keras_elmo.layers.lstm_sequence_gradient`
(whose backward pass is written by hand) both run it.
Weights are kept in Keras' gate order (i, f, c, o); `keras_elmo.formats.weight_file` converts from
and to the published order (i, j, f, o). Like the published files, `bias` does not hold the
constant +1.0 forget bias: `input_gates` adds it, so a weight file round-trips bit for bit.

A bfloat16 cell (`dtype="bfloat16"`, the explicit reduced-precision option) stores its
kernels `W_x`, `W_h` and `W_p` transposed, `(out, in)`: TensorFlow's bfloat16 matmul (oneDNN)
ran the published model's step products 2x faster at batch 1 and 1.5x at batch 32 with such
a right operand than with `(in, out)`, and the hoisted input products 1.8x and 1.2x (an
AVX512_BF16 CPU; float32 keeps `(in, out)`, which its kernel prefers). The layout is the
cell's own business: `logical_kernels()`, `logical_weights()`, Keras weight files and
`keras_elmo.formats.weight_file` all see `(in, out)` in every dtype. (A SavedModel holds the
variables as stored: a bfloat16 export's `recurrent_kernel` is `(4U, P)`.)
"""

import collections

import numpy as np

import keras
import tensorflow as tf

from keras_elmo import constants

#: Compute dtypes whose cells store `W_x`, `W_h` and `W_p` transposed (module docstring).
TRANSPOSED_KERNEL_DTYPES = ("bfloat16",)

#: What one step computes: the new state `(h, c)` and the unclipped values a hand-written
#: backward pass needs (`keras_elmo.layers.lstm_sequence_gradient`): the gate
#: pre-activations `z` `(batch, 4U)`, the memory before its clip `c_raw` `(batch, U)` and the
#: projection before its clip `h_raw` `(batch, P)`.
StepValues = collections.namedtuple("StepValues", ["h", "c", "z", "c_raw", "h_raw"])


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
        kernel_initializer: initializer of the three kernels (`"glorot_uniform"`).
        zero_init: bool, create the kernels as zeros instead of drawing them: for a cell
            whose weights a file fills next (`BiLM.from_weights`).
        **kwargs: base layer arguments.

    Attributes:
        kernels_transposed: bool, from the compute dtype: `input_kernel`, `recurrent_kernel` and
            `projection_kernel` are stored `(4 * units, input_dim)`, `(4 * units,
            projection_dim)` and `(projection_dim, units)` (a bfloat16 cell), else
            `(input_dim, 4 * units)`, `(projection_dim, 4 * units)` and `(units,
            projection_dim)`. It follows the compute dtype, so a `mixed_bfloat16` cell
            (float32 variables) is transposed too.

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

    def __init__(self, units, projection_dim, cell_clip=None, proj_clip=None,
                 kernel_initializer="glorot_uniform", zero_init=False, **kwargs):
        super().__init__(**kwargs)
        self.units = int(units)
        self.projection_dim = int(projection_dim)
        self.cell_clip = None if cell_clip is None else float(cell_clip)
        self.proj_clip = None if proj_clip is None else float(proj_clip)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.zero_init = bool(zero_init)

    def build(self, input_shape):
        input_dim = int(input_shape[-1])
        gate_dim = constants.NUM_GATES * self.units
        kernel_init = "zeros" if self.zero_init else self.kernel_initializer
        stored = (lambda shape: shape[::-1]) if self.kernels_transposed else (lambda s: s)
        self.input_kernel = self.add_weight(  # Glorot's limit is the same either way
            name="input_kernel", shape=stored((input_dim, gate_dim)), initializer=kernel_init)
        self.recurrent_kernel = self.add_weight(
            name="recurrent_kernel", shape=stored((self.projection_dim, gate_dim)),
            initializer=kernel_init)
        self.bias = self.add_weight(name="bias", shape=(gate_dim,), initializer="zeros")
        self.projection_kernel = self.add_weight(
            name="projection_kernel", shape=stored((self.units, self.projection_dim)),
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
        gates = tf.matmul(flat, self.input_kernel,
                          transpose_b=self.kernels_transposed)  # (N, 4 * units)
        gates = tf.reshape(gates, tf.concat([leading, [constants.NUM_GATES * self.units]], 0))
        # The bias joins after the reshape: a bias right on the matmul is fused by Grappler
        # into one oneDNN inner product, which in bfloat16 held 2 x 50 MiB more at batch 32
        # (published size, both directions at once) than this matmul and add.
        return gates + bias

    def step(self, input_gates, state, kernels=None):
        """One step: returns the new `(h, c)` (see `step_values`).

        `kernels` is `kernels()`'s value; a loop reads it once and passes it to every step
        (read here when None).
        """
        kernels = self.kernels() if kernels is None else kernels
        values = self.step_values(input_gates, state, kernels, self.kernels_transposed)
        return values.h, values.c

    def step_values(self, input_gates, state, kernels, transposed):
        """The one definition of a step (class docstring), in plain ops.

        Args:
            input_gates: `(batch, 4 * units)`, this step's `x W_x + b` (forget bias included).
            state: `(h, c)` of shapes `(batch, projection_dim)` and `(batch, units)`.
            kernels: `(W_h, W_p)`, stored `(out, in)` when `transposed`, else `(in, out)`.
            transposed: bool, the layout of `kernels`.

        Returns:
            `StepValues`: the new `h`, `c` and the unclipped values of this step.
        """
        w_h, w_p = kernels
        h, c = state
        z = input_gates + tf.matmul(h, w_h, transpose_b=transposed)  # (batch, 4U): i, f, c, o
        i, f, g, o = self.gate_activations(z)
        c_raw = f * c + i * g  # the forget bias is already in input_gates
        c = self.clip_cell(c_raw)
        h_raw = tf.matmul(o * tf.tanh(c), w_p, transpose_b=transposed)  # (batch, P)
        return StepValues(self.clip_projection(h_raw), c, z, c_raw, h_raw)

    @staticmethod
    def gate_activations(z):
        """`(i, f, g, o)` of gate pre-activations `z` `(..., 4 * units)` in Keras' order
        i, f, c, o: sigmoid, sigmoid, tanh, sigmoid; each `(..., units)`."""
        z_i, z_f, z_c, z_o = tf.split(z, constants.NUM_GATES, axis=-1)
        return tf.sigmoid(z_i), tf.sigmoid(z_f), tf.tanh(z_c), tf.sigmoid(z_o)

    def clip_cell(self, c):
        """`c` clipped to `[-cell_clip, cell_clip]` (unchanged when `cell_clip` is None)."""
        return c if self.cell_clip is None else tf.clip_by_value(c, -self.cell_clip,
                                                                   self.cell_clip)

    def clip_projection(self, h):
        """`h` clipped to `[-proj_clip, proj_clip]` (unchanged when `proj_clip` is None)."""
        return h if self.proj_clip is None else tf.clip_by_value(h, -self.proj_clip,
                                                                   self.proj_clip)

    @property
    def kernels_transposed(self):
        """True when the compute dtype stores the kernels `(out, in)` (module docstring)."""
        return self.compute_dtype in TRANSPOSED_KERNEL_DTYPES

    @property
    def input_dim(self):
        """Width of the inputs the cell was built for, in any stored layout."""
        return int(self.input_kernel.shape[-1 if self.kernels_transposed else 0])

    def kernels(self):
        """`(W_h, W_p)` as stored, what every step reads: shapes `(P, 4U)` and `(U, P)`, or
        `(4U, P)` and `(P, U)` when `kernels_transposed`."""
        return (tf.convert_to_tensor(self.recurrent_kernel),
                tf.convert_to_tensor(self.projection_kernel))

    def logical_kernels(self):
        """`(W_h, W_p)` of shapes `(P, 4U)` and `(U, P)` in every dtype (transposed copies
        for a bfloat16 cell; differentiable with respect to the variables)."""
        w_h, w_p = self.kernels()
        if self.kernels_transposed:
            return tf.transpose(w_h), tf.transpose(w_p)
        return w_h, w_p

    def logical_array(self, variable):
        """One of the cell's variables as a numpy array, a kernel `(in, out)` in any dtype."""
        array = np.asarray(variable.numpy())
        return array.T if self._is_transposed(variable) else array

    def logical_weights(self):
        """`self.weights` as numpy arrays with every kernel `(in, out)`, in any dtype: what
        `set_logical_weights` of a cell of any dtype takes (Keras' `get_weights` gives the
        stored layout)."""
        return [self.logical_array(v) for v in self.weights]

    def set_logical_weights(self, arrays):
        """Assigns `logical_weights()` of a cell of the same shape, any dtype."""
        if len(arrays) != len(self.weights):
            raise ValueError(f"{self.name} holds {len(self.weights)} weights; received "
                             f"{len(arrays)}.")
        for variable, value in zip(self.weights, arrays):
            flip = self._is_transposed(variable)
            expected = tuple(variable.shape)[::-1] if flip else tuple(variable.shape)
            if tuple(np.shape(value)) != expected:
                raise ValueError(f"{variable.path}: expected shape {expected} (in, out); "
                                 f"received {np.shape(value)}.")
            variable.assign(np.transpose(value) if flip else value)

    def _is_transposed(self, variable):
        """True for a kernel this cell stores `(out, in)` (see `kernels_transposed`)."""
        return self.kernels_transposed and any(
            variable is k for k in (self.input_kernel, self.recurrent_kernel,
                                    self.projection_kernel))

    # Keras weight files hold `(in, out)` kernels in every dtype, so float32 and bfloat16
    # models load each other's `.weights.h5` / `.keras`. The cell has no sublayers and no
    # non-trainable weights: `self.weights` is the order Keras numbers them in.
    def save_own_variables(self, store):
        for i, value in enumerate(self.logical_weights()):
            store[f"{i}"] = value

    def load_own_variables(self, store):
        self.set_logical_weights([np.asarray(store[key]) for key in
                                  (f"{i}" for i in range(len(store.keys())))])

    def get_config(self):
        config = super().get_config()
        config.update(units=self.units, projection_dim=self.projection_dim,
                      cell_clip=self.cell_clip, proj_clip=self.proj_clip,
                      kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
                      zero_init=self.zero_init)
        return config
