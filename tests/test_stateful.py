"""`stateful=True` carries each row's LSTM state into the next call, as bilm-tf does."""

import numpy as np

import keras_elmo

TINY = keras_elmo.BiLMOptions.tiny()
FIRST = [["a", "b", "c"], ["de"]]
SECOND = [["x", "y"], ["z", "w", "v"]]


def _models():
    stateless = keras_elmo.BiLM(TINY)
    stateful = keras_elmo.BiLM(TINY, stateful=True, max_batch_size=4)
    stateful.token_embedder.set_weights(stateless.token_embedder.get_weights())
    for direction, cells in stateless.contextual_encoder.cells.items():
        for cell, target in zip(cells, stateful.contextual_encoder.cells[direction]):
            target.set_weights(cell.get_weights())
    return stateless, stateful


def test_first_call_equals_the_stateless_model():
    stateless, stateful = _models()
    ids = keras_elmo.batch_to_ids(FIRST)
    np.testing.assert_allclose(stateful(ids)["layers"], stateless(ids)["layers"], atol=1e-6)


def test_second_call_continues_from_each_rows_final_state():
    """Forward halves of call 2 = a stateless run over `<S> s1 </S> <S> s2 </S>`."""
    stateless, stateful = _models()
    stateful(keras_elmo.batch_to_ids(FIRST))
    second = stateful(keras_elmo.batch_to_ids(SECOND))["layers"].numpy()
    proj = TINY.projection_dim
    for row in range(2):
        joined = FIRST[row] + ["</S>", "<S>"] + SECOND[row]
        full = stateless(keras_elmo.batch_to_ids([joined]))["layers"].numpy()[0]
        tail = full[1:, -len(SECOND[row]):, :proj]  # LSTM layers, forward half, s2 positions
        np.testing.assert_allclose(second[row, 1:, :len(SECOND[row]), :proj], tail, atol=1e-5)
    fresh = stateless(keras_elmo.batch_to_ids(SECOND))["layers"].numpy()
    assert not np.allclose(second[:, 1:], fresh[:, 1:], atol=1e-4)


def test_rows_past_the_batch_keep_their_state_and_reset_clears_all():
    stateless, stateful = _models()
    stateful(keras_elmo.batch_to_ids(FIRST))
    kept = stateful.contextual_encoder.state_h.numpy()[:, :, 1].copy()
    stateful(keras_elmo.batch_to_ids(SECOND[:1]))  # batch of 1: row 1 untouched
    np.testing.assert_array_equal(stateful.contextual_encoder.state_h.numpy()[:, :, 1], kept)
    stateful.reset_states()
    assert not stateful.contextual_encoder.state_h.numpy().any()
    ids = keras_elmo.batch_to_ids(SECOND)
    np.testing.assert_allclose(stateful(ids)["layers"], stateless(ids)["layers"], atol=1e-6)


def test_stateless_model_keeps_no_state():
    stateless, _ = _models()
    ids = keras_elmo.batch_to_ids(SECOND)
    before = stateless(ids)["layers"].numpy()
    stateless(keras_elmo.batch_to_ids(FIRST))
    np.testing.assert_array_equal(stateless(ids)["layers"].numpy(), before)
