"""`ResidualBiLSTM(skip_boundary_steps=True)`: one step less per direction, same outputs
everywhere but the frame (forward at each row's last position, backward at position 0)."""

import numpy as np
import pytest
import tensorflow as tf

import keras_elmo


def _encoder_and_inputs(seed=0):
    encoder = keras_elmo.ResidualBiLSTM(units=6, projection_dim=4, num_layers=2, cell_clip=0.5,
                                        proj_clip=0.5)
    rng = np.random.default_rng(seed)
    x = tf.constant(rng.normal(size=(3, 5, 4)) * 2.0, tf.float32)
    lengths = np.array([5, 2, 3])
    mask = np.arange(5)[None, :] < lengths[:, None]
    encoder(x, mask=mask)
    return encoder, x, mask, lengths


def _frame_zeroed(full, lengths):
    """`full` (batch, L, T, 2P) with the forward half at len-1 and backward at 0 zeroed."""
    expected = full.copy()
    p = expected.shape[-1] // 2
    for row, length in enumerate(lengths):
        expected[row, :, length - 1, :p] = 0.0
        expected[row, :, 0, p:] = 0.0
    return expected


@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
def test_outputs_equal_the_full_run_off_the_frame(training):
    encoder, x, mask, lengths = _encoder_and_inputs()
    full = encoder(x, mask=mask, training=training).numpy()
    skipped = encoder(x, mask=mask, training=training, skip_boundary_steps=True).numpy()
    np.testing.assert_allclose(skipped, _frame_zeroed(full, lengths), atol=1e-6)
    assert np.abs(full[0, :, 4, :4]).min() > 0  # the zeroed forward </S> was not zero


def test_gradients_equal_those_of_the_full_run_with_the_frame_masked():
    encoder, x, mask, lengths = _encoder_and_inputs(seed=1)
    probe = _frame_zeroed(np.random.default_rng(2).normal(size=(3, 2, 5, 8)), lengths)
    grads = []
    for skip in (False, True):
        with tf.GradientTape() as tape:
            tape.watch(x)
            out = encoder(x, mask=mask, training=True, skip_boundary_steps=skip)
            loss = tf.reduce_sum(out * tf.constant(probe, tf.float32))
        grads.append(tape.gradient(loss, encoder.trainable_weights + [x]))
    for full, skipped in zip(*grads):
        np.testing.assert_allclose(skipped, full, atol=1e-5, rtol=1e-4)


def test_a_stateful_encoder_refuses_to_skip():
    encoder = keras_elmo.ResidualBiLSTM(units=6, projection_dim=4, stateful=True,
                                        max_batch_size=4)
    with pytest.raises(ValueError, match="needs a stateless ResidualBiLSTM"):
        encoder(tf.zeros((2, 3, 4)), skip_boundary_steps=True)


def test_a_single_position_gives_zero_outputs():
    encoder, _, _, _ = _encoder_and_inputs()
    out = encoder(tf.ones((2, 1, 4)), skip_boundary_steps=True)
    assert out.shape == (2, 2, 1, 8) and not np.any(out.numpy())


def test_a_single_position_trains_with_zero_gradients():
    encoder, _, _, _ = _encoder_and_inputs()
    x = tf.ones((2, 1, 4))
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = tf.reduce_sum(encoder(x, training=True, skip_boundary_steps=True))
    assert not np.any(tape.gradient(loss, x).numpy())
