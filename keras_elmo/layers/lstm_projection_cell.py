"""`LSTMProjectionCell`: one LSTM-with-projection layer of one direction (docs/model.md section 3).

The cell owns the weights and the one definition of a time step (`step_values`): the plain
loop of `ResidualBiLSTM` and the training loop of `keras_elmo.layers.lstm_sequence_gradient`
(whose backward pass is written by hand) both run it.
Weights are kept in Keras' gate order (i, f, c, o); `keras_elmo.formats.weight_file` converts from
and to the published order (i, j, f, o). Like the published files, `bias` does not hold the
constant forget bias (`forget_bias`, bilm-tf's +1.0): `input_gates` adds it, so a weight file
round-trips bit for bit. A model whose stored bias holds it (ELMoForManyLangs) has 0.0.

Feature-major: a step works on states with one column per batch row, `h` `(P, batch)` and
`c` `(U, batch)`, and the cell stores its kernels `(out, in)`: `W_x` `(4U, in)`, `W_h`
`(4U, P)`, `W_p` `(P, U)`, so every product of a step is `W @ state` and the gates split
into four blocks of whole rows without a copy. On CPU these are the faster products for
batches of rows (docs/performance.md, "Figures behind the code's choices"). The layout is
the cell's own business: `logical_kernels()`, `logical_weights()`, Keras weight files and
`keras_elmo.formats.weight_file` all see `(in, out)`. (A SavedModel holds the variables as
stored: its `recurrent_kernel` is `(4U, P)`.)

A batch of one row is bound by reading the kernels from memory, and a row times a kernel is
read fastest in the kernel's `(in, out)` order: a one-row step computes `x^T W^T`. A frozen
float32 cell (`trainable=False`, the weights fixed) traced for one row keeps `(in, out)`
copies of `W_h` and `W_p` for those steps (`one_row_kernels`, made at that trace: twice the
two kernels' memory, 160 MiB at the published size), so the product streams them in their
own order. The copies are made again whenever the cell's weights are loaded
(`load_own_variables`, `set_logical_weights`, the weight-file loader) or it is frozen again;
weights assigned to a frozen cell by hand (`variable.assign`, `Model.set_weights`) reach the
copies with `refresh_one_row_kernels()`. Nothing saves or exports them.
"""

import collections

import numpy as np

import keras
import tensorflow as tf

from keras_elmo import constants
from keras_elmo.layers.zero_init import rebuild_config

#: What one step computes: the new state `(h, c)` and the unclipped values a hand-written
#: backward pass needs (`keras_elmo.layers.lstm_sequence_gradient`): the gate
#: pre-activations `z` `(4U, batch)`, the memory before its clip `c_raw` `(U, batch)` and the
#: projection before its clip `h_raw` `(P, batch)`.
StepValues = collections.namedtuple("StepValues", ["h", "c", "z", "c_raw", "h_raw"])

#: The two kernels a step reads, `W_h` and `W_p`: as stored `(out, in)` (`in_out` False), or
#: the `(in, out)` copies of a frozen cell's one-row steps (`in_out` True).
StepKernels = collections.namedtuple("StepKernels", ["recurrent", "projection", "in_out"])

#: The cell's kernels, stored `(out, in)` (module docstring).
_KERNEL_NAMES = ("input_kernel", "recurrent_kernel", "projection_kernel")


