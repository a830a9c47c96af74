"""The LSTM-with-projection loop over whole sequences, with a hand-written backward pass.

Training needs the gradient of a whole sentence, not of one step. A gradient per step (see
`lstm_projection_cell.lstm_projection_step`) makes the backward loop compute the weight
gradients `h_{t-1}^T dz_t` and `m_t^T dh_t` once per step, as small matmuls of `batch`
rows, and sum them. Here the backward loop carries only what is recurrent (`dh`, `dc`),
stores every step's `dz_t` and `dh_raw_t`, and the weight gradients are ONE matmul each
over all `T * batch` rows after the loop (as the forward pass already hoists `x W_x`).
Every elementwise factor of `dz` that does not depend on the recurrence is computed for all
steps at once before the backward loop. The formulas are those of ELMO_SPEC.md section 3:

    z_t = gates_x_t + h_{t-1} W_h                  # gates i, f, c, o (forget bias in gates_x)
    c_t = clip(sigmoid(z_f) c_{t-1} + sigmoid(z_i) tanh(z_c), cell_clip)
    h_t = clip((sigmoid(z_o) tanh(c_t)) W_p, proj_clip)

Several independent cells (the two directions of a layer) advance in the same loops, so
their small matmuls can run side by side.

Example:
>>> gates = tf.random.normal((5, 2, 4 * 6))               # (T, batch, 4U)
>>> h0, c0 = tf.zeros((2, 4)), tf.zeros((2, 6))
>>> w_h, w_p = tf.random.normal((4, 24)), tf.random.normal((6, 4))
>>> [hs] = lstm_projection_sequences([gates], [(h0, c0)], [(w_h, w_p)], 3.0, 3.0)
>>> hs.shape                                              # (T, batch, P)
TensorShape([5, 2, 4])
"""

import tensorflow as tf

from keras_elmo import constants


def _clip(x, clip):
    return x if clip is None else tf.clip_by_value(x, -clip, clip)


def _inside(x, clip):
    """1.0 where `clip_by_value(x, -clip, clip)` passes the gradient, else 0.0."""
    if clip is None:
        return tf.ones_like(x)
    return tf.cast(tf.logical_and(x >= -clip, x <= clip), x.dtype)


def _forward(gates_x, initial, kernels, cell_clip, proj_clip):
    """Runs the cells; returns per cell `(hs, acts, c_raws, h_raws)`, each time-major."""
    num_steps = tf.shape(gates_x[0])[0]
    dtype = gates_x[0].dtype
    arrays = [tuple(tf.TensorArray(dtype, size=num_steps) for _ in range(4)) for _ in gates_x]
    gate_arrays = [tf.TensorArray(dtype, size=num_steps).unstack(g) for g in gates_x]

    def body(t, states, arrays):
        new_states, new_arrays = [], []
        for gates, (h, c), (w_h, w_p), (hs, acts, c_raws, h_raws) in zip(
                gate_arrays, states, kernels, arrays):
            z = gates.read(t) + tf.matmul(h, w_h)  # (batch, 4U)
            z_i, z_f, z_c, z_o = tf.split(z, constants.NUM_GATES, axis=-1)
            i, f, g, o = tf.sigmoid(z_i), tf.sigmoid(z_f), tf.tanh(z_c), tf.sigmoid(z_o)
            c_raw = f * c + i * g  # (batch, U)
            c_new = _clip(c_raw, cell_clip)
            h_raw = tf.matmul(o * tf.tanh(c_new), w_p)  # (batch, P)
            h_new = _clip(h_raw, proj_clip)
            new_states.append((h_new, c_new))
            new_arrays.append((hs.write(t, h_new), acts.write(t, tf.concat([i, f, g, o], -1)),
                               c_raws.write(t, c_raw), h_raws.write(t, h_raw)))
        return t + 1, new_states, new_arrays

    _, _, arrays = tf.while_loop(lambda t, *_: t < num_steps, body,
                                 (tf.constant(0), [tuple(s) for s in initial], arrays))
    return [[a.stack() for a in cell_arrays] for cell_arrays in arrays]


def _backward_factors(acts, c_raws, c0, cell_clip):
    """Per-step factors of the backward pass that do not depend on the recurrence.

    Returns `(k, to_dc, keep_c, f, m)`, all `(T, batch, U)` but `k` `(T, batch, 4U)`:
    `dc_raw_t = dc_next * keep_c_t + dm_t * to_dc_t`, `dz_t = concat([dc_raw_t] * 3 +
    [dm_t]) * k_t`, `dc_next = dc_raw_t * f_t`, and `m_t = o_t tanh(c_t)` (for `d W_p`).
    """
    i, f, g, o = tf.split(acts, constants.NUM_GATES, axis=-1)  # each (T, batch, U)
    c_new = _clip(c_raws, cell_clip)
    c_prev = tf.concat([c0[tf.newaxis], c_new[:-1]], axis=0)  # (T, batch, U)
    t = tf.tanh(c_new)
    keep_c = _inside(c_raws, cell_clip)
    k = tf.concat([g * i * (1.0 - i), c_prev * f * (1.0 - f), i * (1.0 - g * g),
                   t * o * (1.0 - o)], axis=-1)  # (T, batch, 4U)
    to_dc = o * (1.0 - t * t) * keep_c
    return k, to_dc, keep_c, f, o * t


