"""`ResidualBiLSTM`: ELMo's contextual encoder, two independent LSTM stacks (section 3)."""

import keras
from keras import ops

from keras_elmo import backend, constants
from keras_elmo.formats.options import BiLMOptions, as_options
from keras_elmo.layers.lstm_projection_cell import LSTMProjectionCell
from keras_elmo.layers.sentence_boundaries import sequence_ends
from keras_elmo.validation import check_choice, check_fraction, check_int
from keras_elmo.layers.host_initializers import HostZeros

#: The loops a `ResidualBiLSTM` can run (`implementation`), "auto" first; on Keras' JAX
#: and PyTorch backends "auto" and "batched_loop" (`keras_elmo.backend`).
IMPLEMENTATIONS = ("auto", "sequence_gradient", "batched_loop", "one_row_loop")


@keras.saving.register_keras_serializable(package="keras_elmo")
class ResidualBiLSTM(keras.layers.Layer):
    """Forward and backward stacks of LSTM-with-projection layers with residual connections.

    The forward stack reads each sentence left to right, the backward stack right to left
    *within its own length*, so padding never reaches a real position. With
    `use_skip_connections`, every layer after the first outputs `h + x` (its input added),
    while the `h` fed back into its next step excludes `x`. `W_x x` is one product over
    many steps; only `W_h h` runs inside the time loop, both directions in the same loop.

    Stateless by default: every sentence starts from zero `(h, c)`. With `stateful=True`
    each batch row starts from the final state its row reached in the previous call (after
    its last real step, residual excluded), as bilm-tf and AllenNLP do; rows at or past the
    call's batch size keep their state; `reset_states()` zeroes everything.

    Args:
        units: int, LSTM memory size (`lstm.dim`, 4096 published).
        projection_dim: int, size of inputs and of each direction's outputs (512).
        num_layers: int, layers per direction (2).
        cell_clip: float or None, memory clip value (3).
        proj_clip: float or None, projection clip value (3).
        use_skip_connections: bool, residual connections after the first layer (True).
        dropout: float in [0, 1), dropout on every layer's input when `training=True`.
        stateful: bool, carry `(h, c)` across calls per batch row (False).
        max_batch_size: int, rows of the stored state when `stateful` (128).
        forget_bias: float, constant added to every forget gate (1.0; 0.0 for a model
            whose stored biases hold it, see `LSTMProjectionCell`).
        implementation: the loop each call runs, all giving the same numbers and gradients
            (docs/model.md, "How it runs"):
            - `"sequence_gradient"`: a loop whose backward pass is written by hand for whole
              sequences (`keras_elmo.backend.tensorflow.sequence_gradient`), the fastest to
              differentiate; stateless, without `sequence_starts`; TensorFlow only.
            - `"batched_loop"`: the plain loop, any batch, differentiated by autodiff (also
              inside a SavedModel).
            - `"one_row_loop"`: the plain loop for a batch of one row known when traced,
              its products `x^T W^T`; TensorFlow only.
            - `"auto"` (default): on TensorFlow `"sequence_gradient"` when training where
              it applies, else `"one_row_loop"` for a batch of one row known when traced,
              else `"batched_loop"`; the same under XLA. On JAX and PyTorch
              `"batched_loop"` (`lax.scan` / a Python loop over the steps).
        zero_init: bool, create the cells' kernels as zeros instead of drawing them, for an
            encoder a weight file fills next (`BiLM.from_weights`); not in the config.
        **kwargs: base layer arguments.

    Call arguments:
        inputs: float `(batch, num_tokens, projection_dim)`.
        mask: bool `(batch, num_tokens)`, True on real tokens, which come first in each row.
            Defaults to all True.
        training: bool, enables dropout (and, with `"auto"`, the sequence-gradient loop).
        skip_boundary_steps: bool, for inputs framed as `<S> t1 ... tn </S>` whose outputs
            at the frame are not read (`BiLM`, the training objective): each direction
            skips its final step, and the forward half at each row's last real position
            and the backward half at position 0 are zero. Stateless encoders only.
        sequence_starts: optional bool `(batch, T)`, True where a sequence begins: a row
            then holds several sequences back to back, each read from a zero state in both
            directions, so each one's outputs are those of running it alone (docs/model.md
            section 3, "Packed rows"). Stateless, without `skip_boundary_steps`.

    Returns:
        float `(batch, num_layers, num_tokens, 2 * projection_dim)`: `[..., :P]` is the
        forward output of layer j, `[..., P:]` the backward one; exactly zero at masked
        positions.

    Example:
    >>> encoder = ResidualBiLSTM(units=12, projection_dim=8, num_layers=2)
    >>> x = np.random.rand(2, 5, 8).astype("float32")
    >>> encoder(x, mask=np.array([[1, 1, 1, 0, 0], [1] * 5], bool)).shape
    (2, 2, 5, 16)
    """

    def __init__(self, units=4096, projection_dim=512, num_layers=2, cell_clip=3.0,
                 proj_clip=3.0, use_skip_connections=True, dropout=0.0, stateful=False,
                 max_batch_size=128, forget_bias=constants.FORGET_BIAS, implementation="auto",
                 zero_init=False, **kwargs):
        super().__init__(**kwargs)
        checked = BiLMOptions(lstm_units=units, projection_dim=projection_dim,
                              num_layers=num_layers, cell_clip=cell_clip, proj_clip=proj_clip,
                              forget_bias=forget_bias)
        self.units = checked.lstm_units
        self.projection_dim = checked.projection_dim
        self.num_layers = checked.num_layers
        self.cell_clip = checked.cell_clip
        self.proj_clip = checked.proj_clip
        self.forget_bias = checked.forget_bias
        self.use_skip_connections = bool(use_skip_connections)
        self.dropout = check_fraction("dropout", dropout)
        self.stateful = bool(stateful)
        self.max_batch_size = (check_int("max_batch_size", max_batch_size) if stateful
                               else int(max_batch_size))
        self.implementation = check_choice("implementation", implementation, IMPLEMENTATIONS)
        if self.implementation not in backend.LOOP_IMPLEMENTATIONS:
            raise ValueError(f"implementation={self.implementation!r} runs on Keras' "
                             f"TensorFlow backend only; on {backend.NAME} ResidualBiLSTM runs "
                             f"{' or '.join(map(repr, backend.LOOP_IMPLEMENTATIONS))}.")
        if self.stateful and self.implementation == "sequence_gradient":
            raise ValueError("implementation='sequence_gradient' runs from zero states; "
                             "received stateful=True (use 'batched_loop' or 'auto').")
        self._zero_init = bool(zero_init)
        self.supports_masking = True
        if self.dropout > 0:
            self.seed_generator = keras.random.SeedGenerator(seed=None)

    @classmethod
    def from_options(cls, options, **kwargs):
        """Builds the encoder of a `BiLMOptions`, dict or options.json path."""
        o = as_options(options)
        return cls(units=o.lstm_units, projection_dim=o.projection_dim,
                   num_layers=o.num_layers, cell_clip=o.cell_clip, proj_clip=o.proj_clip,
                   use_skip_connections=o.use_skip_connections, forget_bias=o.forget_bias,
                   **kwargs)

    def build(self, input_shape):
        if input_shape[-1] is not None and input_shape[-1] != self.projection_dim:
            raise ValueError(f"ResidualBiLSTM expects inputs (batch, tokens, "
                             f"{self.projection_dim}); received {tuple(input_shape)}.")
        self.cells = {d: [] for d in constants.DIRECTIONS}  # cells[direction][layer]
        for direction in constants.DIRECTIONS:
            for layer in range(self.num_layers):
                cell = LSTMProjectionCell(self.units, self.projection_dim, self.cell_clip,
                                          self.proj_clip, forget_bias=self.forget_bias,
                                          zero_init=self._zero_init,
                                          name=f"{direction}_layer_{layer}",
                                          dtype=self.dtype_policy)
                cell.build((None, self.projection_dim))
                self.cells[direction].append(cell)
        if self.stateful:
            shape = (self.num_layers, len(constants.DIRECTIONS), self.max_batch_size)
            self.state_h = self.add_weight(name="state_h", shape=shape + (self.projection_dim,),
                                           initializer=HostZeros(), trainable=False)
            self.state_c = self.add_weight(name="state_c", shape=shape + (self.units,),
                                           initializer=HostZeros(), trainable=False)

    def reset_states(self):
        """Zeroes the carried `(h, c)` of a stateful encoder (no-op when stateless)."""
        if self.stateful and self.built:
            self.state_h.assign(ops.zeros(self.state_h.shape, self.state_h.dtype))
            self.state_c.assign(ops.zeros(self.state_c.shape, self.state_c.dtype))

    def resolve_implementation(self, training=False, batch_size=None, packed=False):
        """The loop a call runs (`implementation`, "auto" resolved).

        Args:
            training: the call's `training`.
            batch_size: the batch size known when the call is traced, or None.
            packed: the call has `sequence_starts`.

        Raises:
            ValueError: the chosen loop does not apply to such a call.
        """
        choice = self.implementation
        runs = backend.LOOP_IMPLEMENTATIONS
        if choice == "auto":
            if training and not (self.stateful or packed) and "sequence_gradient" in runs:
                return "sequence_gradient"
            return ("one_row_loop" if batch_size == 1 and "one_row_loop" in runs
                    else "batched_loop")
        if choice == "sequence_gradient" and packed:
            raise ValueError("implementation='sequence_gradient' knows no sequence starts; "
                             "received a call with sequence_starts (use 'batched_loop' or "
                             "'auto').")
        if choice == "one_row_loop" and batch_size != 1:
            raise ValueError("implementation='one_row_loop' runs a batch of one row known "
                             f"when traced; received batch size {batch_size} (use "
                             "'batched_loop' or 'auto').")
        return choice

    def call(self, inputs, mask=None, training=False, skip_boundary_steps=False,
             sequence_starts=None):
        if skip_boundary_steps and self.stateful:
            raise ValueError("skip_boundary_steps=True needs a stateless ResidualBiLSTM: a "
                             "stateful one carries the state after every row's last step; "
                             "received stateful=True.")
        if sequence_starts is not None and (self.stateful or skip_boundary_steps):
            raise ValueError("sequence_starts (rows holding several sequences) needs a "
                             "stateless ResidualBiLSTM without skip_boundary_steps; received "
                             f"stateful={self.stateful}, "
                             f"skip_boundary_steps={bool(skip_boundary_steps)}.")
        inputs = ops.cast(inputs, self.compute_dtype)
        implementation = self.resolve_implementation(bool(training), inputs.shape[0],
                                                     sequence_starts is not None)
        batch, num_tokens = ops.shape(inputs)[0], ops.shape(inputs)[1]
        if mask is None:
            mask = ops.ones((batch, num_tokens), "bool")
        mask = ops.cast(mask, "bool")
        lengths = ops.sum(ops.cast(mask, "int32"), axis=1)  # (batch,)
        # With skip_boundary_steps each direction leaves out its last step in its own
        # reading order (the forward `</S>`, the backward `<S>` of the longest rows).
        num_steps = num_tokens
        if skip_boundary_steps:
            num_steps = (max(num_tokens - 1, 0) if isinstance(num_tokens, int)
                         else ops.maximum(num_tokens - 1, 0))
        initial = self._initial_states(batch)
        keeps = (None if sequence_starts is None else
                 _state_keeps(ops.cast(sequence_starts, "bool"), mask, lengths,
                              self.compute_dtype))
        # Feature-major inside, (features, T, batch): every product is `W @ x`.
        inputs = ops.transpose(inputs, (2, 1, 0))  # (P, T, batch)
        # Each direction's layer inputs, in that direction's own reading order.
        layer_inputs = [inputs[:, :num_steps], _reverse(inputs, lengths)[:, :num_steps]]
        keep = self._kept_positions(mask, lengths, num_tokens, skip_boundary_steps)
        outputs, finals = [], []
        for layer in range(self.num_layers):
            cells = [self.cells[d][layer] for d in constants.DIRECTIONS]
            dropped = [self._dropout(x, training) for x in layer_inputs]
            if implementation == "sequence_gradient":
                gates = [cell.input_gates(x) for cell, x in zip(cells, dropped)]  # (4U, S, b)
                hs, states = backend.run_layer_with_sequence_gradient(cells, gates), None
            else:
                hs, states = backend.run_cells(cells, dropped, lengths, initial[layer],
                                               self.stateful, keeps,
                                               one_row=implementation == "one_row_loop")
            finals.append(states)
            if self.use_skip_connections and layer > 0:
                hs = [h + x for h, x in zip(hs, dropped)]
            layer_inputs = hs  # (P, num_steps, batch) each
            full = [ops.pad(h, ((0, 0), (0, num_tokens - num_steps), (0, 0))) for h in hs]
            halves = [full[0], _reverse(full[1], lengths)]  # (P, T, batch) each, text order
            zero = ops.zeros((), full[0].dtype)  # a scalar: no second (P, T, batch) buffer
            outputs.append(ops.concatenate([ops.where(k, h, zero)
                                            for k, h in zip(keep, halves)],
                                           axis=0))  # (2P, T, b)
        if self.stateful:
            self._store_states(finals, batch)
        return ops.transpose(ops.stack(outputs), (3, 0, 2, 1))  # (batch, num_layers, T, 2P)

    @staticmethod
    def _kept_positions(mask, lengths, num_tokens, skip_boundary_steps):
        """`[forward, backward]` bool `(1, T, batch)`: where each direction's output is kept
        (real tokens; with skip_boundary_steps not the forward half at each row's last
        position nor the backward half at position 0, whose steps did not run)."""
        real = ops.transpose(mask)  # (T, batch)
        if not skip_boundary_steps:
            return [real[None], real[None]]
        positions = ops.arange(num_tokens, dtype="int32")[:, None]  # (T, 1)
        forward = positions < lengths[None, :] - 1  # (T, batch)
        backward = ops.logical_and(real, positions > 0)  # (T, batch)
        return [forward[None], backward[None]]

    def _dropout(self, x, training):
        if training and self.dropout > 0:
            return keras.random.dropout(x, self.dropout, seed=self.seed_generator)
        return x

    def _initial_states(self, batch):
        """`[layer][direction] -> (h, c)` at the start of the call, feature-major
        (`(P, batch)`, `(U, batch)`)."""
        if not self.stateful:
            zeros = self.cells["forward"][0].zero_state(batch)
            return [[zeros] * len(constants.DIRECTIONS) for _ in range(self.num_layers)]
        backend.check_at_most(
            batch, self.max_batch_size,
            f"stateful ResidualBiLSTM got a batch larger than max_batch_size="
            f"{self.max_batch_size}")
        return [[(ops.transpose(self.state_h[layer, d, :batch]),
                  ops.transpose(self.state_c[layer, d, :batch]))
                 for d in range(len(constants.DIRECTIONS))] for layer in range(self.num_layers)]

    def _store_states(self, finals, batch):
        """Keeps each row's final `(h, c)`, stored batch-major `(L, 2, max_batch, ...)`."""
        new_h = ops.stack([ops.stack([ops.transpose(s[0]) for s in layer])
                           for layer in finals])  # (L, 2, b, P)
        new_c = ops.stack([ops.stack([ops.transpose(s[1]) for s in layer])
                           for layer in finals])  # (L, 2, b, U)
        self.state_h.assign(ops.concatenate([new_h, self.state_h[:, :, batch:]], axis=2))
        self.state_c.assign(ops.concatenate([new_c, self.state_c[:, :, batch:]], axis=2))

    def compute_mask(self, inputs, mask=None):
        return mask

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.num_layers, input_shape[1], 2 * self.projection_dim)

    def get_config(self):
        config = super().get_config()
        config.update(units=self.units, projection_dim=self.projection_dim,
                      num_layers=self.num_layers, cell_clip=self.cell_clip,
                      proj_clip=self.proj_clip, use_skip_connections=self.use_skip_connections,
                      dropout=self.dropout, stateful=self.stateful,
                      max_batch_size=self.max_batch_size, forget_bias=self.forget_bias,
                      implementation=self.implementation)
        return config


def _reverse(x, lengths):
    """Reverses each sequence of feature-major `x` `(dim, T, batch)` within its own length."""
    return backend.reverse_sequence(x, lengths, seq_axis=1, batch_axis=2)


def _state_keeps(starts, mask, lengths, dtype):
    """`[forward, backward]` `(T, batch)` of 0 where that direction's state is zeroed before
    the step (a sequence begins there in its reading order), 1 elsewhere; the backward
    ones in the backward reading order (a backward sequence begins where a forward one
    ends)."""
    starts = ops.logical_and(starts, mask)  # (batch, T)
    ends = backend.reverse_sequence(sequence_ends(starts, lengths), lengths, seq_axis=1,
                                    batch_axis=0)
    return [ops.transpose(1 - ops.cast(begins, dtype)) for begins in (starts, ends)]
