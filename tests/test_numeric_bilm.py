"""The full biLM (docs/model.md sections 1-4) loaded from a published-layout file vs the
numpy reference fed the raw file arrays."""

import numpy as np
import pytest

import numpy_reference as ref
import weight_fixtures
from keras_elmo import batch_to_ids
from keras_elmo.models.bilm import BiLM

ATOL = 1e-5
SENTENCES = [
    ["The", "cat", "sat", "on", "mats"],
    ["我", "爱", "北京"],
    ["party", "🎉", "😀👍🏽"],
    ["a" + "é" * 150, "b" * 300],  # 301- and 300-byte tokens
    ["<S>", "word", "</S>"],
    [],
]


def _run(bilm, char_ids):
    out = bilm(char_ids, training=False)
    return np.asarray(out["layers"]), np.asarray(out["mask"])


@pytest.mark.parametrize("variant", ["tiny", "no_skip_tanh_h2", "no_projection_3_layers"])
def test_bilm_matches_reference(tmp_path, variant):
    options = {
        "tiny": weight_fixtures.make_options(),
        "no_skip_tanh_h2": weight_fixtures.make_options(use_skip_connections=False,
                                                        activation="tanh", n_highway=2),
        "no_projection_3_layers": weight_fixtures.make_options(
            n_layers=3, n_highway=0, filters=((1, 4), (2, 4))),
    }[variant]
    arrays = weight_fixtures.random_weight_arrays(options, seed=7, lstm_scale=2.0)
    options_file, weight_file = weight_fixtures.write_model_dir(str(tmp_path), options, arrays)
    bilm = BiLM.from_weights(options_file, weight_file)

    char_ids = batch_to_ids(SENTENCES)
    np.testing.assert_array_equal(char_ids, ref.batch_char_ids(SENTENCES))
    layers, mask = _run(bilm, char_ids)
    expected, expected_mask = ref.bilm(arrays, options, SENTENCES)

    n_layers = options["lstm"]["n_layers"]
    assert layers.shape == (6, n_layers + 1, 5, 16)
    assert layers.dtype == np.float32
    assert mask.dtype == bool
    np.testing.assert_array_equal(mask, expected_mask)
    for j in range(n_layers + 1):
        np.testing.assert_allclose(layers[:, j], expected[:, j], rtol=0, atol=ATOL,
                                   err_msg=f"layer {j}")
    for b, tokens in enumerate(SENTENCES):
        assert np.all(layers[b, :, len(tokens):] == 0.0), f"sentence {b} not zero past its end"
    # Layer 0 is [x; x].
    np.testing.assert_array_equal(layers[..., 0, :, :8], layers[..., 0, :, 8:])


def test_bilm_is_stateless(tiny_model_dir):
    bilm = BiLM.from_weights(tiny_model_dir.options_file, tiny_model_dir.weight_file)
    char_ids = batch_to_ids(SENTENCES[:2])
    first, _ = _run(bilm, char_ids)
    _run(bilm, batch_to_ids(SENTENCES[2:4]))
    again, _ = _run(bilm, char_ids)
    np.testing.assert_array_equal(first, again)
    expected, _ = ref.bilm(tiny_model_dir.arrays, tiny_model_dir.options, SENTENCES[:2])
    np.testing.assert_allclose(first, expected, rtol=0, atol=ATOL)


def test_bilm_options_attribute(tiny_model_dir):
    bilm = BiLM.from_weights(tiny_model_dir.options_file, tiny_model_dir.weight_file)
    assert bilm.options.projection_dim == 8
    assert bilm.options.lstm_units == 12
    assert bilm.options.num_layers == 2
    assert bilm.options.filters == ((1, 4), (2, 8), (3, 8))


def test_only_empty_sentences(tiny_model_dir):
    """An all-empty batch still runs `<S> </S>` and yields zero tokens."""
    bilm = BiLM.from_weights(tiny_model_dir.options_file, tiny_model_dir.weight_file)
    char_ids = np.zeros((2, 1, 50), np.int32)  # one padded position each
    layers, mask = _run(bilm, char_ids)
    assert layers.shape == (2, 3, 1, 16)
    assert not mask.any()
    assert np.all(layers == 0.0)
