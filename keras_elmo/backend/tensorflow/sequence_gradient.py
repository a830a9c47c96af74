"""The training loop of one biLSTM layer, with a gradient written for the whole sequence.

`ResidualBiLSTM`'s `implementation="sequence_gradient"` (what `"auto"` runs in training):
every direction of one layer advances in one time loop of the cells' own step
(`LSTMProjectionCell.step_values`), which keeps three tensors per step (`z`, `c_raw`,
`h_raw`); the backward pass is a second, hand-written loop carrying only `(dh, dc)`, and
each weight's gradient is one product over every step after it. Why it is faster than
autodiff of the loop, and why inference never runs it: docs/model.md, "The sequence
gradient". Same numbers and gradients as the plain loop (tests/test_lstm_gradient.py,
tests/test_implementations.py); initial states are zero (stateless).

Example:
>>> outputs = run_layer_with_sequence_gradient(cells, gates)  # doctest: +SKIP
>>> [o.shape for o in outputs]  # one (projection_dim, T, batch) per direction
"""

import tensorflow as tf

from keras_elmo.backend.lstm_types import StepKernels


def run_layer_with_sequence_gradient(cells, gates):
    """Runs independent cells (one per direction) over their own input gates.

    Args:
        cells: list of built `LSTMProjectionCell`, same units, projection and clips.
        gates: list of feature-major `(4 * units, T, batch)`, each cell's `input_gates(x)`
            (forget bias included), real steps first in every row.

    Returns:
        list of feature-major `(projection_dim, T, batch)`: each cell's `h` at every step,
        from zero initial states.
    """
    kernels = []
    for cell in cells:
        kernels += [cell.recurrent_kernel, cell.projection_kernel]  # as stored: (4U, P), (P, U)
    return list(_make_layer(cells)(*gates, *(tf.convert_to_tensor(k) for k in kernels)))


def _inside(x, clip):
    """1.0 where `clip_by_value(x, -clip, clip)` passes its gradient, else 0.0; None when
    there is no clip (nothing to multiply by)."""
    if clip is None:
        return None
    return tf.cast(tf.abs(x) <= clip, x.dtype)


def _times(x, factor):
    return x if factor is None else x * factor


def _columns(x):
    """`(T, n, batch)` -> `(n, T * batch)`, columns in the order of `input_gates`' output."""
    return tf.reshape(tf.transpose(x, (1, 0, 2)), (x.shape[1], -1))


def _rows(x):
    """`(T, n, batch)` -> `(T * batch, n)`, rows in the same order as `_columns`'."""
    return tf.reshape(tf.transpose(x, (0, 2, 1)), (-1, x.shape[1]))


def _make_layer(cells):
    """The `tf.custom_gradient` function of these cells: `(*gates, *kernels) -> outputs`."""
    num_cells = len(cells)

    @tf.custom_gradient
    def layer(*args):
        gates, kernels = args[:num_cells], args[num_cells:]
        w_h, w_p = kernels[0::2], kernels[1::2]  # (4U, P), (P, U) per cell
        saved = _forward(cells, gates, w_h, w_p)
        outputs = [tf.transpose(cell.clip_projection(h_raw), (1, 0, 2))
                   for cell, h_raw in zip(cells, saved["h_raw"])]  # (P, T, batch)

        def grad(*d_outputs):
            d_gates, d_kernels = [], []
            for k, cell in enumerate(cells):
                d_z, d_w_h, d_w_p = _backward(
                    cell, tf.transpose(d_outputs[k], (1, 0, 2)), saved["z"][k],
                    saved["c_raw"][k], saved["h_raw"][k], w_h[k], w_p[k])
                d_gates.append(tf.transpose(d_z, (1, 0, 2)))  # (4U, T, batch)
                d_kernels += [d_w_h, d_w_p]
            return d_gates + d_kernels

        return outputs, grad

    return layer


