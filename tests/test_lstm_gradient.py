"""The hand-written whole-sequence LSTM gradient equals TensorFlow's autodiff of the same formulas."""

import numpy as np
import pytest
import tensorflow as tf

import keras_elmo


def _autodiff_direction(cell, x, length):
    """Plain-TF forward pass of one direction over `x` `(T, in)` for one sentence.

    Batch-major, `h @ W` with the kernels `(in, out)`: the cell stores them `(out, in)`."""
    w_x, w_h, w_p = (tf.transpose(k) for k in (cell.input_kernel, cell.recurrent_kernel,
                                                cell.projection_kernel))
    h = tf.zeros((1, cell.projection_dim))
    c = tf.zeros((1, cell.units))
    outs = []
    for t in range(length):
        z = x[t:t + 1] @ w_x + cell.bias + h @ w_h
        z_i, z_f, z_c, z_o = tf.split(z, 4, axis=-1)
        c = tf.sigmoid(z_f + 1.0) * c + tf.sigmoid(z_i) * tf.tanh(z_c)
        c = tf.clip_by_value(c, -cell.cell_clip, cell.cell_clip)
        h = tf.clip_by_value((tf.sigmoid(z_o) * tf.tanh(c)) @ w_p,
                             -cell.proj_clip, cell.proj_clip)
        outs.append(h[0])
    return tf.stack(outs)


def _autodiff_encoder(encoder, x, lengths):
    """`(batch, num_layers, T, 2P)` from plain TF ops, sentence by sentence."""
    batch, steps = x.shape[0], x.shape[1]
    rows = []
    for b in range(batch):
        n = int(lengths[b])
        inputs = [x[b, :n], tf.reverse(x[b, :n], [0])]
        layers = []
        for layer in range(encoder.num_layers):
            hs = [_autodiff_direction(encoder.cells[d][layer], inputs[k], n)
                  for k, d in enumerate(("forward", "backward"))]
            if layer > 0:
                hs = [h + i for h, i in zip(hs, inputs)]
            inputs = hs
            out = tf.concat([hs[0], tf.reverse(hs[1], [0])], axis=-1)
            layers.append(tf.pad(out, [[0, steps - n], [0, 0]]))
        rows.append(tf.stack(layers))
    return tf.stack(rows)


@pytest.mark.parametrize("training", [True, False], ids=["hand-written", "plain-ops"])
@pytest.mark.parametrize("clip", [3.0, 0.2])
def test_custom_gradient_matches_autodiff(clip, training):
    """training=True: the hand-written backward pass; False: plain ops. Both equal autodiff
    of an independent loop."""
    encoder = keras_elmo.ResidualBiLSTM(units=6, projection_dim=4, num_layers=2,
                                        cell_clip=clip, proj_clip=clip)
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(2, 4, 4)) * 2.0, tf.float32)
    lengths = np.array([4, 2])
    mask = np.arange(4)[None, :] < lengths[:, None]
    encoder(x, mask=mask)
    for w in encoder.trainable_weights:
        w.assign(rng.normal(size=w.shape).astype("float32"))
    probe = tf.constant(rng.normal(size=(2, 2, 4, 8)), tf.float32)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        ours = encoder(x, mask=mask, training=training)
        reference = _autodiff_encoder(encoder, x, lengths)
        loss_ours = tf.reduce_sum(ours * probe)
        loss_ref = tf.reduce_sum(reference * probe)
    np.testing.assert_allclose(ours, reference, atol=1e-5)
    targets = encoder.trainable_weights + [x]
    for got, want, var in zip(tape.gradient(loss_ours, targets),
                              tape.gradient(loss_ref, targets), targets):
        np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4,
                                   err_msg=getattr(var, "path", "inputs"))


def _op_counts(fn, x):
    graph = tf.function(fn).get_concrete_function(x).graph.as_graph_def()
    nodes = list(graph.node) + [n for f in graph.library.function for n in f.node_def]
    return {op: sum(n.op == op for n in nodes) for op in ("IdentityN", "Transpose")}


def test_plain_loop_outside_training_and_one_sequence_gradient_per_layer_in_training():
    """Outside training the loop is plain ops; `training=True` runs each layer (both
    directions together) as one `tf.custom_gradient` (one IdentityN per layer); a stateful
    encoder trains by autodiff of the plain loop."""
    encoder = keras_elmo.ResidualBiLSTM(units=6, projection_dim=4, num_layers=3)
    x = tf.zeros((2, 3, 4))
    encoder(x)
    inference = _op_counts(lambda x: encoder(x, training=False), x)
    sequence = _op_counts(lambda x: encoder(x, training=True), x)
    assert inference["IdentityN"] == 0, inference
    assert sequence["IdentityN"] == 3, sequence
    stateful = keras_elmo.ResidualBiLSTM(units=6, projection_dim=4, num_layers=2, stateful=True,
                                         max_batch_size=2)
    stateful(x)
    assert _op_counts(lambda x: stateful(x, training=True), x)["IdentityN"] == 0


