"""LanguageModel: the joint objective against numpy, sampled softmax, the backbone it holds."""

import numpy as np
import tensorflow as tf

from cpu_class import needs_bfloat16_products
from keras_elmo.models.bilm import BiLM
from keras_elmo.text.characters import batch_to_ids
from keras_elmo.formats.options import BiLMOptions
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
    model = LanguageModel(BiLM(BiLMOptions.tiny(), dropout=0.1), vocab_size=9, dropout=0.1)
    char_ids = batch_to_ids(SENTENCES)
    sums = model.nll_sums(char_ids, TOKEN_IDS)
    forward, backward, count = _numpy_nll(model, char_ids)
    assert float(sums["count"]) == count == 6
    np.testing.assert_allclose(float(sums["forward"]), forward, rtol=1e-5)
    np.testing.assert_allclose(float(sums["backward"]), backward, rtol=1e-5)
    assert abs(float(sums["forward"]) - float(sums["backward"])) > 1e-4  # two real directions


def test_sampled_softmax_and_empty_batch():
    model = LanguageModel(BiLM(BiLMOptions.tiny()), vocab_size=200, num_sampled=20,
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


def test_the_head_reads_the_backbone_it_holds():
    """No copy: the head's backbone is the BiLM object given, and its outputs at the real
    positions are the BiLM's own (which adds <S> and </S> itself)."""
    bilm = BiLM(BiLMOptions.tiny())
    model = LanguageModel(bilm, vocab_size=9)
    assert model.backbone is bilm
    assert {id(v) for v in bilm.weights} <= {id(v) for v in model.weights}
    words = [s[1:-1] for s in SENTENCES]
    bilm_layers = bilm(batch_to_ids(words))["layers"].numpy()  # (batch, L + 1, T, 2P)
    lm = model(batch_to_ids(SENTENCES))
    lm_layers, embeddings = lm["layers"].numpy(), lm["embeddings"].numpy()
    for row, sentence in enumerate(words):
        n = len(sentence)
        np.testing.assert_allclose(bilm_layers[row, 1:, :n], lm_layers[row, :, 1:n + 1],
                                   atol=1e-5)
        np.testing.assert_allclose(bilm_layers[row, 0, :n, :8], embeddings[row, 1:n + 1],
                                   atol=1e-5)
    # A change to the backbone's weights is a change to the head's outputs.
    before = model(batch_to_ids(SENTENCES))["layers"].numpy()
    cell = bilm.contextual_encoder.cells["forward"][1]
    cell.bias.assign(cell.bias.numpy() + 0.5)
    assert not np.allclose(model(batch_to_ids(SENTENCES))["layers"].numpy(), before)


@needs_bfloat16_products
def test_a_trained_float32_backbone_loads_into_a_bfloat16_biLM_through_its_weight_file(
        tmp_path):
    """The cells store their LSTM kernels (out, in); the weight file holds (in, out), so the
    float32 backbone's weights arrive in a bfloat16 biLM rounded to bfloat16, exactly."""
    from keras_elmo.formats.weight_file import bilm_weight_arrays, save_bilm_weights

    model = LanguageModel(BiLM(BiLMOptions.tiny()), vocab_size=9)
    model(batch_to_ids(SENTENCES))
    weight_file = str(tmp_path / "weights.hdf5")
    save_bilm_weights(model.backbone, weight_file)
    reduced = BiLM.from_weights(BiLMOptions.tiny(), weight_file, dtype="bfloat16")
    trained = bilm_weight_arrays(model.backbone)
    rounded = {name: tf.cast(tf.cast(array, tf.bfloat16), tf.float32).numpy()
               for name, array in trained.items()}
    for name, array in bilm_weight_arrays(reduced).items():
        np.testing.assert_array_equal(np.asarray(array, np.float32), rounded[name], err_msg=name)
    assert any(not np.array_equal(rounded[name], array) for name, array in trained.items())


def test_rejects_a_stateful_backbone():
    import pytest

    with pytest.raises(ValueError, match="stateless keras_elmo.BiLM backbone"):
        LanguageModel(BiLM(BiLMOptions.tiny(), stateful=True), vocab_size=9)
