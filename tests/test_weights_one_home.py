"""Every way Keras offers to change a biLM's weights changes what it computes: a frozen
biLM keeps no derived copy of a weight (`set_weights`, `variable.assign`, `load_weights`, a
`.keras` reload), traced and eager, at batch 1, 2 and 32, in float32 and bfloat16.

The expected numbers are the numpy reference's (docs/model.md sections 1-4) of the NEW
weights; the first test is the case a user met: a frozen biLM traced on one sentence kept
computing with its old kernels after `set_weights`.
"""


import keras
import numpy as np
import pytest
import tensorflow as tf

import numpy_reference as ref
import weight_fixtures
from cpu_class import needs_bfloat16_products
from keras_elmo.models.bilm import BiLM
from keras_elmo.models.elmo_layer import ElmoLayer
from keras_elmo.text.characters import batch_to_ids

ATOL = 1e-5
#: bfloat16 weights and arithmetic against the float64 reference of the float32 weights
#: (docs/performance.md, "Reduced precision": 0.4-1.0% on average).
BFLOAT16_ATOL = 0.05
WORDS = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", "to", "house", "red", "北京"]


def _sentences(batch, seed=0):
    rng = np.random.default_rng(seed)
    return [[WORDS[i] for i in rng.integers(0, len(WORDS), int(rng.integers(1, 6)))]
            for _ in range(batch)]


@pytest.fixture(scope="module")
def two_models(tmp_path_factory):
    """Files of two tiny models of one shape: `old` (seed 1) and `new` (seed 2)."""
    options = weight_fixtures.make_options(cell_clip=0.5, proj_clip=0.3)
    models = {}
    for name, seed in (("old", 1), ("new", 2)):
        arrays = weight_fixtures.random_weight_arrays(options, seed=seed, lstm_scale=2.0)
        files = weight_fixtures.write_model_dir(str(tmp_path_factory.mktemp(name)), options,
                                                arrays)
        models[name] = (files, arrays)
    return options, models


def _expected(options, arrays, sentences):
    layers, _ = ref.bilm(arrays, options, sentences)
    return layers


def test_a_frozen_biLM_traced_on_one_sentence_follows_set_weights(two_models):
    options, models = two_models
    bilm = BiLM.from_weights(*models["old"][0])
    new = BiLM.from_weights(*models["new"][0])
    bilm.trainable = False
    traced = tf.function(lambda ids: bilm(ids)["layers"])
    one = [["the", "cat", "sat"]]
    ids = tf.constant(batch_to_ids(one))
    np.testing.assert_allclose(traced(ids).numpy(), _expected(options, models["old"][1], one),
                               atol=ATOL)
    bilm.set_weights(new.get_weights())
    np.testing.assert_allclose(traced(ids).numpy(), _expected(options, models["new"][1], one),
                               atol=ATOL)


def test_two_taggers_given_the_same_weights_predict_the_same(two_models):
    """One tagger predicted once on a sentence, then both get the same weights."""
    _, models = two_models

    def tagger(files):
        tokens = keras.Input(shape=(None,), dtype="string")
        vectors = ElmoLayer(BiLM.from_weights(*files), name="elmo")(tokens)
        return keras.Model(tokens, keras.layers.Dense(3, name="tags")(vectors))

    first, second = tagger(models["old"][0]), tagger(models["new"][0])
    one = tf.constant([["the", "cat", "sat"]])
    first.predict(one, verbose=0)
    first.set_weights(second.get_weights())
    for batch in (one, tf.constant([["the", "cat", "sat"], ["a", "dog", ""]])):
        np.testing.assert_allclose(first.predict(batch, verbose=0),
                                   second.predict(batch, verbose=0), atol=ATOL)


def _set_weights(bilm, new, tmp_path):
    bilm.set_weights(new.get_weights())


def _assign(bilm, new, tmp_path):
    for variable, value in zip(bilm.weights, new.weights):
        variable.assign(value)