def test_sequence_gradient_without_clips_matches_autodiff():
    """No cell or projection clip (None): the backward pass skips the clip masks."""
    rng = np.random.default_rng(1)
    x = tf.constant(rng.normal(size=(3, 5, 4)), tf.float32)
    mask = np.arange(5)[None, :] < np.array([5, 1, 3])[:, None]
    encoders = []
    for _ in range(2):
        encoder = keras_elmo.ResidualBiLSTM(units=6, projection_dim=4, num_layers=2,
                                            cell_clip=None, proj_clip=None)
        encoder(x, mask=mask)
        encoders.append(encoder)
    for a, b in zip(*(e.trainable_weights for e in encoders)):
        b.assign(a)
    probe = tf.constant(rng.normal(size=(3, 2, 5, 8)), tf.float32)
    grads = []
    for encoder, training in zip(encoders, (True, False)):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(encoder(x, mask=mask, training=training) * probe)
        grads.append(tape.gradient(loss, encoder.trainable_weights + [x]))
    for sequence, autodiff in zip(*grads):
        np.testing.assert_allclose(sequence, autodiff, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("gate_columns", [2, 6], ids=["1-step-chunks", "3-step-chunks"])
def test_the_plain_loop_in_chunks_of_steps_gives_the_same_outputs_and_gradients(
        monkeypatch, gate_columns):
    """The plain loop computes its input gates `GATE_COLUMNS` columns (steps x rows) at a
    time; with 2 rows, chunks of 1 and of 3 steps (the last one shorter): the numbers and
    the autodiff gradients of the independent loop, and a stateful encoder carries the same
    states."""
    from keras_elmo.backend.tensorflow import lstm_loop as residual_bilstm

    monkeypatch.setattr(residual_bilstm, "GATE_COLUMNS", gate_columns)
    encoder = keras_elmo.ResidualBiLSTM(units=6, projection_dim=4, num_layers=2)
    rng = np.random.default_rng(3)
    x = tf.constant(rng.normal(size=(2, 5, 4)) * 2.0, tf.float32)
    lengths = np.array([5, 3])
    mask = np.arange(5)[None, :] < lengths[:, None]
    encoder(x, mask=mask)
    for w in encoder.trainable_weights:
        w.assign(rng.normal(size=w.shape).astype("float32"))
    probe = tf.constant(rng.normal(size=(2, 2, 5, 8)), tf.float32)
    # One (non-persistent) tape each: a tf.function first called under a persistent tape
    # is traced for higher-order gradients, about 20 s more here for the same numbers.
    with tf.GradientTape() as tape_ours:
        tape_ours.watch(x)
        loss_ours = tf.reduce_sum(tf.function(lambda x: encoder(x, mask=mask))(x) * probe)
    with tf.GradientTape() as tape_ref:
        tape_ref.watch(x)
        loss_ref = tf.reduce_sum(_autodiff_encoder(encoder, x, lengths) * probe)
    np.testing.assert_allclose(loss_ours, loss_ref, rtol=1e-5)
    targets = encoder.trainable_weights + [x]
    for got, want, var in zip(tape_ours.gradient(loss_ours, targets),
                              tape_ref.gradient(loss_ref, targets), targets):
        np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4,
                                   err_msg=getattr(var, "path", "inputs"))
    states = []
    for columns in (gate_columns, 1024):  # in chunks, then every step in one chunk
        monkeypatch.setattr(residual_bilstm, "GATE_COLUMNS", columns)
        stateful = keras_elmo.ResidualBiLSTM(units=6, projection_dim=4, num_layers=2,
                                             stateful=True, max_batch_size=2)
        stateful(x, mask=mask)
        for direction, cells in encoder.cells.items():
            for cell, target in zip(cells, stateful.cells[direction]):
                target.set_weights(cell.get_weights())
        stateful.reset_states()
        stateful(x, mask=mask)
        states.append([v.numpy() for v in (stateful.state_h, stateful.state_c)])
    for chunked, whole in zip(*states):
        np.testing.assert_allclose(chunked, whole, atol=1e-6)
