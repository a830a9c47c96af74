"""The functions JAX and PyTorch share (see `keras_elmo.backend`), in `keras.ops`.

The LSTM loop is `keras.ops.scan` over time: `lax.scan` on JAX (compiled once, differentiated
by JAX), a Python loop on PyTorch (differentiated by autograd), each step the cell's own
`step_values`. The input gates `W_x x + b` are computed `GATE_COLUMNS` columns (steps x rows)
at a time, a chunk of steps per iteration of an outer scan, as TensorFlow's loop computes
them: a packed embedding call's gates are never all held at once.
"""

import math

import numpy as np
from keras import ops

from keras_elmo.backend.lstm_types import GATE_COLUMNS

#: The `ResidualBiLSTM` loops that run here, "auto" first ("sequence_gradient" and
#: "one_row_loop" are TensorFlow's own).
LOOP_IMPLEMENTATIONS = ("auto", "batched_loop")


def check_id_range(ids, max_id, message):
    """Refuses ids outside `[0, max_id]` with a `ValueError` quoting the smallest and largest
    id received (ids with values: eager; numpy ones are read where they are, on the host)."""
    if math.prod(ids.shape) == 0:
        return
    if isinstance(ids, np.ndarray):
        low, high = int(ids.min()), int(ids.max())
    else:
        low, high = int(ops.min(ids)), int(ops.max(ids))
    if low < 0 or high > max_id:
        raise ValueError(f"{message}; received ids from {low} to {high}.")


def check_at_most(value, limit, message):
    """Refuses an int scalar above `limit` (a `ValueError`)."""
    if int(value) > limit:
        raise ValueError(f"{message}; received {int(value)}.")


def reverse_sequence(x, lengths, seq_axis, batch_axis):
    """Each sequence of `x` reversed within its own length `lengths` `(batch,)`; positions
    past a sequence's length stay where they are (`tf.reverse_sequence`'s rule)."""
    rank = len(x.shape)
    steps = ops.shape(x)[seq_axis]
    positions = ops.arange(steps, dtype="int32")[None, :]  # (1, T)
    lengths = ops.cast(lengths, "int32")[:, None]  # (batch, 1)
    source = ops.where(positions < lengths, lengths - 1 - positions, positions)  # (batch, T)
    if batch_axis > seq_axis:
        source = ops.transpose(source)  # (T, batch)
    shape = [1] * rank
    shape[batch_axis], shape[seq_axis] = -1, steps
    index = ops.broadcast_to(ops.reshape(source, shape), ops.shape(x))
    return ops.take_along_axis(x, index, axis=seq_axis)


def conv_max(chars, kernel, filters_per_call):
    """`max over positions p of sum_{k,e} chars[:, p + k, e] * kernel[k, e, :]`: the valid
    1-D convolution of `chars` `(rows, K, E)` with `kernel` `(w, E, n)`, max-pooled over
    its `K - w + 1` positions -> `(rows, n)`. At most `filters_per_call` filters per
    convolution: its output `(rows, K - w + 1, filters)` is the char CNN's largest buffer."""
    maxima = [ops.max(ops.conv(chars, kernel[..., start:start + filters_per_call],
                               padding="valid"), axis=1)  # (rows, filters)
              for start in range(0, int(kernel.shape[-1]), filters_per_call)]
    return ops.concatenate(maxima, axis=-1) if len(maxima) > 1 else maxima[0]


def read_variable(variable):
    """A Keras variable's current value as a tensor (the scope's, under `stateless_call`)."""
    return ops.convert_to_tensor(variable)


def take_positions(x, order, axis):
    """`x` `(batch, ..., T, ...)` with its positions along `axis` (>= 1) taken in each
    row's `order` `(batch, T)` (the order broadcast over the other axes)."""
    rank = len(x.shape)
    index = order  # (batch, T) -> (batch, 1.., T, 1..), T at `axis`
    for _ in range(axis - 1):
        index = ops.expand_dims(index, 1)
    for _ in range(rank - 1 - axis):
        index = ops.expand_dims(index, -1)
    return ops.take_along_axis(x, index, axis=axis)


def kernel_product(kernel, x, one_row=False, in_out=False):
    """`W @ x` of a kernel `W` `(out, in)` (or its transpose `(in, out)`, `in_out`) and a
    feature-major `x` `(in, batch)` -> `(out, batch)`."""
    return ops.matmul(ops.transpose(kernel) if in_out else kernel, x)


