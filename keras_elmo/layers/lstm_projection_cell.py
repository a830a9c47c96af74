"""`LSTMProjectionCell`: one LSTM-with-projection layer of one direction (docs/model.md section 3).

The cell owns the weights and the one definition of a time step (`step_values`, in
`keras.ops`), which every backend's loop of `ResidualBiLSTM` (`keras_elmo.backend`) and
TensorFlow's hand-written training loop (`keras_elmo.backend.tensorflow.sequence_gradient`)
run. Each weight has one home, its variable:
no copy of a kernel in another layout is kept, so whatever changes a variable changes what
the cell computes.

Layout (the one `get_weights`, `.keras` files, checkpoints and SavedModels hold): kernels
`(out, in)`, gates in Keras' order i, f, c, o, `bias` without the constant forget bias (the
step adds `forget_bias`). A step works feature-major, states `(features, batch)`, so each of
its products is `W @ state`; a one-row step computes the same product as `x^T W^T`, which
reads a kernel in its stored order. docs/model.md section 3 says why this layout, and
`keras_elmo.formats` converts it to and from every file layout.
"""

import keras
from keras import ops

from keras_elmo import backend, constants
from keras_elmo.backend.lstm_types import StepKernels, StepValues
from keras_elmo.process.cpu_setup import one_row_transposes_pay
from keras_elmo.layers.host_initializers import HostZeros

__all__ = ["LSTMProjectionCell", "StepKernels", "StepValues"]


