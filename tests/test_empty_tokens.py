"""An empty string token is no token, wherever it stands (docs/model.md section 1).

`"人民  日报".split(" ")` gives `["人民", "", "日报"]`. Every entry point reads that row as
the sentence `人民 日报`: the other tokens get that sentence's vectors (the numpy reference's,
within 1e-5), the empty token's position gets zeros and a False mask. Before, the biLM read
the middle position as a token: a non-zero vector there, and position 0 off by up to 0.58.
The export's signatures are held to the same in tests/test_export.py.
"""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_elmo
import numpy_reference as ref
from keras_elmo.embedding.token_cache import TokenEmbeddingCache
from keras_elmo.text.characters import batch_to_ids

ATOL = 1e-5
WITH_GAPS = [["人民", "", "日报"], ["", "新年", "", "", "讲话", "。"], ["好", ""], [""]]
EFML = os.path.join(os.path.dirname(__file__), "fixtures", "efml")


def _compact(sentences):
    return [[token for token in sentence if token] for sentence in sentences]


def _expected_layers(model_dir, sentences):
    """The reference's layers of the sentences without their empty tokens, with zero
    columns at the empty tokens: `(batch, L + 1, T, 2P)` and the mask `(batch, T)`."""
    steps = max(len(s) for s in sentences)
    compact, _ = ref.bilm(model_dir.arrays, model_dir.options, _compact(sentences))
    layers = np.zeros(compact.shape[:2] + (steps,) + compact.shape[3:])
    mask = np.array([[bool(t) for t in s] + [False] * (steps - len(s)) for s in sentences])
    for row, sentence in enumerate(sentences):
        kept = [k for k, token in enumerate(sentence) if token]
        layers[row][:, kept] = compact[row][:, :len(kept)]
    return layers, mask


def _padded(sentences):
    steps = max(len(s) for s in sentences)
    return tf.constant([s + [""] * (steps - len(s)) for s in sentences])


def test_batch_to_ids_gives_an_empty_token_no_row():
    ids = batch_to_ids([["a", "", "b"], [b"", "c"]])
    assert ids[0, 1].sum() == 0 and ids[1, 0].sum() == 0
    np.testing.assert_array_equal(ids[0, [0, 2]], batch_to_ids([["a", "b"]])[0])
    # A token of invalid bytes only is still a token (its bytes are dropped inside it).
    assert batch_to_ids([[b"\xff"]])[0, 0].sum() > 0


def test_the_biLM_reads_a_row_without_its_empty_tokens(tiny_model_dir):
    bilm = keras_elmo.BiLM.from_weights(tiny_model_dir.options_file, tiny_model_dir.weight_file)
    expected, mask = _expected_layers(tiny_model_dir, WITH_GAPS)
    out = bilm(batch_to_ids(WITH_GAPS))
    np.testing.assert_array_equal(out["mask"].numpy(), mask)
    np.testing.assert_allclose(out["layers"].numpy(), expected, atol=ATOL)
    assert np.all(out["layers"].numpy()[~mask[:, None, :].repeat(3, 1)] == 0)
    traced = tf.function(lambda ids: bilm(ids)["layers"])  # the same in a graph
    np.testing.assert_allclose(traced(tf.constant(batch_to_ids(WITH_GAPS))).numpy(), expected,
                               atol=ATOL)


@pytest.mark.parametrize("form", ["padded", "ragged"])
def test_elmo_layer_reads_string_rows_without_their_empty_tokens(tiny_model_dir, form):
    elmo = keras_elmo.ElmoLayer.from_weights(tiny_model_dir.options_file,
                                             tiny_model_dir.weight_file, return_layers=True)
    inputs = _padded(WITH_GAPS) if form == "padded" else tf.ragged.constant(WITH_GAPS)
    out = elmo(inputs)
    expected, mask = _expected_layers(tiny_model_dir, WITH_GAPS)
    np.testing.assert_allclose(out["layers"].numpy(), expected, atol=ATOL)
    mix = ref.scalar_mix(expected, mask, np.zeros(3), 1.0)
    np.testing.assert_allclose(out["elmo"].numpy(), mix, atol=ATOL)
    np.testing.assert_array_equal(
        np.asarray(keras_elmo.ElmoLayer(elmo.bilm).compute_mask(inputs)), mask)


def test_a_tagger_sees_the_empty_tokens_masked():
    """The Keras mask reaching the next layer is False at an empty token."""
    seen = {}

    class Probe(keras.layers.Layer):
        def call(self, x, mask=None):
            seen["mask"] = mask
            return x

    tokens = keras.Input(shape=(None,), dtype="string")
    elmo = keras_elmo.ElmoLayer(keras_elmo.BiLM(keras_elmo.BiLMOptions.tiny()))
    keras.Model(tokens, Probe()(elmo(tokens)))(_padded(WITH_GAPS[:2]))
    np.testing.assert_array_equal(np.asarray(seen["mask"]),
                                  [[1, 0, 1, 0, 0, 0], [0, 1, 0, 0, 1, 1]])


@pytest.mark.parametrize("name", ["tiny_zip", "tiny_no_words"])
def test_a_vocabulary_model_reads_rows_without_their_empty_tokens(name):
    """ELMoForManyLangs models: their vocabulary's ids, in Python and in the graph."""
    bilm = keras_elmo.load_bilm(os.path.join(EFML, name))
    compact = bilm(bilm.batch_to_ids(_compact(WITH_GAPS)))["layers"].numpy()
    got = bilm(bilm.batch_to_ids(WITH_GAPS))["layers"].numpy()
    for row, sentence in enumerate(WITH_GAPS):
        kept = [k for k, token in enumerate(sentence) if token]
        np.testing.assert_allclose(got[row][:, kept], compact[row][:, :len(kept)], atol=ATOL)
        empty = [k for k, token in enumerate(sentence) if not token]
        assert np.all(got[row][:, empty] == 0)
    elmo = keras_elmo.ElmoLayer(bilm, return_layers=True)
    for inputs in (_padded(WITH_GAPS), tf.ragged.constant(WITH_GAPS)):
        np.testing.assert_allclose(elmo(inputs)["layers"].numpy()[:, :, :got.shape[2]], got,
                                   atol=ATOL)


def test_the_embedders_give_zeros_at_an_empty_token(tiny_model_dir):
    expected, _ = _expected_layers(tiny_model_dir, WITH_GAPS)
    embedder = keras_elmo.ElmoEmbedder(options_file=tiny_model_dir.options_file,
                                       weight_file=tiny_model_dir.weight_file)
    for row, vectors in enumerate(embedder.embed_batch(WITH_GAPS)):
        assert vectors.shape[1] == len(WITH_GAPS[row])
        np.testing.assert_allclose(vectors, expected[row][:, :len(WITH_GAPS[row])], atol=ATOL)
    cache = TokenEmbeddingCache(embedder.bilm)
    out = cache(WITH_GAPS)
    np.testing.assert_allclose(out["layers"].numpy(), expected, atol=ATOL)
    np.testing.assert_array_equal(out["mask"].numpy(), _expected_layers(tiny_model_dir,
                                                                        WITH_GAPS)[1])
    assert "" not in cache