def _load_weights(bilm, new, tmp_path):
    path = str(tmp_path / "new.weights.h5")
    new.save_weights(path)
    bilm.load_weights(path)


def _keras_file(bilm, new, tmp_path):
    """A `.keras` file of the new weights, saved frozen; what a user reloads is a new
    object, returned to be checked in place of the old one."""
    path = str(tmp_path / "new.keras")
    new.trainable = False
    new.save(path)
    return keras.models.load_model(path)


CHANGES = {"set_weights": _set_weights, "assign": _assign, "load_weights": _load_weights,
           "keras_file": _keras_file}


def _calls(bilm):
    """`{batch: [(how, call), ...]}`: eager and traced calls of `bilm` at batch 1, 2 and 32,
    each function traced for its batch size (the first call traces it; later calls reuse
    that graph)."""
    calls = {}
    for batch in (1, 2, 32):
        traced = tf.function(lambda x: bilm(x)["layers"],
                             input_signature=[tf.TensorSpec((batch, None, 50), tf.int32)])
        calls[batch] = [("eager", lambda x: bilm(x)["layers"]), ("traced", traced)]
    return calls


def _check_every_call(calls, options, arrays, atol):
    """Every call of `_calls` against the reference of `arrays`."""
    for batch, ways in calls.items():
        sentences = _sentences(batch, seed=batch)
        ids = tf.constant(batch_to_ids(sentences))
        expected = _expected(options, arrays, sentences)
        for how, call in ways:
            np.testing.assert_allclose(call(ids).numpy(), expected, atol=atol,
                                       err_msg=f"{how}, batch {batch}")


def _run_change(two_models, tmp_path, change, dtype, atol):
    options, models = two_models
    bilm = BiLM.from_weights(*models["old"][0], dtype=dtype)
    bilm.trainable = False
    # Every path runs (and is traced) with the old weights first: whatever it keeps, it
    # keeps now; the same functions then run with the new weights.
    calls = _calls(bilm)
    _check_every_call(calls, options, models["old"][1], atol)
    new = BiLM.from_weights(*models["new"][0], dtype=dtype)
    reloaded = CHANGES[change](bilm, new, tmp_path)
    _check_every_call(calls if reloaded is None else _calls(reloaded), options,
                      models["new"][1], atol)


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_every_weight_change_reaches_every_call_float32(two_models, tmp_path, change):
    _run_change(two_models, tmp_path, change, "float32", ATOL)


@needs_bfloat16_products
@pytest.mark.parametrize("change", sorted(CHANGES))
def test_every_weight_change_reaches_every_call_bfloat16(two_models, tmp_path, change):
    _run_change(two_models, tmp_path, change, "bfloat16", BFLOAT16_ATOL)


def test_trainable_is_a_flag_that_creates_nothing(two_models):
    """Freezing a biLM and running it traced, on one sentence and on two, creates no
    variable anywhere in the process, tracked by Keras or not (every `tf.Variable` made in
    the block, eagerly or while tracing, passes the creator scope), and the model keeps its
    own."""
    _, models = two_models
    bilm = BiLM.from_weights(*models["old"][0])
    calls = [tf.constant(batch_to_ids(s)) for s in ([["a", "cat"]], [["a"], ["b", "c"]])]
    for ids in calls:
        tf.function(lambda x: bilm(x)["layers"])(ids)
    own = [id(v) for v in bilm.weights]
    created = []

    def counted(next_creator, **kwargs):
        created.append(kwargs.get("name"))
        return next_creator(**kwargs)

    with tf.variable_creator_scope(counted):
        for trainable in (False, True, False):
            bilm.trainable = trainable
            for ids in calls:
                tf.function(lambda x: bilm(x)["layers"])(ids)
            assert created == [], f"trainable={trainable} created {created}"
        tf.Variable(0.0, name="control")  # the scope sees a variable made here
    assert created == ["control"]
    assert [id(v) for v in bilm.weights] == own
