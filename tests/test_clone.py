"""Configs describe the model, never how it was loaded: a biLM loaded from a weight file (whose
layers were built as zeros for the file to fill) rebuilds from its config, or is cloned with
`keras.models.clone_model`, into a working model of the same architecture with fresh weights;
so does a tagger holding an `ElmoLayer`, which then trains."""

import json

import keras
import numpy as np
import pytest

import weight_fixtures
from keras_elmo import BiLM, ElmoLayer, batch_to_ids

SENTENCES = [["the", "cat", "sat"], ["a", "dog"]]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    options = weight_fixtures.make_options()
    arrays = weight_fixtures.random_weight_arrays(options, seed=5)
    return weight_fixtures.write_model_dir(str(tmp_path_factory.mktemp("model")), options,
                                           arrays)


def _zero_weights(model):
    return [w.path for w in model.weights if w.trainable and not np.any(w.numpy())
            and "bias" not in w.path]


@pytest.mark.parametrize("rebuild", ["from_config", "clone_model"])
def test_a_loaded_bilm_rebuilds_into_a_working_one(files, rebuild):
    loaded = BiLM.from_weights(*files)
    assert "zero_init" not in json.dumps(loaded.get_config())
    copy = (BiLM.from_config(loaded.get_config()) if rebuild == "from_config"
            else keras.models.clone_model(loaded))
    if rebuild == "from_config":
        assert isinstance(copy, BiLM) and copy.options == loaded.options
    # (clone_model rebuilds any functional model, a BiLM too, as a keras Functional of
    # clones of its layers: the same graph and outputs)
    assert [w.shape for w in copy.weights] == [w.shape for w in loaded.weights]
    assert _zero_weights(copy) == []  # drawn, not zeros
    ids = batch_to_ids(SENTENCES)
    layers = np.asarray(copy(ids)["layers"])
    assert np.abs(layers[:, 1:]).min(axis=-1)[np.asarray(copy(ids)["mask"])[:, None]
                                               .repeat(2, 1)].min() > 0  # every LSTM vector
    assert not np.allclose(layers, np.asarray(loaded(ids)["layers"]))  # fresh weights


def test_a_cloned_tagger_trains_and_tags(files):
    tokens = keras.Input(shape=(None,), dtype="string")
    elmo = ElmoLayer.from_weights(*files)
    tags = keras.layers.Dense(3, activation="softmax")(elmo(tokens))
    tagger = keras.Model(tokens, tags)
    clone = keras.models.clone_model(tagger)
    bilm = next(layer for layer in clone.layers if isinstance(layer, ElmoLayer)).bilm
    assert _zero_weights(bilm) == [] and not bilm.trainable  # drawn, and frozen as before
    clone.compile("adam", "sparse_categorical_crossentropy")
    x = keras.ops.convert_to_tensor([["the", "cat", "sat"], ["a", "dog", ""]])
    y = np.array([[0, 1, 2], [2, 1, 0]])
    before = clone.predict(x, verbose=0)
    history = clone.fit(x, y, epochs=3, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]
    after = clone.predict(x, verbose=0)
    assert np.abs(after - before).max() > 1e-4
    assert np.all(np.abs(clone.layers[1](x)).sum(-1)[:, :2] > 0)  # ELMo vectors, not zeros
