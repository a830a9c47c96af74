"""The explicit bfloat16 option, `BiLM(..., dtype="bfloat16")`: bfloat16 weights rounded
from the file, float32 outputs close to the float32 model's, float32 files written back."""

import h5py
import numpy as np
import pytest
import tensorflow as tf

import weight_fixtures
from cpu_class import needs_bfloat16_products
from keras_elmo.models.bilm import BiLM
from keras_elmo.formats.weight_file import bilm_weight_arrays, save_bilm_weights

pytestmark = needs_bfloat16_products


def _to_bfloat16_and_back(array):
    return tf.cast(tf.cast(array, tf.bfloat16), tf.float32).numpy()


@pytest.fixture(scope="module")
def model_files(tmp_path_factory):
    options = weight_fixtures.make_options()
    arrays = weight_fixtures.random_weight_arrays(options, seed=31)
    files = weight_fixtures.write_model_dir(str(tmp_path_factory.mktemp("bf16")), options,
                                            arrays)
    return files, arrays


def test_weights_are_the_file_rounded_to_bfloat16(model_files, tmp_path):
    (options_file, weight_file), arrays = model_files
    bilm = BiLM.from_weights(options_file, weight_file, dtype="bfloat16")
    assert {str(v.dtype) for v in bilm.weights} == {"bfloat16"}
    loaded = bilm_weight_arrays(bilm)
    for name, array in arrays.items():
        np.testing.assert_array_equal(loaded[name], _to_bfloat16_and_back(array), err_msg=name)
    # Written back, the file holds float32 arrays of those rounded values.
    out = str(tmp_path / "out.hdf5")
    save_bilm_weights(bilm, out)
    written = weight_fixtures.read_hdf5_datasets(out)
    for name, array in arrays.items():
        assert written[name].dtype == np.float32, name
        np.testing.assert_array_equal(written[name], _to_bfloat16_and_back(array), err_msg=name)


def test_outputs_are_float32_and_near_the_float32_model(model_files):
    (options_file, weight_file), _ = model_files
    ids = np.random.default_rng(3).integers(1, 262, size=(3, 5, 50)).astype("int32")
    ids[1, 3:] = 0  # a shorter sentence
    exact = BiLM.from_weights(options_file, weight_file)(ids)
    reduced = BiLM.from_weights(options_file, weight_file, dtype="bfloat16")(ids)
    assert reduced["layers"].dtype == tf.float32
    np.testing.assert_array_equal(reduced["mask"].numpy(), exact["mask"].numpy())
    a, b = exact["layers"].numpy(), reduced["layers"].numpy()
    np.testing.assert_array_equal(b[1, :, 3:], 0.0)  # padding stays exactly zero
    diff = np.abs(a - b)
    assert 0 < diff.max() <= 0.05 * np.abs(a).max(), (diff.max(), np.abs(a).max())
    assert diff.mean() <= 0.02 * np.abs(a).mean()


def _encoders_with_the_same_rounded_weights():
    """A float32 and a bfloat16 `ResidualBiLSTM`, the float32 one's weights rounded to
    bfloat16 and copied through a Keras `.weights.h5` (as a user moves them)."""
    import keras_elmo

    def encoder(dtype):
        layer = keras_elmo.ResidualBiLSTM(units=6, projection_dim=4, num_layers=2,
                                          cell_clip=3.0, proj_clip=3.0, dtype=dtype)
        layer(np.zeros((1, 3, 4), "float32"))
        return layer

    exact, reduced = encoder("float32"), encoder("bfloat16")
    rng = np.random.default_rng(5)
    for w in exact.weights:
        w.assign(_to_bfloat16_and_back(rng.normal(size=w.shape).astype("float32")))
    return exact, reduced


