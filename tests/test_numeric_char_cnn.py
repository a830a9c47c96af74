"""Token encoder (docs/model.md section 2) of a loaded BiLM vs the numpy reference."""

import numpy as np
import pytest

import numpy_reference as ref
import weight_fixtures
from keras_elmo.models.bilm import BiLM

ATOL = 1e-5
SENTENCES = [["The", "<S>", "naïve", "中文", "😀"], ["</S>", "x" * 60, "", "cat"]]

VARIANTS = {
    "relu_h0": dict(activation="relu", n_highway=0),
    "relu_h1": dict(activation="relu", n_highway=1),
    "relu_h2": dict(activation="relu", n_highway=2),
    "tanh_h0": dict(activation="tanh", n_highway=0),
    "tanh_h1": dict(activation="tanh", n_highway=1),
    "tanh_h2": dict(activation="tanh", n_highway=2),
    # Total filters == projection_dim: the file has no CNN_proj.
    "no_projection": dict(activation="relu", n_highway=1, filters=((1, 4), (2, 4))),
    "no_projection_no_highway": dict(activation="tanh", n_highway=0, filters=((1, 3), (3, 5))),
}


def _load(tmp_path, options, seed, **scales):
    arrays = weight_fixtures.random_weight_arrays(options, seed=seed, **scales)
    options_file, weight_file = weight_fixtures.write_model_dir(str(tmp_path), options, arrays)
    return BiLM.from_weights(options_file, weight_file), arrays


def _encode(bilm, arrays, options, sentences=SENTENCES):
    """`(got, expected, real)`: the biLM's token encodings of `sentences`, the numpy
    reference's, and the mask of real tokens (the only ones with a defined encoding)."""
    char_ids = ref.batch_char_ids(sentences)
    got = np.asarray(bilm.token_embedder(char_ids))
    return got, ref.char_cnn(arrays, options, char_ids), char_ids.any(axis=-1)


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_token_embedder_matches_reference(tmp_path, name):
    options = weight_fixtures.make_options(**VARIANTS[name])
    bilm, arrays = _load(tmp_path, options, seed=1)
    if "no_projection" in name:
        assert not any(k.startswith("CNN_proj") for k in arrays)
    if options["char_cnn"]["n_highway"] == 0:
        assert not any(k.startswith("CNN_high") for k in arrays)
    got, expected, real = _encode(bilm, arrays, options)  # char ids (2, 5, 50)
    assert got.shape == (2, 5, options["lstm"]["projection_dim"])
    assert got.dtype == np.float32
    np.testing.assert_allclose(got[real], expected[real], rtol=0, atol=ATOL)


def test_conv_bias_and_relu_zero(tmp_path):
    """Filters whose maximum (bias included) is negative give exactly 0 after relu."""
    options = weight_fixtures.make_options(activation="relu", n_highway=0,
                                           filters=((1, 8),), char_dim=4)
    arrays = weight_fixtures.random_weight_arrays(options, seed=3)
    arrays["CNN/b_cnn_0"][:] = -100.0  # every filter's maximum is negative
    arrays["CNN/b_cnn_0"][0] = 0.0
    options_file, weight_file = weight_fixtures.write_model_dir(str(tmp_path), options, arrays)
    bilm = BiLM.from_weights(options_file, weight_file)
    char_ids = ref.batch_char_ids([["ab", "c"]])
    got = np.asarray(bilm.token_embedder(char_ids))
    expected = ref.char_cnn(arrays, options, char_ids)
    np.testing.assert_allclose(got, expected, rtol=0, atol=ATOL)
    assert np.all(got[..., 1:] == 0.0)


def test_large_values(tmp_path):
    """Larger convolution weights: highway gates saturate, relu/tanh both far from 0."""
    options = weight_fixtures.make_options(activation="tanh", n_highway=2)
    bilm, arrays = _load(tmp_path, options, seed=4, cnn_scale=3.0)
    got, expected, real = _encode(bilm, arrays, options)
    np.testing.assert_allclose(got[real], expected[real], rtol=0, atol=ATOL)