def _forward(cells, gates, w_h, w_p):
    """The forward time loop of the cells' own step; returns the per-step tensors the
    backward pass reads.

    Returns:
        dict of lists (one per cell) of time-major, feature-major tensors: `z`
        `(T, 4U, batch)`, `c_raw` `(T, U, batch)`, `h_raw` `(T, P, batch)`.
    """
    num_steps, batch = tf.shape(gates[0])[1], tf.shape(gates[0])[2]
    dtype = gates[0].dtype
    shapes = [tuple(w.shape) for w in w_p]  # (P, U) per cell
    states = [(tf.zeros((p, batch), dtype), tf.zeros((u, batch), dtype)) for p, u in shapes]

    def arrays(height):
        return tf.TensorArray(dtype, size=num_steps, element_shape=(height, None))

    saved = {"z": [arrays(4 * u) for _, u in shapes], "c_raw": [arrays(u) for _, u in shapes],
             "h_raw": [arrays(p) for p, _ in shapes]}

    def body(t, states, saved):
        new_states, new_saved = [], {key: [] for key in saved}
        for k, (cell, state) in enumerate(zip(cells, states)):
            step = cell.step_values(gates[k][:, t], state, StepKernels(w_h[k], w_p[k]))
            new_states.append((step.h, step.c))
            for key in ("z", "c_raw", "h_raw"):
                new_saved[key].append(saved[key][k].write(t, getattr(step, key)))
        return t + 1, new_states, new_saved

    _, _, saved = tf.while_loop(lambda t, *_: t < num_steps, body,
                                (tf.constant(0), states, saved))
    # (T, height, batch) each; the reshape keeps that shape when the loop ran no step
    return {key: [tf.reshape(array.stack(), (num_steps, array.element_shape[0], batch))
                  for array in arrays_] for key, arrays_ in saved.items()}


def _backward(cell, d_h, z, c_raw, h_raw, w_h, w_p):
    """Gradients of one cell's sequence: `(d input gates, d W_h, d W_p)`.

    `d_h` `(T, P, batch)` is the upstream gradient of the clipped outputs; `z`, `c_raw`,
    `h_raw` are the forward loop's saved tensors; `w_h` `(4U, P)`, `w_p` `(P, U)` as stored.
    Returns `d z` `(T, 4U, batch)` and the kernels' gradients as stored.
    """
    units = c_raw.shape[1]
    # Whole-sequence tensors of the forward pass (T, ..., batch), computed once.
    i, f, g, o = cell.gate_activations(z)
    c = cell.clip_cell(c_raw)
    tanh_c = tf.tanh(c)
    c_prev = tf.concat([tf.zeros_like(c[:1]), c], axis=0)[:-1]  # c_{t-1}, zero at t = 0
    h = cell.clip_projection(h_raw)
    h_prev = tf.concat([tf.zeros_like(h[:1]), h], axis=0)[:-1]  # h_{t-1}
    inside_h = _inside(h_raw, cell.proj_clip)  # (T, P, batch) or None
    inside_c = _inside(c_raw, cell.cell_clip)  # (T, U, batch) or None
    dm_to_dc = _times(o * (1.0 - tanh_c * tanh_c), inside_c)  # d c_raw / d m, per unit
    # dz = [dc; dc; dc; dm] * gate_factors: d z / d c_raw for i, f, c and d z_o / d m.
    gate_factors = tf.concat([g * i * (1.0 - i), c_prev * f * (1.0 - f), i * (1.0 - g * g),
                              tanh_c * o * (1.0 - o)], axis=1)  # (T, 4U, batch)
    w_h_t, w_p_t = tf.transpose(w_h), tf.transpose(w_p)  # contiguous (P, 4U), (U, P)
    num_steps, batch = tf.shape(z)[0], tf.shape(z)[2]
    dtype = z.dtype
    d_z_array = tf.TensorArray(dtype, size=num_steps, element_shape=(4 * units, None))
    d_h_raw_array = tf.TensorArray(dtype, size=num_steps, element_shape=(h.shape[1], None))

    def body(t, d_h_next, d_c_next, d_z_array, d_h_raw_array):
        d_h_raw = _times(d_h[t] + d_h_next, None if inside_h is None else inside_h[t])
        d_m = tf.matmul(w_p_t, d_h_raw)  # (U, batch)
        d_c_raw = _times(d_c_next, None if inside_c is None else inside_c[t]) + d_m * dm_to_dc[t]
        d_z = tf.concat([d_c_raw, d_c_raw, d_c_raw, d_m], axis=0) * gate_factors[t]
        return (t - 1, tf.matmul(w_h_t, d_z), d_c_raw * f[t], d_z_array.write(t, d_z),
                d_h_raw_array.write(t, d_h_raw))

    initial = (num_steps - 1, tf.zeros((h.shape[1], batch), dtype),
               tf.zeros((units, batch), dtype), d_z_array, d_h_raw_array)
    _, _, _, d_z_array, d_h_raw_array = tf.while_loop(lambda t, *_: t >= 0, body, initial)
    d_z = tf.reshape(d_z_array.stack(), (num_steps, 4 * units, batch))  # (T, 4U, batch)
    d_h_raw = tf.reshape(d_h_raw_array.stack(), (num_steps, h.shape[1], batch))  # (T, P, b)
    d_w_h = tf.matmul(_columns(d_z), _rows(h_prev))  # (4U, T*b) @ (T*b, P) = (4U, P)
    d_w_p = tf.matmul(_columns(d_h_raw), _rows(o * tanh_c))  # (P, T*b) @ (T*b, U) = (P, U)
    return d_z, d_w_h, d_w_p