def test_get_weights_and_keras_files_hold_the_stored_out_in_layout_in_either_dtype(tmp_path):
    """One documented layout: what the cells store, `get_weights` gives and a Keras weight
    file holds, in float32 and bfloat16; either dtype's file loads into the other."""
    import keras

    def saving(encoder):  # a model holding the layer: what save_weights is called on
        inputs = keras.Input((None, 4))
        return keras.Model(inputs, encoder(inputs))

    exact, reduced = _encoders_with_the_same_rounded_weights()
    path = str(tmp_path / "encoder.weights.h5")
    saving(exact).save_weights(path)
    saving(reduced).load_weights(path)
    with h5py.File(path, "r") as f:
        shapes = []
        f.visititems(lambda name, d: shapes.append(d.shape) if hasattr(d, "shape") else None)
    for encoder in (exact, reduced):
        for cell in encoder.cells["forward"] + encoder.cells["backward"]:
            # input_kernel (4U, in), recurrent_kernel (4U, P), bias, projection_kernel (P, U)
            assert [w.shape for w in cell.get_weights()] == [(24, 4), (24, 4), (24,), (4, 6)]
    assert (4, 6) in shapes and (6, 4) not in shapes and (4, 24) not in shapes, shapes
    for want, got in zip(exact.get_weights(), reduced.get_weights()):
        np.testing.assert_array_equal(np.asarray(got, np.float32), want)
    # and back: the bfloat16 encoder's file loads into a float32 one, values unchanged
    saving(reduced).save_weights(path)
    again, _ = _encoders_with_the_same_rounded_weights()
    for w in again.weights:
        w.assign(tf.zeros_like(w))
    saving(again).load_weights(path)
    for want, got in zip(exact.weights, again.weights):
        np.testing.assert_array_equal(got, want, err_msg=want.path)


@pytest.mark.parametrize("training", [True, False], ids=["sequence-gradient", "plain-ops"])
def test_bfloat16_encoder_outputs_and_gradients_follow_the_float32_ones(training):
    """Same (rounded) weights: outputs and weight gradients within bfloat16's error of the
    float32 encoder's, each gradient in its variable's own stored layout."""
    exact, reduced = _encoders_with_the_same_rounded_weights()
    for source, target in zip(exact.cells["forward"] + exact.cells["backward"],
                              reduced.cells["forward"] + reduced.cells["backward"]):
        for want, variable in zip(source.weights, target.weights):  # the same layout
            variable.assign(tf.cast(want.numpy(), tf.bfloat16))
    rng = np.random.default_rng(6)
    x = tf.constant(_to_bfloat16_and_back(rng.normal(size=(2, 5, 4))), tf.float32)
    mask = np.arange(5)[None, :] < np.array([5, 3])[:, None]
    probe = tf.constant(rng.normal(size=(2, 2, 5, 8)), tf.float32)
    results = []
    for encoder in (exact, reduced):
        with tf.GradientTape() as tape:
            out = tf.cast(encoder(x, mask=mask, training=training), tf.float32)
            loss = tf.reduce_sum(out * probe)
        results.append((out.numpy(), tape.gradient(loss, encoder.trainable_weights)))
    (a, grads_a), (b, grads_b) = results
    assert np.abs(a - b).max() <= 0.03 * np.abs(a).max()
    for want, got, variable in zip(grads_a, grads_b, reduced.trainable_weights):
        got = tf.cast(got, tf.float32).numpy()
        assert got.shape == tuple(variable.shape), variable.path
        want = np.asarray(want)
        # bfloat16 noise used up to 0.93 of a 5% bound on one CPU; a wrong layout is far off
        assert np.abs(got - want).max() <= 0.1 * np.abs(want).max() + 1e-3, variable.path


def test_a_bfloat16_bilm_reloads_from_a_keras_file_in_bfloat16(model_files, tmp_path):
    import keras

    (options_file, weight_file), _ = model_files
    bilm = BiLM.from_weights(options_file, weight_file, dtype="bfloat16")
    ids = np.random.default_rng(4).integers(1, 262, size=(2, 4, 50)).astype("int32")
    expected = bilm(ids)["layers"].numpy()
    path = str(tmp_path / "bilm.keras")
    bilm.save(path)
    loaded = keras.models.load_model(path)
    assert {str(v.dtype) for v in loaded.weights} == {"bfloat16"}
    np.testing.assert_array_equal(loaded(ids)["layers"].numpy(), expected)
