"""TensorFlow's plain LSTM loop: a `tf.while_loop` over chunks of input gates.

`ResidualBiLSTM`'s `"batched_loop"` and `"one_row_loop"` on the TensorFlow backend (and
inference under `"auto"`): both directions of one layer advance in one loop; the input
gates `W_x x + b` are computed `GATE_COLUMNS` columns (steps x rows) at a time, so a long
sentence's gates are never all held at once (docs/performance.md).
"""

import tensorflow as tf

from keras_elmo.backend.lstm_types import GATE_COLUMNS


def run_cells(cells, inputs, lengths, initial_states, freeze_after_length, keeps=None,
               one_row=False):
    """Runs independent cells over their own inputs in one time loop (plain ops: autodiff
    differentiates it).

    The input gates are computed `GATE_COLUMNS` columns (steps x rows) at a time, one chunk
    of steps after the other. `one_row`: a batch of one row, whose chunk of gates is read
    time-major (a step's gates a contiguous row) and whose products are `x^T W^T`.

    Args:
        cells: list of `LSTMProjectionCell`.
        inputs: list of feature-major `(input_dim, T, batch)`, each cell's inputs, real
            steps first.
        lengths: int32 `(batch,)`.
        initial_states: list of `(h, c)`, one per cell, `(P, batch)` and `(U, batch)`.
        freeze_after_length: keep each row's state fixed after its last real step, so the
            final state is the one at `lengths - 1` (needed only when state is carried).
        keeps: None, or per cell a `(T, batch)` factor of the state before each step (0
            where a new sequence begins in the row: `_state_keeps`).
        one_row: bool, see above.

    Returns:
        `(outputs, final_states)`: a list of `(projection_dim, T, batch)` and one of `(h, c)`.
    """
    # Read once per call, when this layer's inputs exist (a transpose of `step_kernels` is
    # then held by one layer at a time).
    with tf.control_dependencies(inputs[:1] if not tf.executing_eagerly() else []):
        kernels = [cell.step_kernels(one_row) for cell in cells]
    num_steps, batch = tf.shape(inputs[0])[1], tf.shape(inputs[0])[2]
    # steps whose input gates exist at once (a batch of no rows runs its steps one by one)
    chunk = tf.maximum(GATE_COLUMNS // tf.maximum(batch, 1), 1)
    outputs = [tf.TensorArray(inputs[0].dtype, size=num_steps,
                              element_shape=(cell.projection_dim, inputs[0].shape[-1]))
               for cell in cells]

    def chunk_body(start, states, outputs):
        stop = tf.minimum(start + chunk, num_steps)
        gates = [cell.input_gates(x[:, start:stop])
                 for cell, x in zip(cells, inputs)]  # (4U, stop - start, batch) each
        if one_row:  # time-major (K, 4U): a step's gates are a row, not a strided gather
            gates = [tf.transpose(g[..., 0]) for g in gates]

        def step_gates(gate, t):
            """This step's `(4U, batch)` slice of a chunk's gates."""
            return tf.reshape(gate[t - start], (-1, 1)) if one_row else gate[:, t - start]

        def step_body(t, states, outputs):
            new_states, new_outputs = [], []
            for k, (cell, kernel, gate, state, out) in enumerate(
                    zip(cells, kernels, gates, states, outputs)):
                if keeps is not None:  # a new sequence begins here: from a zero state
                    keep = keeps[k][t][tf.newaxis, :]  # (1, batch)
                    state = (state[0] * keep, state[1] * keep)
                h, c = cell.step_values(step_gates(gate, t), state, kernel, one_row)[:2]
                new_outputs.append(out.write(t, h))
                if freeze_after_length:
                    running = (t < lengths)[tf.newaxis, :]  # (1, batch)
                    h, c = tf.where(running, h, state[0]), tf.where(running, c, state[1])
                new_states.append((h, c))
            return t + 1, new_states, new_outputs

        # At most two steps in flight: a step's gate slice is made one step ahead at most.
        _, states, outputs = tf.while_loop(lambda t, *_: t < stop, step_body,
                                           (start, states, outputs), parallel_iterations=2)
        return stop, states, outputs

    # One chunk at a time: the next chunk's gates are not made while this one runs.
    _, finals, outputs = tf.while_loop(
        lambda start, *_: start < num_steps, chunk_body,
        (tf.constant(0), list(initial_states), outputs), parallel_iterations=1)
    # (T, P, batch) -> (P, T, batch); the reshape keeps the shape when the loop ran no step
    return [tf.transpose(tf.reshape(o.stack(), (num_steps, cell.projection_dim, batch)),
                         (1, 0, 2)) for o, cell in zip(outputs, cells)], finals