def test_repeated_tokens_encoded_once_same_values_and_gradients():
    """Distinct tokens are encoded once and gathered back: the output and the weight
    gradients equal those of encoding every position on its own (a batch of one token)."""
    import tensorflow as tf

    from keras_elmo import BiLMOptions, CharCNNEmbedder, batch_to_ids

    embedder = CharCNNEmbedder.from_options(BiLMOptions.tiny())
    ids = tf.constant(batch_to_ids([["a", "cat", "a", "a"], ["cat", "dog", "", ""]]))  # (2, 4, 50)
    probe = tf.constant(np.random.default_rng(0).normal(size=(2, 4, 8)), tf.float32)
    embedder(ids)
    with tf.GradientTape() as tape:
        together = embedder(ids)  # (2, 4, 8)
        loss = tf.reduce_sum(together * probe)
    grads = tape.gradient(loss, embedder.trainable_weights)
    with tf.GradientTape() as tape:
        alone = tf.stack([tf.stack([embedder(ids[b:b + 1, t:t + 1])[0, 0] for t in range(4)])
                          for b in range(2)])  # (2, 4, 8), one position per call
        loss_alone = tf.reduce_sum(alone * probe)
    grads_alone = tape.gradient(loss_alone, embedder.trainable_weights)
    np.testing.assert_allclose(together, alone, atol=ATOL)
    for got, want in zip(grads, grads_alone):
        np.testing.assert_allclose(tf.convert_to_tensor(got), tf.convert_to_tensor(want),
                                   atol=1e-4)


SHORT_SENTENCES = [["a", "<S>", "naïve", "中文"], ["cat", "", "😀", "to"]]  # longest: 7 slots


@pytest.mark.parametrize("name", ["relu_h1", "tanh_h0", "no_projection"])
def test_short_tokens_convolve_a_prefix_with_the_same_result(tmp_path, name):
    """Without a long token in the batch the convolutions run over a prefix of the 50 char
    slots (plus one window of padding per row); the result still equals the reference on
    real tokens, and on "no token" rows equals the untruncated encoding (a batch that
    also holds a 50-char token)."""
    import tensorflow as tf

    options = weight_fixtures.make_options(**VARIANTS[name])
    bilm, arrays = _load(tmp_path, options, seed=3)
    char_ids = ref.batch_char_ids(SHORT_SENTENCES)  # (2, 4, 50)
    real = char_ids.any(axis=-1)
    assert (char_ids[real][:, 8:] == char_ids[real][:, -1:]).all()  # the truncated case
    got = np.asarray(bilm.token_embedder(char_ids))
    np.testing.assert_allclose(got[real], ref.char_cnn(arrays, options, char_ids)[real],
                               rtol=0, atol=ATOL)
    long_row = ref.batch_char_ids([["x" * 60]])[:, :1]  # (1, 1, 50), every slot used
    full = np.asarray(bilm.token_embedder(tf.concat(
        [char_ids, np.repeat(long_row, 2, axis=0)], axis=1)))[:, :4]
    np.testing.assert_allclose(got, full, rtol=0, atol=1e-6)


@pytest.mark.parametrize("group", [1, 3])
def test_filters_convolved_in_groups_match_reference(tmp_path, monkeypatch, group):
    """Filter banks wider than MAX_CONV_FILTERS go through several convs (groups of 1 or 3
    of the 4 and 8 filters here, one group of 3 left with 2): same numbers."""
    from keras_elmo.layers import char_cnn_embedder

    monkeypatch.setattr(char_cnn_embedder, "MAX_CONV_FILTERS", group)
    options = weight_fixtures.make_options(activation="tanh", n_highway=1)
    bilm, arrays = _load(tmp_path, options, seed=7, cnn_scale=2.0)
    got, expected, real = _encode(bilm, arrays, options)
    np.testing.assert_allclose(got[real], expected[real], rtol=0, atol=ATOL)
    assert np.abs(expected[real]).max() > 0.1  # not a trivially small output
