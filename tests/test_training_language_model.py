"""LanguageModel: the joint objective against numpy, sampled softmax, BiLM weight transfer."""

import numpy as np
import tensorflow as tf

from keras_elmo.bilm import BiLM
from keras_elmo.characters import batch_to_ids
from keras_elmo.options import BiLMOptions
from keras_elmo.training.language_model import LanguageModel
from keras_elmo.training.softmax import SharedSoftmax

SENTENCES = [["<S>", "a", "b", "c", "</S>"], ["<S>", "d", "</S>"]]
TOKEN_IDS = np.array([[0, 3, 4, 5, 1], [0, 6, 1, 0, 0]], np.int32)


def _log_softmax(x):
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def _numpy_nll(model, char_ids):
    """Forward and backward summed NLL from the top LSTM outputs, in plain numpy."""
    top = model(char_ids)["layers"].numpy()[:, -1]  # (batch, T, 2P)
    weights, bias = (v.numpy() for v in (model.softmax.embeddings, model.softmax.bias))
    p = model.options.projection_dim
    forward = backward = 0.0
    count = 0
    for row, sentence in enumerate(SENTENCES):
        for t in range(len(sentence) - 1):
            # forward: position t predicts t + 1; backward: position t + 1 predicts t.
            forward -= _log_softmax(top[row, t, :p] @ weights.T + bias)[TOKEN_IDS[row, t + 1]]
            backward -= _log_softmax(top[row, t + 1, p:] @ weights.T + bias)[TOKEN_IDS[row, t]]
            count += 1
    return forward, backward, count


def test_full_softmax_loss_matches_numpy():
    model = LanguageModel(BiLMOptions.tiny(), vocab_size=9, dropout=0.1)
    char_ids = batch_to_ids(SENTENCES)
    sums = model.nll_sums(char_ids, TOKEN_IDS)
    forward, backward, count = _numpy_nll(model, char_ids)
    assert float(sums["count"]) == count == 6
    np.testing.assert_allclose(float(sums["forward"]), forward, rtol=1e-5)
    np.testing.assert_allclose(float(sums["backward"]), backward, rtol=1e-5)
    assert abs(float(sums["forward"]) - float(sums["backward"])) > 1e-4  # two real directions


def test_sampled_softmax_and_empty_batch():
    model = LanguageModel(BiLMOptions.tiny(), vocab_size=200, num_sampled=20,
                          use_sampled_softmax=True)
    char_ids = batch_to_ids(SENTENCES)
    sums = model.nll_sums(char_ids, TOKEN_IDS, training=True)
    assert np.isfinite(float(sums["forward"])) and float(sums["count"]) == 6
    empty = model.nll_sums(np.zeros((0, 0, 50), np.int32), np.zeros((0, 0), np.int32),
                           training=True)
    assert [float(empty[k]) for k in ("forward", "backward", "count")] == [0.0, 0.0, 0.0]


def test_shared_softmax_uniform_case():
    softmax = SharedSoftmax(vocab_size=100, input_dim=8, num_sampled=10)
    softmax.build((None, 8))
    softmax.embeddings.assign(np.zeros((100, 8), np.float32))
    nll = softmax.full_nll(tf.ones((3, 8)), tf.constant([4, 5, 6]))
    np.testing.assert_allclose(nll.numpy(), np.log(100.0), rtol=1e-6)


def test_weights_transfer_into_a_bilm():
    model = LanguageModel(BiLMOptions.tiny(), vocab_size=9)
    bilm = model.make_bilm()
    assert isinstance(bilm, BiLM)
    words = [s[1:-1] for s in SENTENCES]  # the BiLM adds <S> and </S> itself
    bilm_layers = bilm(batch_to_ids(words))["layers"].numpy()  # (batch, L + 1, T, 2P)
    lm = model(batch_to_ids(SENTENCES))
    lm_layers, embeddings = lm["layers"].numpy(), lm["embeddings"].numpy()
    for row, sentence in enumerate(words):
        n = len(sentence)
        np.testing.assert_allclose(bilm_layers[row, 1:, :n], lm_layers[row, :, 1:n + 1],
                                   atol=1e-5)
        np.testing.assert_allclose(bilm_layers[row, 0, :n, :8], embeddings[row, 1:n + 1],
                                   atol=1e-5)


def test_weights_transfer_between_float32_and_bfloat16_models():
    """A bfloat16 biLM stores its LSTM kernels transposed; the transfer copies values in
    the (in, out) layout both ways, so a round trip through bfloat16 gives the float32
    model's weights rounded to bfloat16, exactly."""
    from keras_elmo.weight_file import bilm_weight_arrays

    model = LanguageModel(BiLMOptions.tiny(), vocab_size=9)
    model(batch_to_ids(SENTENCES))
    reduced = model.transfer_to_bilm(BiLM(BiLMOptions.tiny(), dtype="bfloat16"))
    again = LanguageModel(BiLMOptions.tiny(), vocab_size=9).transfer_from(reduced)
    rounded = {name: tf.cast(tf.cast(array, tf.bfloat16), tf.float32).numpy()
               for name, array in bilm_weight_arrays(model.make_bilm()).items()}
    for name, array in bilm_weight_arrays(again.make_bilm()).items():
        np.testing.assert_array_equal(array, rounded[name], err_msg=name)
    assert any(not np.array_equal(rounded[name], array) for name, array in
               bilm_weight_arrays(model.make_bilm()).items())  # the rounding did something