@keras.saving.register_keras_serializable(package="keras_elmo")
class LSTMProjectionCell(keras.layers.Layer):
    """An LSTM cell with a projection of its output and clipping, one step at a time.

    ```
    z = W_x x + W_h h + b               # gates i, f, c, o; feature-major: one column per row
    c' = clip(sigmoid(z_f + forget_bias) * c + sigmoid(z_i) * tanh(z_c), -cell_clip, cell_clip)
    h' = clip(W_p (sigmoid(z_o) * tanh(c')), -proj_clip, proj_clip)
    ```

    Args:
        units: int, memory cell size (`lstm.dim`, 4096 published).
        projection_dim: int, size of the projected output `h` (512 published).
        cell_clip: float or None, clip value of `c`.
        proj_clip: float or None, clip value of `h`.
        kernel_initializer: initializer of the three kernels (`"glorot_uniform"`).
        forget_bias: float, the constant added to the forget gate (1.0, bilm-tf's; not
            stored in `bias`; 0.0 for a model whose stored bias holds it).
        zero_init: bool, create the kernels as zeros instead of drawing them, for a cell a
            weight file fills next (`BiLM.from_weights`); how this object is built, not
            what it is, so not in the config.
        **kwargs: base layer arguments.

    Weights (`get_weights()` order): `input_kernel` `(4 * units, input_dim)`,
    `recurrent_kernel` `(4 * units, projection_dim)`, `bias` `(4 * units,)`,
    `projection_kernel` `(projection_dim, units)`.

    Call arguments (`step`), feature-major:
        input_gates: `(4 * units, batch)`, this step's `W_x x + b` from `input_gates()`.
        state: tuple `(h, c)` of shapes `(projection_dim, batch)` and `(units, batch)`.

    Example:
    >>> cell = LSTMProjectionCell(units=12, projection_dim=8)
    >>> cell.build((None, 8))
    >>> gates = cell.input_gates(np.ones((8, 2), "float32"))  # (48, 2): 2 rows
    >>> h, c = cell.step(gates, cell.zero_state(2))
    >>> h.shape, c.shape
    (TensorShape([8, 2]), TensorShape([12, 2]))
    """

    def __init__(self, units, projection_dim, cell_clip=None, proj_clip=None,
                 kernel_initializer="glorot_uniform", forget_bias=constants.FORGET_BIAS,
                 zero_init=False, **kwargs):
        super().__init__(**kwargs)
        self.units = int(units)
        self.projection_dim = int(projection_dim)
        self.cell_clip = None if cell_clip is None else float(cell_clip)
        self.proj_clip = None if proj_clip is None else float(proj_clip)
        self.forget_bias = float(forget_bias)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self._zero_init = bool(zero_init)

    def build(self, input_shape):
        input_dim = int(input_shape[-1])
        gate_dim = constants.NUM_GATES * self.units
        kernel_init = HostZeros() if self._zero_init else self.kernel_initializer
        # (out, in); Glorot's limit is the same either way round.
        self.input_kernel = self.add_weight(
            name="input_kernel", shape=(gate_dim, input_dim), initializer=kernel_init)
        self.recurrent_kernel = self.add_weight(
            name="recurrent_kernel", shape=(gate_dim, self.projection_dim),
            initializer=kernel_init)
        self.bias = self.add_weight(name="bias", shape=(gate_dim,), initializer=HostZeros())
        self.projection_kernel = self.add_weight(
            name="projection_kernel", shape=(self.projection_dim, self.units),
            initializer=kernel_init)

    @property
    def input_dim(self):
        """Width of the inputs the cell was built for."""
        return int(self.input_kernel.shape[1])

    def zero_state(self, batch_size):
        """Zero `(h, c)` for `batch_size` rows: `(projection_dim, batch)`, `(units, batch)`."""
        return (ops.zeros((self.projection_dim, batch_size), self.compute_dtype),
                ops.zeros((self.units, batch_size), self.compute_dtype))

    def input_gate_weights(self):
        """`(W_x, b)`: the input kernel `(4U, input_dim)` and the bias `(4U,)` with the
        forget bias in, read where this is called (a loop reads them once per call, in the
        caller's thread: Keras' scopes are thread-local)."""
        bias = backend.read_variable(self.bias)
        if self.forget_bias:  # a Python constant: a bias holding it costs nothing here
            bias = bias + ops.concatenate(
                [ops.zeros((self.units,), bias.dtype),
                 ops.full((self.units,), self.forget_bias, bias.dtype),
                 ops.zeros((2 * self.units,), bias.dtype)], axis=0)  # gates i, f, c, o
        return backend.read_variable(self.input_kernel), bias

    def input_gates(self, inputs, weights=None):
        """`W_x x + b` (+`forget_bias` on the forget gate) for all steps at once,
        feature-major: `(input_dim, ...)` -> `(4 * units, ...)`, e.g. `(input_dim, T, batch)`
        -> `(4U, T, batch)`; `step` takes one step's `(4U, batch)`. `weights`: the
        `input_gate_weights()` a loop read (None: read here)."""
        kernel, bias = weights if weights is not None else self.input_gate_weights()
        rest = tuple(ops.shape(inputs)[1:])
        flat = ops.reshape(inputs, (inputs.shape[0], -1))  # (input_dim, N)
        gates = ops.matmul(kernel, flat)  # (4U, N)
        gates = ops.reshape(gates, (constants.NUM_GATES * self.units,) + rest)
        return gates + ops.reshape(bias, (-1,) + (1,) * (len(inputs.shape) - 1))  # (4U, ...)

    def step_kernels(self, one_row=False):
        """The `StepKernels` a loop reads once per call and passes to every step.

        For one-row float32 steps where it pays (`cpu_setup.one_row_transposes_pay`), `W_h`
        is transposed here, in the call: a row times an `(in, out)` `W_h` then streams
        faster than `x^T W^T`, by more than the transpose costs over a sentence. The
        transpose is a tensor of this call, not state: it always follows the variable.
        """
        recurrent = backend.read_variable(self.recurrent_kernel)
        in_out = one_row and self.compute_dtype == "float32" and one_row_transposes_pay()
        if in_out:
            recurrent = ops.transpose(recurrent)  # (P, 4U)
        return StepKernels(recurrent, backend.read_variable(self.projection_kernel), in_out)

    def step(self, input_gates, state):
        """One step: returns the new `(h, c)` (see `step_values`)."""
        values = self.step_values(input_gates, state)
        return values.h, values.c

    def step_values(self, input_gates, state, kernels=None, one_row=False):
        """The one definition of a step (class docstring), in plain ops, feature-major.

        Args:
            input_gates: `(4 * units, batch)`, this step's `W_x x + b` (forget bias in).
            state: `(h, c)` of shapes `(projection_dim, batch)` and `(units, batch)`.
            kernels: `StepKernels` to read (a loop's, or the tensors the hand-written
                backward pass differentiates); None: `step_kernels()`.
            one_row: bool, a batch of one row: products `x^T W^T` (TensorFlow's
                `backend.kernel_product`).

        Returns:
            `StepValues`: the new `h`, `c` and the unclipped values of this step.
        """
        h, c = state
        kernels = kernels or self.step_kernels()
        z = input_gates + backend.kernel_product(kernels.recurrent, h, one_row,
                                                 kernels.recurrent_in_out)  # (4U, batch)
        i, f, g, o = self.gate_activations(z)
        c_raw = f * c + i * g  # the forget bias is already in input_gates
        c = self.clip_cell(c_raw)
        h_raw = backend.kernel_product(kernels.projection, o * ops.tanh(c),
                                       one_row)  # (P, batch)
        return StepValues(self.clip_projection(h_raw), c, z, c_raw, h_raw)

    @staticmethod
    def gate_activations(z):
        """`(i, f, g, o)` of gate pre-activations `z` `(..., 4 * units, batch)`, gates i, f,
        c, o as row blocks: sigmoid, sigmoid, tanh, sigmoid; each `(..., units, batch)`."""
        z_i, z_f, z_c, z_o = ops.split(z, constants.NUM_GATES, axis=-2)
        return ops.sigmoid(z_i), ops.sigmoid(z_f), ops.tanh(z_c), ops.sigmoid(z_o)

    def clip_cell(self, c):
        """`c` clipped to `[-cell_clip, cell_clip]` (unchanged when `cell_clip` is None)."""
        return c if self.cell_clip is None else ops.clip(c, -self.cell_clip, self.cell_clip)

    def clip_projection(self, h):
        """`h` clipped to `[-proj_clip, proj_clip]` (unchanged when `proj_clip` is None)."""
        return h if self.proj_clip is None else ops.clip(h, -self.proj_clip, self.proj_clip)

    def get_config(self):
        config = super().get_config()
        config.update(units=self.units, projection_dim=self.projection_dim,
                      cell_clip=self.cell_clip, proj_clip=self.proj_clip,
                      kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
                      forget_bias=self.forget_bias)
        return config