def run_layer_with_sequence_gradient(cells, gates):
    raise ValueError("implementation='sequence_gradient' runs on Keras' TensorFlow backend "
                     f"only; on this backend ResidualBiLSTM runs {LOOP_IMPLEMENTATIONS}.")


def run_cells(cells, inputs, lengths, initial_states, freeze_after_length, keeps=None,
              one_row=False):
    """Runs independent cells over their own inputs in one time loop (`keras.ops.scan`).

    The arguments and results of every backend's `run_cells` (TensorFlow's in
    keras_elmo/backend/tensorflow/lstm_loop.py says each); `one_row` is ignored here.
    """
    kernels = [cell.step_kernels() for cell in cells]
    weights = [cell.input_gate_weights() for cell in cells]
    num_steps, batch = ops.shape(inputs[0])[1], ops.shape(inputs[0])[2]
    states = [tuple(s) for s in initial_states]
    if isinstance(num_steps, int) and num_steps == 0:  # PyTorch's scan stacks no steps
        return ([ops.zeros((cell.projection_dim, 0, batch), inputs[0].dtype)
                 for cell in cells], states)

    def steps(states, x):
        """The steps of `x["inputs"]` `(input_dim, K, batch)` each, from `states`: their
        gates in one product, then a scan: `(finals, [(K, P, batch)])`."""
        per_step = {"t": x["t"], "gates": [  # (K, 4U, batch) each: a step per row
            ops.transpose(cell.input_gates(xs, w), (1, 0, 2))
            for cell, xs, w in zip(cells, x["inputs"], weights)]}
        if keeps is not None:
            per_step["keeps"] = x["keeps"]
        return ops.scan(step, states, per_step)

    def step(states, x):
        new_states, outputs = [], []
        for k, (cell, kernel) in enumerate(zip(cells, kernels)):
            state = states[k]
            if keeps is not None:  # a new sequence begins here: from a zero state
                keep = x["keeps"][k][None, :]  # (1, batch)
                state = (state[0] * keep, state[1] * keep)
            h, c = cell.step_values(x["gates"][k], state, kernel)[:2]
            outputs.append(h)
            if freeze_after_length:
                running = (x["t"] < lengths)[None, :]  # (1, batch)
                h, c = ops.where(running, h, state[0]), ops.where(running, c, state[1])
            new_states.append((h, c))
        return new_states, outputs

    def part(start, stop):
        """The inputs of steps `[start, stop)`."""
        return {"t": ops.arange(start, stop, dtype="int32"),
                "inputs": [x[:, start:stop] for x in inputs],
                "keeps": None if keeps is None else [k[start:stop] for k in keeps]}

    chunk = max(GATE_COLUMNS // max(batch, 1), 1) if isinstance(batch, int) else None
    if chunk is None or not isinstance(num_steps, int) or num_steps <= chunk:
        finals, outputs = steps(states, part(0, num_steps))  # every step's gates at once
        return [ops.transpose(o, (1, 0, 2)) for o in outputs], finals  # (P, T, batch) each
    # Whole chunks in an outer scan (one chunk's gates exist at a time), then the rest.
    count = num_steps // chunk
    whole = part(0, count * chunk)
    chunks = {"t": ops.reshape(whole["t"], (count, chunk)),
              "inputs": [ops.transpose(ops.reshape(x, (x.shape[0], count, chunk, batch)),
                                       (1, 0, 2, 3))
                         for x in whole["inputs"]],  # (n, input_dim, K, batch) each
              "keeps": None if keeps is None else [
                  ops.reshape(k, (count, chunk, batch)) for k in whole["keeps"]]}
    states, outputs = ops.scan(steps, states, chunks)  # (n, K, P, batch) each
    outputs = [ops.reshape(o, (count * chunk,) + tuple(o.shape[2:])) for o in outputs]
    if count * chunk < num_steps:
        states, rest = steps(states, part(count * chunk, num_steps))
        outputs = [ops.concatenate([o, r], axis=0) for o, r in zip(outputs, rest)]
    return [ops.transpose(o, (1, 0, 2)) for o in outputs], states  # (P, T, batch) each
