"""Keras contract of every layer: config round trip, serialization, symbolic and eager
calls agree, weight counts, masks, and clear errors for bad arguments."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_elmo
from keras_elmo import constants

TINY = keras_elmo.BiLMOptions.tiny()
SENTENCES = [["The", "cat", "sat", "on", "mats"], ["你好", "世界"], ["x"]]


def _char_ids():
    return keras_elmo.batch_to_ids(SENTENCES)  # (3, 5, 50)


def _check_layer(layer, inputs, **call_kwargs):
    """Config/serialization round trip gives a layer with the same outputs for the same weights."""
    expected = layer(inputs, **call_kwargs)
    config = layer.get_config()
    clone = layer.__class__.from_config(config)
    clone(inputs, **call_kwargs)
    clone.set_weights(layer.get_weights())
    np.testing.assert_allclose(clone(inputs, **call_kwargs), expected, atol=1e-6)
    revived = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
    assert type(revived) is type(layer)
    assert revived.get_config() == config
    return expected


def test_char_cnn_embedder_contract():
    embedder = keras_elmo.CharCNNEmbedder.from_options(TINY)
    ids = _char_ids()
    out = _check_layer(embedder, ids)
    assert out.shape == (3, 5, TINY.projection_dim)
    np.testing.assert_array_equal(embedder.compute_mask(ids), ids.any(axis=-1))
    filters, emb, num_f, proj = TINY.filters, TINY.char_embedding_dim, TINY.num_filters, 8
    expected_params = (constants.NUM_FILE_CHARACTERS * emb
                       + sum(w * emb * n + n for w, n in filters)
                       + TINY.num_highway * 2 * (num_f * num_f + num_f)
                       + num_f * proj + proj)
    assert embedder.count_params() == expected_params
    symbolic = embedder(keras.Input((None, constants.MAX_CHARACTERS_PER_TOKEN), dtype="int32"))
    assert tuple(symbolic.shape) == (None, None, proj)


def test_char_cnn_embedder_without_projection_or_highway():
    embedder = keras_elmo.CharCNNEmbedder(char_embedding_dim=4, filters=[[1, 4], [2, 4]],
                                          num_highway=0, projection_dim=8)
    out = embedder(_char_ids())
    assert embedder.projection is None and not embedder.highways
    assert out.shape == (3, 5, 8)


def test_residual_bilstm_contract():
    encoder = keras_elmo.ResidualBiLSTM.from_options(TINY)
    x = np.random.default_rng(0).normal(size=(3, 5, TINY.projection_dim)).astype("float32")
    mask = np.array([[1] * 5, [1, 1, 0, 0, 0], [1, 0, 0, 0, 0]], bool)
    out = _check_layer(encoder, x, mask=mask)
    assert out.shape == (3, TINY.num_layers, 5, 2 * TINY.projection_dim)
    assert np.all(out.numpy()[~mask.astype(bool)[:, None, :].repeat(2, 1)] == 0)
    units, proj = TINY.lstm_units, TINY.projection_dim
    per_cell = proj * 4 * units + proj * 4 * units + 4 * units + units * proj
    assert encoder.count_params() == 2 * TINY.num_layers * per_cell


def test_residual_bilstm_symbolic_and_graph_calls_agree():
    encoder = keras_elmo.ResidualBiLSTM.from_options(TINY)
    x = np.random.default_rng(1).normal(size=(2, 4, TINY.projection_dim)).astype("float32")
    mask = np.array([[1, 1, 1, 1], [1, 1, 0, 0]], bool)
    eager = encoder(x, mask=mask)
    graph = tf.function(lambda a, m: encoder(a, mask=m))(x, mask)
    np.testing.assert_allclose(graph, eager, atol=1e-6)
    inputs = keras.Input((None, TINY.projection_dim))
    masks = keras.Input((None,), dtype="bool")
    model = keras.Model([inputs, masks], encoder(inputs, mask=masks))
    np.testing.assert_allclose(model([x, mask]), eager, atol=1e-6)


def test_scalar_mix_contract():
    mix = keras_elmo.ScalarMix(do_layer_norm=True, l2_coef=0.1,
                               initial_scalar_parameters=[0.5, -1.0, 2.0], initial_gamma=0.5)
    layers = np.random.default_rng(2).normal(size=(2, 3, 4, 6)).astype("float32")
    out = _check_layer(mix, layers, mask=np.array([[1, 1, 1, 0], [1, 1, 1, 1]], bool))
    assert out.shape == (2, 4, 6)
    assert mix.count_params() == 4
    np.testing.assert_allclose(float(sum(mix.losses)), 0.1 * (0.25 + 1.0 + 4.0), rtol=1e-6)


def test_bilm_config_round_trip_and_keras_file(tmp_path):
    bilm = keras_elmo.BiLM(TINY)
    ids = _char_ids()
    expected = bilm(ids)["layers"]
    clone = keras_elmo.BiLM.from_config(bilm.get_config())
    clone.set_weights(bilm.get_weights())
    np.testing.assert_allclose(clone(ids)["layers"], expected, atol=1e-6)
    bilm.save(tmp_path / "bilm.keras")
    reloaded = keras.models.load_model(tmp_path / "bilm.keras")
    np.testing.assert_allclose(reloaded(ids)["layers"], expected, atol=1e-6)
    assert reloaded.options == TINY


@pytest.mark.parametrize("kwargs, message", [
    (dict(char_embedding_dim=0), "char_cnn.embedding.dim"),
    (dict(activation="gelu"), "activation"),
    (dict(filters=[]), "filters"),
    (dict(filters=[[9, 4]], max_characters_per_token=8), "max_characters_per_token"),
])
def test_char_cnn_embedder_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        keras_elmo.CharCNNEmbedder(**kwargs)


def test_char_cnn_embedder_rejects_wrong_char_width():
    embedder = keras_elmo.CharCNNEmbedder.from_options(TINY)
    with pytest.raises(ValueError, match=r"\(batch, tokens, 50\).*received"):
        embedder(np.ones((2, 3, 40), "int32"))


@pytest.mark.parametrize("kwargs, message", [
    (dict(projection_dim=16, units=16), "projection_dim must be smaller"),
    (dict(dropout=1.5), "dropout"),
    (dict(num_layers=0), "n_layers"),
])
def test_residual_bilstm_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        keras_elmo.ResidualBiLSTM(**kwargs)


def test_residual_bilstm_rejects_wrong_input_width():
    encoder = keras_elmo.ResidualBiLSTM.from_options(TINY)
    with pytest.raises(ValueError, match="expects inputs"):
        encoder(np.ones((2, 3, TINY.projection_dim + 1), "float32"))


def test_scalar_mix_rejects_bad_arguments():
    with pytest.raises(ValueError, match="dropout"):
        keras_elmo.ScalarMix(dropout=-0.1)
    with pytest.raises(ValueError, match="3 layers"):
        keras_elmo.ScalarMix(initial_scalar_parameters=[0.0, 1.0])(np.ones((1, 3, 2, 4), "float32"))
    with pytest.raises(ValueError, match="num_layers"):
        keras_elmo.ScalarMix()(np.ones((2, 4), "float32"))


@pytest.mark.parametrize("num_tokens", [0, 3])
def test_bilm_accepts_a_batch_of_zero_rows(num_tokens):
    """Regression: TF's conv returns its input for an empty batch; the embedder must not."""
    out = keras_elmo.BiLM(TINY)(np.zeros((0, num_tokens, 50), "int32"))
    assert out["layers"].shape == (0, TINY.num_layers + 1, num_tokens, TINY.output_dim)


def test_padded_positions_are_positive_zero():
    """Regression: masking by multiplication gave -0.0, which shows up in REST JSON."""
    elmo = keras_elmo.ElmoLayer(TINY, do_layer_norm=True, return_layers=True)
    out = elmo(tf.constant([["a", "b"], ["c", ""]]))
    for tensor in (out["elmo"], out["layers"][:, :, :]):
        padded = tensor.numpy()[1, ..., 1, :]
        assert not np.signbit(padded).any() and not padded.any()
