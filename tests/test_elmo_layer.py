"""`ElmoLayer` as a user meets it: input forms, masks, frozen biLM, `.keras` round trip."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_elmo

TINY = keras_elmo.BiLMOptions.tiny()
SENTENCES = [["The", "cat", "sat"], ["猫", "坐"], []]


def _padded(sentences):
    width = max(len(s) for s in sentences)
    return tf.constant([s + [""] * (width - len(s)) for s in sentences])


def _tagger(elmo):
    tokens = keras.Input(shape=(None,), dtype="string", name="tokens")
    x = elmo(tokens)
    x = keras.layers.Bidirectional(keras.layers.LSTM(4, return_sequences=True))(x)
    tags = keras.layers.Dense(3, activation="softmax")(x)
    return keras.Model(tokens, tags)


def test_input_forms_give_identical_outputs():
    elmo = keras_elmo.ElmoLayer(TINY)
    from_strings = elmo(_padded(SENTENCES))
    from_ragged = elmo(tf.ragged.constant(SENTENCES, dtype=tf.string, ragged_rank=1))
    from_ids = elmo(keras_elmo.batch_to_ids(SENTENCES))
    assert from_strings.shape == (3, 3, TINY.output_dim)
    np.testing.assert_allclose(from_ragged, from_strings, atol=1e-6)
    np.testing.assert_allclose(from_ids, from_strings, atol=1e-6)
    np.testing.assert_array_equal(from_strings.numpy()[2], 0.0)  # empty sentence: zeros


def test_default_mix_is_the_average_of_the_layers():
    elmo = keras_elmo.ElmoLayer(TINY, return_layers=True)
    out = elmo(_padded(SENTENCES))
    np.testing.assert_allclose(out["elmo"], out["layers"].numpy().mean(axis=1), atol=1e-6)


def test_mask_propagates_to_the_next_layer():
    elmo = keras_elmo.ElmoLayer(TINY)
    tokens = _padded(SENTENCES)
    np.testing.assert_array_equal(elmo.compute_mask(tokens).numpy(),
                                  [[1, 1, 1], [1, 1, 0], [0, 0, 0]])
    seen = {}

    class Probe(keras.layers.Layer):
        def __init__(self):
            super().__init__()
            self.supports_masking = True

        def call(self, x, mask=None):
            seen["mask"] = mask
            return x

    inputs = keras.Input(shape=(None,), dtype="string")
    model = keras.Model(inputs, Probe()(keras_elmo.ElmoLayer(TINY)(inputs)))
    model(tokens)
    np.testing.assert_array_equal(np.asarray(seen["mask"]), [[1, 1, 1], [1, 1, 0], [0, 0, 0]])


def test_several_representations_have_their_own_mix():
    elmo = keras_elmo.ElmoLayer(TINY, num_output_representations=2)
    first, second = elmo(_padded(SENTENCES))
    np.testing.assert_allclose(first, second, atol=1e-6)  # same default weights
    elmo.scalar_mixes[1].scalar_parameters.assign([5.0, 0.0, 0.0])
    first, second = elmo(_padded(SENTENCES))
    assert not np.allclose(first, second)
    assert len(elmo.trainable_weights) == 4


def test_fit_trains_the_mix_and_leaves_the_bilm_frozen():
    elmo = keras_elmo.ElmoLayer(TINY)
    model = _tagger(elmo)
    bilm_before = [w.copy() for w in elmo.bilm.get_weights()]
    mix_before = elmo.scalar_mixes[0].get_weights()
    model.compile(keras.optimizers.Adam(0.1), "sparse_categorical_crossentropy")
    model.fit(_padded(SENTENCES), np.array([[0, 1, 2], [2, 1, 0], [0, 0, 0]]), epochs=2,
              verbose=0)
    for before, after in zip(bilm_before, elmo.bilm.get_weights()):
        np.testing.assert_array_equal(before, after)
    assert not np.allclose(mix_before[0], elmo.scalar_mixes[0].get_weights()[0])


def test_trainable_bilm_is_fine_tuned():
    elmo = keras_elmo.ElmoLayer(TINY, trainable_bilm=True)
    _tagger(elmo)  # builds the layer inside a model
    assert len(elmo.trainable_weights) == len(elmo.bilm.weights) + 2


def test_user_model_keras_round_trip(tmp_path):
    model = _tagger(keras_elmo.ElmoLayer(TINY, do_layer_norm=True, dropout=0.5))
    tokens = _padded(SENTENCES)
    expected = model.predict(tokens, verbose=0)
    model.save(tmp_path / "tagger.keras")
    reloaded = keras.models.load_model(tmp_path / "tagger.keras")
    np.testing.assert_allclose(reloaded.predict(tokens, verbose=0), expected, atol=1e-6)
    elmo = reloaded.layers[1]
    assert isinstance(elmo, keras_elmo.ElmoLayer) and elmo.do_layer_norm and not elmo.bilm.trainable


def test_from_weights_matches_the_bilm(tmp_path):
    bilm = keras_elmo.BiLM(TINY)
    keras_elmo.save_published(bilm, tmp_path)
    elmo = keras_elmo.ElmoLayer.from_weights(tmp_path / "options.json", tmp_path / "weights.hdf5",
                                             return_layers=True, num_output_representations=0)
    ids = keras_elmo.batch_to_ids(SENTENCES)
    np.testing.assert_allclose(elmo(ids), bilm(ids)["layers"], atol=1e-6)


def test_long_and_unusual_tokens_are_embedded():
    elmo = keras_elmo.ElmoLayer(TINY)
    out = elmo(tf.constant([["x" * 300, "😀" * 80, "<S>", "</S>"]]))
    assert out.shape == (1, 4, TINY.output_dim) and np.all(np.isfinite(out))


@pytest.mark.parametrize("bad, message", [
    (tf.constant(["a", "b"]), r"shape \(batch, num_tokens\)"),
    (tf.constant([[1.0, 2.0]]), "received dtype float32"),
    (tf.ragged.constant([[1, 2]]), "ragged input must hold tf.string"),
])
def test_bad_inputs_get_a_clear_error(bad, message):
    with pytest.raises(ValueError, match=message):
        keras_elmo.ElmoLayer(TINY)(bad)


def test_bad_arguments_get_a_clear_error():
    with pytest.raises(ValueError, match="would return nothing"):
        keras_elmo.ElmoLayer(TINY, num_output_representations=0)
    with pytest.raises(ValueError, match="num_output_representations"):
        keras_elmo.ElmoLayer(TINY, num_output_representations=-1)


@pytest.mark.slow
def test_keras_file_loads_in_a_fresh_process_after_import_keras_elmo_models(tmp_path):
    """`import keras_elmo.models` registers every layer (at import of the modules that
    define them), so a user's .keras file loads with equal outputs."""
    import subprocess
    import sys

    model = _tagger(keras_elmo.ElmoLayer(TINY))
    tokens = _padded(SENTENCES)
    expected = model.predict(tokens, verbose=0)
    model.save(tmp_path / "tagger.keras")
    np.save(tmp_path / "expected.npy", expected)
    script = (
        "import sys, numpy as np, keras, tensorflow as tf, keras_elmo.models\n"
        f"m = keras.models.load_model({str(tmp_path / 'tagger.keras')!r})\n"
        f"t = tf.constant({[s + [''] * (3 - len(s)) for s in SENTENCES]!r})\n"
        f"e = np.load({str(tmp_path / 'expected.npy')!r})\n"
        "print(float(np.abs(m.predict(t, verbose=0) - e).max()))\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert float(result.stdout.strip().splitlines()[-1]) < 1e-6


def test_a_frozen_backbone_with_dropout_runs_in_inference_mode():
    """A trained run's BiLM carries its recipe dropout; held frozen by an ElmoLayer, it never
    drops (training=True gives the inference outputs); fine-tuned, it does."""
    ids = keras_elmo.batch_to_ids([["The", "cat", "sat"], ["a"]])
    backbone = keras_elmo.BiLM(TINY, dropout=0.5)
    frozen = keras_elmo.ElmoLayer(backbone)
    np.testing.assert_array_equal(frozen(ids, training=True).numpy(),
                                  frozen(ids, training=False).numpy())
    tuned = keras_elmo.ElmoLayer(keras_elmo.BiLM(TINY, dropout=0.5), trainable_bilm=True)
    assert not np.allclose(tuned(ids, training=True).numpy(), tuned(ids, training=False).numpy())
