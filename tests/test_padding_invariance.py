"""A sentence's biLM outputs do not depend on what else is in the batch (docs/model.md
sections 3-4): same alone, first or second, next to longer sentences."""

import numpy as np
import pytest

import numpy_reference as ref
from keras_elmo import batch_to_ids
from keras_elmo.models.bilm import BiLM

ATOL = 1e-6
SHORT = ["a", "中文", "cat"]
LONG = [["one", "two", "three", "four", "five"], ["😀", "x", "y", "z"]]


@pytest.fixture
def bilm(tiny_model_dir):
    return BiLM.from_weights(tiny_model_dir.options_file, tiny_model_dir.weight_file)


def _layers(bilm, sentences):
    out = bilm(batch_to_ids(sentences), training=False)
    return np.asarray(out["layers"]), np.asarray(out["mask"])


@pytest.mark.parametrize("position", [0, 1, 2])
def test_same_alone_and_in_batch(bilm, position):
    alone, alone_mask = _layers(bilm, [SHORT])
    batch = list(LONG)
    batch.insert(position, SHORT)
    together, mask = _layers(bilm, batch)
    n = len(SHORT)
    assert together.shape[2] == 5
    np.testing.assert_array_equal(mask[position], [True] * n + [False] * 2)
    half = together.shape[-1] // 2
    for j in range(together.shape[1]):
        np.testing.assert_allclose(together[position, j, :n, :half], alone[0, j, :, :half],
                                   rtol=0, atol=ATOL, err_msg=f"forward, layer {j}")
        np.testing.assert_allclose(together[position, j, :n, half:], alone[0, j, :, half:],
                                   rtol=0, atol=ATOL, err_msg=f"backward, layer {j}")
    assert np.all(together[position, :, n:] == 0.0)


def test_longer_neighbours_match_reference(bilm, tiny_model_dir):
    together, _ = _layers(bilm, [SHORT] + LONG)
    expected = ref.bilm_sentence(tiny_model_dir.arrays, tiny_model_dir.options, SHORT)
    np.testing.assert_allclose(together[0, :, :3], expected, rtol=0, atol=1e-5)


def test_trailing_padding_changes_nothing(bilm):
    """Extra all-zero positions at the end of the batch (a longer T) change nothing."""
    ids = batch_to_ids([SHORT, ["b", "c"]])  # (2, 3, 50)
    wider = np.concatenate([ids, np.zeros((2, 4, ids.shape[-1]), ids.dtype)], axis=1)
    a = np.asarray(bilm(ids, training=False)["layers"])
    b = np.asarray(bilm(wider, training=False)["layers"])
    np.testing.assert_allclose(b[:, :, :3], a, rtol=0, atol=ATOL)
    assert np.all(b[:, :, 3:] == 0.0)