def _backward(upstream, saved, initial, kernels, cell_clip, proj_clip):
    """Gradients of every cell's `(gates_x, h0, c0, W_h, W_p)` given `d hs`."""
    num_steps = tf.shape(upstream[0])[0]
    prepared = []
    for (hs, acts, c_raws, h_raws), (h0, c0) in zip(saved, initial):
        k, to_dc, keep_c, f, m = _backward_factors(acts, c_raws, c0, cell_clip)
        prepared.append(dict(k=k, to_dc=to_dc, keep_c=keep_c, f=f, m=m,
                             keep_h=_inside(h_raws, proj_clip),
                             h_prev=tf.concat([h0[tf.newaxis], hs[:-1]], axis=0)))
    dtype = upstream[0].dtype
    out_arrays = [(tf.TensorArray(dtype, size=num_steps), tf.TensorArray(dtype, size=num_steps))
                  for _ in upstream]  # (dz, dh_raw) per cell
    carries = [(tf.zeros_like(h0), tf.zeros_like(c0)) for h0, c0 in initial]

    def body(t, carries, out_arrays):
        new_carries, new_arrays = [], []
        for dh_seq, p, (w_h, w_p), (dh_next, dc_next), (dzs, dh_raws) in zip(
                upstream, prepared, kernels, carries, out_arrays):
            dh_raw = (dh_seq[t] + dh_next) * p["keep_h"][t]  # (batch, P)
            dm = tf.matmul(dh_raw, w_p, transpose_b=True)  # (batch, U)
            dc_raw = dc_next * p["keep_c"][t] + dm * p["to_dc"][t]  # (batch, U)
            dz = tf.concat([dc_raw, dc_raw, dc_raw, dm], axis=-1) * p["k"][t]  # (batch, 4U)
            new_carries.append((tf.matmul(dz, w_h, transpose_b=True), dc_raw * p["f"][t]))
            new_arrays.append((dzs.write(t, dz), dh_raws.write(t, dh_raw)))
        return t - 1, new_carries, new_arrays

    _, carries, out_arrays = tf.while_loop(lambda t, *_: t >= 0, body,
                                           (num_steps - 1, carries, out_arrays))
    grads = []
    for p, (dzs, dh_raws), (dh0, dc0), (w_h, w_p) in zip(prepared, out_arrays, carries,
                                                          kernels):
        dz, dh_raw = dzs.stack(), dh_raws.stack()  # (T, batch, 4U), (T, batch, P)
        flat = lambda x: tf.reshape(x, (-1, tf.shape(x)[-1]))  # noqa: E731 (T*batch, dim)
        d_w_h = tf.matmul(flat(p["h_prev"]), flat(dz), transpose_a=True)  # (P, 4U)
        d_w_p = tf.matmul(flat(p["m"]), flat(dh_raw), transpose_a=True)  # (U, P)
        # The carries out of step 0 are `dz_0 W_h^T` and `dc_raw_0 f_0`: d h0 and d c0.
        grads.extend([dz, dh0, dc0, d_w_h, d_w_p])
    return grads


def lstm_projection_sequences(gates_x, initial_states, kernels, cell_clip, proj_clip):
    """Runs independent LSTM-with-projection cells over whole sequences.

    Args:
        gates_x: list of float `(T, batch, 4 * units)`, each cell's `x W_x + b` (forget bias
            included), from `LSTMProjectionCell.input_gates`.
        initial_states: list of `(h0, c0)`, `(batch, projection_dim)` and `(batch, units)`.
        kernels: list of `(recurrent_kernel (P, 4U), projection_kernel (U, P))` tensors.
        cell_clip, proj_clip: float or None.

    Returns:
        list of float `(T, batch, projection_dim)`, every step's `h` per cell. Differentiable
        with respect to every argument (hand-written backward pass, see module docstring).
    """
    count = len(gates_x)

    @tf.custom_gradient
    def run(*flat):
        gates = list(flat[0::5])
        initial = [(flat[5 * n + 1], flat[5 * n + 2]) for n in range(count)]
        weights = [(flat[5 * n + 3], flat[5 * n + 4]) for n in range(count)]
        saved = _forward(gates, initial, weights, cell_clip, proj_clip)

        def grad(*upstream):
            return _backward(list(upstream), saved, initial, weights, cell_clip, proj_clip)

        return [s[0] for s in saved], grad

    flat = []
    for gates, (h0, c0), (w_h, w_p) in zip(gates_x, initial_states, kernels):
        flat.extend([gates, h0, c0, w_h, w_p])
    return run(*flat)
