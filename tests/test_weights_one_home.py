"""Every way Keras offers to change a biLM's weights changes what it computes: a frozen
biLM keeps no derived copy of a weight (`set_weights`, `variable.assign`, `load_weights` of a
`.weights.h5` or a `.keras` file into the model already traced, a `.keras` reload), traced and
eager, at batch 1, 2 and 32, in float32 and bfloat16.

A float32 step of one row (batch 1) reads `W_h` as stored or transposed in the call, as the
CPU class chooses (`cpu_setup.one_row_transposes_pay`); the float32 tests run both ways on any
CPU (`cpu_class.ONE_ROW_READS`), the transposed way at batch 1 only.

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
from cpu_class import ONE_ROW_READS, force_one_row_read, needs_bfloat16_products
from keras_elmo.models.bilm import BiLM
from keras_elmo.models.elmo_layer import ElmoLayer
from keras_elmo.text.characters import batch_to_ids

ATOL = 1e-5
#: bfloat16 weights and arithmetic against the float64 reference of the float32 weights
#: (docs/performance.md, "Reduced precision": 0.4-1.0% on average).
BFLOAT16_ATOL = 0.05
WORDS = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", "to", "house", "red", "北京"]
#: Batch sizes of the calls checked; only batch 1 runs one-row steps.
BATCHES = (1, 2, 32)


def _batches(transposed):
    """The batch sizes a case checks: only a one-row call reads `W_h` in the way forced
    (`force_one_row_read`), so the transposed case checks batch 1 and the as-stored case
    every size."""
    return BATCHES[:1] if transposed else BATCHES


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


@ONE_ROW_READS
def test_a_frozen_biLM_traced_on_one_sentence_follows_set_weights(two_models, monkeypatch,
                                                                   transposed):
    decisions = force_one_row_read(monkeypatch, transposed)
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
    assert decisions, "no one-row float32 step read W_h"


@ONE_ROW_READS
def test_two_taggers_given_the_same_weights_predict_the_same(two_models, monkeypatch,
                                                             transposed):
    """One tagger predicted once on a sentence, then both get the same weights."""
    decisions = force_one_row_read(monkeypatch, transposed)
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
        if batch.shape[0] in _batches(transposed):
            np.testing.assert_allclose(first.predict(batch, verbose=0),
                                       second.predict(batch, verbose=0), atol=ATOL)
    assert decisions, "no one-row float32 step read W_h"


def _set_weights(bilm, new, tmp_path):
    bilm.set_weights(new.get_weights())


def _assign(bilm, new, tmp_path):
    for variable, value in zip(bilm.weights, new.weights):
        variable.assign(value)


def _load_weights(bilm, new, tmp_path):
    path = str(tmp_path / "new.weights.h5")
    new.save_weights(path)
    bilm.load_weights(path)


def _keras_file_into_traced_model(bilm, new, tmp_path):
    """The weights of a `.keras` file of the new model, saved frozen, loaded into the model
    whose functions are traced already (`load_weights` reads a `.keras` file's weights)."""
    path = str(tmp_path / "new.keras")
    new.trainable = False
    new.save(path)
    bilm.load_weights(path)


def _keras_file_round_trip(bilm, new, tmp_path):
    """A `.keras` file of the new weights, saved frozen, reloaded: a new object with its own
    traces (nothing of the old can linger there), returned to be checked in place of the old
    one; `_keras_file_into_traced_model` is the case of the old traces."""
    path = str(tmp_path / "new.keras")
    new.trainable = False
    new.save(path)
    return keras.models.load_model(path)


CHANGES = {"set_weights": _set_weights, "assign": _assign, "load_weights": _load_weights,
           "keras_file_into_traced_model": _keras_file_into_traced_model,
           "keras_file_round_trip": _keras_file_round_trip}


def _calls(bilm, batches):
    """`{batch: [(how, call), ...]}`: eager and traced calls of `bilm` at each of `batches`,
    each function traced for its batch size (the first call traces it; later calls reuse
    that graph)."""
    calls = {}
    for batch in batches:
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


def _run_change(two_models, tmp_path, change, dtype, atol, batches=BATCHES):
    options, models = two_models
    bilm = BiLM.from_weights(*models["old"][0], dtype=dtype)
    bilm.trainable = False
    # Every path runs (and is traced) with the old weights first: whatever it keeps, it
    # keeps now; the same functions then run with the new weights.
    calls = _calls(bilm, batches)
    _check_every_call(calls, options, models["old"][1], atol)
    new = BiLM.from_weights(*models["new"][0], dtype=dtype)
    reloaded = CHANGES[change](bilm, new, tmp_path)
    _check_every_call(calls if reloaded is None else _calls(reloaded, batches), options,
                      models["new"][1], atol)


@ONE_ROW_READS
@pytest.mark.parametrize("change", sorted(CHANGES))
def test_every_weight_change_reaches_every_call_float32(two_models, tmp_path, monkeypatch,
                                                        change, transposed):
    decisions = force_one_row_read(monkeypatch, transposed)
    _run_change(two_models, tmp_path, change, "float32", ATOL, _batches(transposed))
    assert decisions, "no one-row float32 step read W_h"


@needs_bfloat16_products
@pytest.mark.parametrize("change", sorted(CHANGES))
def test_every_weight_change_reaches_every_call_bfloat16(two_models, tmp_path, monkeypatch,
                                                         change):
    # A bfloat16 step reads `W_h` as stored on every CPU: one way to test. Should it ever
    # read the CPU's choice, this fails, and the test takes ONE_ROW_READS as float32's does.
    decisions = force_one_row_read(monkeypatch, True)
    _run_change(two_models, tmp_path, change, "bfloat16", BFLOAT16_ATOL)
    assert not decisions, "bfloat16 one-row steps now read the CPU's choice of W_h's layout"


@ONE_ROW_READS
def test_trainable_is_a_flag_that_creates_nothing(two_models, monkeypatch, transposed):
    """Freezing a biLM and running it traced, on one sentence and on two, creates no
    variable anywhere in the process, tracked by Keras or not (every `tf.Variable` made in
    the block, eagerly or while tracing, passes the creator scope), and the model keeps its
    own."""
    decisions = force_one_row_read(monkeypatch, transposed)
    _, models = two_models
    bilm = BiLM.from_weights(*models["old"][0])
    calls = [tf.constant(batch_to_ids(s)) for s in ([["a", "cat"]], [["a"], ["b", "c"]])
             if len(s) in _batches(transposed)]
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
    assert decisions, "no one-row float32 step read W_h"