def _product(kernel, x, in_out):
    """`kernel @ x` for a feature-major `x` `(in, batch)` -> `(out, batch)`.

    `kernel` is stored `(out, in)`, or `(in, out)` with `in_out`. For one row (`x` `(in, 1)`,
    the same bytes as the row `(1, in)`) the product is the row times the kernel read in its
    `(in, out)` order (`x^T W^T`, or `x^T W` from a copy): one-row products are bound by the
    kernel's bytes, and that order streams them fastest (module docstring).
    """
    if x.shape[-1] != 1:
        return tf.matmul(kernel, x, transpose_a=in_out)
    row = tf.reshape(x, (1, -1))  # (1, in): no copy
    return tf.reshape(tf.matmul(row, kernel, transpose_b=not in_out), (-1, 1))  # (out, 1)


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
            stored in `bias`).
        zero_init: bool, create the kernels as zeros instead of drawing them, for a cell
            whose weights a file fills next (`BiLM.from_weights`). How this object is built,
            not what it is: not in the config, so a cell rebuilt from it draws its weights.
        **kwargs: base layer arguments.

    Weights: `input_kernel` `(4 * units, input_dim)`, `recurrent_kernel` `(4 * units,
    projection_dim)`, `bias` `(4 * units,)`, `projection_kernel` `(projection_dim, units)`:
    kernels `(out, in)` (module docstring); `logical_kernels()` and `logical_weights()` give
    them `(in, out)`.

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
        self._one_row_copies = _Copies()

    def build(self, input_shape):
        input_dim = int(input_shape[-1])
        gate_dim = constants.NUM_GATES * self.units
        kernel_init = "zeros" if self._zero_init else self.kernel_initializer
        # (out, in); Glorot's limit is the same either way round.
        self.input_kernel = self.add_weight(
            name="input_kernel", shape=(gate_dim, input_dim), initializer=kernel_init)
        self.recurrent_kernel = self.add_weight(
            name="recurrent_kernel", shape=(gate_dim, self.projection_dim),
            initializer=kernel_init)
        self.bias = self.add_weight(name="bias", shape=(gate_dim,), initializer="zeros")
        self.projection_kernel = self.add_weight(
            name="projection_kernel", shape=(self.projection_dim, self.units),
            initializer=kernel_init)

    def zero_state(self, batch_size):
        """Zero `(h, c)` for `batch_size` rows: `(projection_dim, batch)`, `(units, batch)`."""
        return (tf.zeros((self.projection_dim, batch_size), self.compute_dtype),
                tf.zeros((self.units, batch_size), self.compute_dtype))

    def input_gates(self, inputs):
        """`W_x x + b` (+`forget_bias` on the forget gate) for all steps at once,
        feature-major.

        `(input_dim, ...)` -> `(4 * units, ...)`: one product over every column (e.g.
        `(input_dim, T, batch)` -> `(4U, T, batch)`); `step` takes one step's `(4U, batch)`.
        """
        rest = tf.shape(inputs)[1:]
        flat = tf.reshape(inputs, (inputs.shape[0], -1))  # (input_dim, N)
        # The constant forget bias joins the stored bias here, once for all steps.
        bias = self.bias
        if self.forget_bias:  # a Python constant: a bias holding it costs nothing here
            bias = self.bias + tf.concat(
                [tf.zeros((self.units,), self.bias.dtype),
                 tf.fill((self.units,), tf.constant(self.forget_bias, self.bias.dtype)),
                 tf.zeros((2 * self.units,), self.bias.dtype)], axis=0)  # gates i, f, c, o
        gates = tf.matmul(self.input_kernel, flat)  # (4 * units, N)
        gates = tf.reshape(gates, tf.concat([[constants.NUM_GATES * self.units], rest], 0))
        # The bias joins after the reshape, on the gate axis (4U, 1, ...).
        return gates + tf.reshape(bias, [-1] + [1] * (len(inputs.shape) - 1))

    def step(self, input_gates, state):
        """One step: returns the new `(h, c)` (see `step_values`)."""
        values = self.step_values(input_gates, state)
        return values.h, values.c

    def step_values(self, input_gates, state, kernels=None):
        """The one definition of a step (class docstring), in plain ops, feature-major.

        Args:
            input_gates: `(4 * units, batch)`, this step's `W_x x + b` (forget bias included).
            state: `(h, c)` of shapes `(projection_dim, batch)` and `(units, batch)`.
            kernels: `StepKernels` to read, or None for `step_kernels(batch)` of this
                state's batch. A loop reads them once and passes them to every step; the
                hand-written backward pass passes the tensors it differentiates.

        Returns:
            `StepValues`: the new `h`, `c` and the unclipped values of this step.
        """
        h, c = state
        if kernels is None:
            kernels = self.step_kernels(h.shape[-1])
        z = input_gates + _product(kernels.recurrent, h, kernels.in_out)  # (4U, batch)
        i, f, g, o = self.gate_activations(z)  # blocks i, f, c, o
        c_raw = f * c + i * g  # the forget bias is already in input_gates
        c = self.clip_cell(c_raw)
        h_raw = _product(kernels.projection, o * tf.tanh(c), kernels.in_out)  # (P, batch)
        return StepValues(self.clip_projection(h_raw), c, z, c_raw, h_raw)

    def step_kernels(self, batch=None):
        """The `StepKernels` a step of `batch` rows reads (None: a batch size not known).

        The `(in, out)` copies for a batch of one row in a traced function of a frozen
        float32 cell (module docstring), made now if they are not yet; the stored kernels
        otherwise.
        """
        if batch == 1 and self._keeps_one_row_copies():
            if not self._one_row_copies:
                with tf.init_scope():  # made eagerly, also while a function is traced
                    self._one_row_copies.make(self)
            return StepKernels(*self._one_row_copies.variables, in_out=True)
        return StepKernels(tf.convert_to_tensor(self.recurrent_kernel),
                           tf.convert_to_tensor(self.projection_kernel), in_out=False)

    def _keeps_one_row_copies(self):
        """Whether one-row steps read copies: traced, frozen, float32 (module docstring)."""
        return (not self.trainable and self.compute_dtype == "float32"
                and not tf.executing_eagerly())

    def refresh_one_row_kernels(self):
        """Makes the one-row copies again from the weights as they are now (no-op without
        copies); the loaders and a new freeze do it themselves (module docstring)."""
        if self._one_row_copies:
            self._one_row_copies.refresh(self)

    @property
    def trainable(self):
        return keras.layers.Layer.trainable.fget(self)

    @trainable.setter
    def trainable(self, value):
        keras.layers.Layer.trainable.fset(self, value)
        if not value and hasattr(self, "_one_row_copies"):  # the weights may have changed
            self.refresh_one_row_kernels()

    @staticmethod
    def gate_activations(z):
        """`(i, f, g, o)` of gate pre-activations `z` `(..., 4 * units, batch)` in Keras'
        order i, f, c, o (row blocks): sigmoid, sigmoid, tanh, sigmoid; each
        `(..., units, batch)`."""
        z_i, z_f, z_c, z_o = tf.split(z, constants.NUM_GATES, axis=-2)
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
    def input_dim(self):
        """Width of the inputs the cell was built for."""
        return int(self.input_kernel.shape[1])

    def logical_kernels(self):
        """`(W_h, W_p)` of shapes `(P, 4U)` and `(U, P)`, `(in, out)` (transposed copies,
        differentiable with respect to the variables)."""
        return tf.transpose(self.recurrent_kernel), tf.transpose(self.projection_kernel)

    def logical_array(self, variable):
        """One of the cell's variables as a numpy array, a kernel `(in, out)`."""
        array = np.asarray(variable.numpy())
        return array.T if self._is_kernel(variable) else array

    def logical_weights(self):
        """`self.weights` as numpy arrays with every kernel `(in, out)`: what
        `set_logical_weights` takes (Keras' `get_weights` gives the stored layout)."""
        return [self.logical_array(v) for v in self.weights]

    def set_logical_weights(self, arrays):
        """Assigns `logical_weights()` of a cell of the same shape, any dtype."""
        if len(arrays) != len(self.weights):
            raise ValueError(f"{self.name} holds {len(self.weights)} weights; received "
                             f"{len(arrays)}.")
        for variable, value in zip(self.weights, arrays):
            flip = self._is_kernel(variable)
            expected = tuple(variable.shape)[::-1] if flip else tuple(variable.shape)
            if tuple(np.shape(value)) != expected:
                raise ValueError(f"{variable.path}: expected shape {expected} (in, out); "
                                 f"received {np.shape(value)}.")
            variable.assign(np.transpose(value) if flip else value)
        self.refresh_one_row_kernels()

    def _is_kernel(self, variable):
        """True for one of the kernels, which the cell stores `(out, in)`."""
        return any(variable is getattr(self, name) for name in _KERNEL_NAMES)

    # Keras weight files hold `(in, out)` kernels, as they did before the cell stored them
    # `(out, in)`: files of either layout's era and of any dtype load here. The cell has no
    # sublayers and no non-trainable weights: `self.weights` is the order Keras numbers them.
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
                      forget_bias=self.forget_bias)
        return config

    @classmethod
    def from_config(cls, config):
        return cls(**rebuild_config(config))


class _Copies:
    """The `(in, out)` copies of a cell's `W_h` and `W_p`: plain `tf.Variable`s held outside
    Keras' and TensorFlow's tracking, so no checkpoint, weight file or export holds them."""

    __slots__ = ("variables",)

    def __init__(self):
        self.variables = ()

    def __bool__(self):
        return bool(self.variables)

    def make(self, cell):
        # Made under `tf.init_scope` while a function is traced; without lifting, a
        # `tf.function` does not count them as its own and traces once, not twice.
        self.variables = tuple(
            tf.Variable(tf.transpose(kernel), trainable=False, name=f"{cell.name}_{name}_in_out",
                        experimental_enable_variable_lifting=False)
            for name, kernel in _copied(cell))

    def refresh(self, cell):
        for copy, (_, kernel) in zip(self.variables, _copied(cell)):
            copy.assign(tf.transpose(kernel))


def _copied(cell):
    """The kernels a one-row step reads, as stored `(out, in)`, with their names."""
    return (("recurrent", cell.recurrent_kernel), ("projection", cell.projection_kernel))
