"""ScalarMix (docs/model.md section 5) vs the numpy reference.

Padded positions hold garbage: the layer-norm statistics must ignore them. Outputs are
compared at real positions (the spec defines nothing at padded ones).
"""

import numpy as np
import pytest

import numpy_reference as ref
from keras_elmo.layers.scalar_mix import ScalarMix

ATOL = 1e-5
SCALARS = [0.3, -1.2, 0.8]
GAMMA = 1.7


def _inputs(seed=0, lengths=(4, 2), num_layers=3, dim=6):
    rng = np.random.default_rng(seed)
    steps = max(lengths)
    layers = rng.standard_normal((len(lengths), num_layers, steps, dim)) * 2.0 + 0.5
    layers = layers * np.arange(1, num_layers + 1)[None, :, None, None]  # per-layer scale
    mask = np.arange(steps)[None, :] < np.asarray(lengths)[:, None]  # (batch, T)
    layers = layers.transpose(0, 2, 1, 3)  # (batch, T, L + 1, D)
    layers[~mask] = 40.0 + rng.standard_normal(layers[~mask].shape)  # garbage at padding
    return layers.transpose(0, 2, 1, 3).astype(np.float32), mask


@pytest.mark.parametrize("do_layer_norm", [False, True])
def test_matches_reference(do_layer_norm):
    layers, mask = _inputs()
    mix = ScalarMix(do_layer_norm=do_layer_norm, initial_scalar_parameters=SCALARS,
                    initial_gamma=GAMMA)
    got = np.asarray(mix(layers, mask=mask))
    expected = ref.scalar_mix(layers, mask, SCALARS, GAMMA, do_layer_norm)
    assert got.shape == (2, 4, 6)
    np.testing.assert_allclose(got[mask], expected[mask], rtol=0, atol=ATOL)
    np.testing.assert_allclose(np.asarray(mix.scalar_parameters), SCALARS, rtol=0, atol=1e-7)
    np.testing.assert_allclose(float(np.asarray(mix.gamma)), GAMMA, rtol=0, atol=1e-7)


def test_layer_norm_statistics_ignore_padding():
    """Same real values, different garbage at padding: same output at real positions."""
    layers, mask = _inputs(seed=1)
    other = layers.copy()
    other.transpose(0, 2, 1, 3)[~mask] = -1000.0
    mix = ScalarMix(do_layer_norm=True, initial_scalar_parameters=SCALARS)
    a, b = np.asarray(mix(layers, mask=mask)), np.asarray(mix(other, mask=mask))
    np.testing.assert_allclose(a[mask], b[mask], rtol=0, atol=ATOL)


def test_defaults_are_uniform_average():
    layers, mask = _inputs(seed=2)
    mix = ScalarMix()
    got = np.asarray(mix(layers, mask=mask))
    expected = layers.mean(axis=1)
    np.testing.assert_allclose(got[mask], expected[mask], rtol=0, atol=ATOL)
    np.testing.assert_array_equal(np.asarray(mix.scalar_parameters), np.zeros(3))
    assert float(np.asarray(mix.gamma)) == 1.0


@pytest.mark.parametrize("do_layer_norm", [False, True])
def test_dropout_inactive_at_inference(do_layer_norm):
    layers, mask = _inputs(seed=3)
    mix = ScalarMix(do_layer_norm=do_layer_norm, dropout=0.5,
                    initial_scalar_parameters=SCALARS, initial_gamma=GAMMA)
    expected = ref.scalar_mix(layers, mask, SCALARS, GAMMA, do_layer_norm)
    for got in (mix(layers, mask=mask), mix(layers, mask=mask, training=False)):
        np.testing.assert_allclose(np.asarray(got)[mask], expected[mask], rtol=0, atol=ATOL)
    trained = np.asarray(mix(layers, mask=mask, training=True))
    assert not np.allclose(trained[mask], expected[mask], atol=ATOL)  # dropout does act


def test_l2_penalty_in_losses():
    layers, mask = _inputs(seed=4)
    mix = ScalarMix(l2_coef=0.01, initial_scalar_parameters=SCALARS)
    mix(layers, mask=mask)
    expected = 0.01 * float(np.sum(np.square(SCALARS)))
    total = sum(float(np.asarray(loss)) for loss in mix.losses)
    assert len(mix.losses) >= 1
    np.testing.assert_allclose(total, expected, rtol=1e-6)


def test_no_l2_penalty_by_default():
    layers, mask = _inputs(seed=5)
    mix = ScalarMix(initial_scalar_parameters=SCALARS)
    mix(layers, mask=mask)
    assert sum(float(np.asarray(loss)) for loss in mix.losses) == 0.0
