"""The explicit bfloat16 option, `BiLM(..., dtype="bfloat16")`: bfloat16 weights rounded
from the file, float32 outputs close to the float32 model's, float32 files written back."""

import numpy as np
import pytest
import tensorflow as tf

import weight_fixtures
from keras_elmo.bilm import BiLM
from keras_elmo.weight_file import bilm_weight_arrays, save_bilm_weights


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
