"""Published weight-file I/O (docs/model.md section 6): exact round trip and clear refusals."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

import weight_fixtures
from keras_elmo.models.bilm import BiLM
from keras_elmo.formats.weight_file import read_weight_file, save_bilm_weights, save_published

VARIANTS = {
    "tiny": {},
    "no_highway": dict(n_highway=0),
    "two_highway_tanh": dict(n_highway=2, activation="tanh"),
    "no_projection": dict(filters=((1, 4), (2, 4))),
    "three_layers_no_skip": dict(n_layers=3, use_skip_connections=False),
}


def _assert_same_arrays(got, expected):
    assert sorted(got) == sorted(expected)
    for name, value in expected.items():
        assert got[name].dtype == value.dtype, name
        assert got[name].shape == value.shape, name
        assert np.array_equal(got[name], value), f"{name} changed in the round trip"


def _shape_texts(shape):
    shape = tuple(shape)
    return (str(shape), str(list(shape)), "x".join(map(str, shape)))


def _assert_names_shapes(message, name, found, expected):
    assert name in message, message
    assert any(t in message for t in _shape_texts(found)), f"found shape missing: {message}"
    assert any(t in message for t in _shape_texts(expected)), f"expected shape missing: {message}"


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_round_trip_byte_identical(tmp_path, variant):
    options = weight_fixtures.make_options(**VARIANTS[variant])
    arrays = weight_fixtures.random_weight_arrays(options, seed=5)
    assert set(arrays) == set(weight_fixtures.weight_shapes(options))
    options_file, weight_file = weight_fixtures.write_model_dir(
        str(tmp_path / "in"), options, arrays)
    bilm = BiLM.from_weights(options_file, weight_file)
    out = str(tmp_path / "out.hdf5")
    save_bilm_weights(bilm, out)
    _assert_same_arrays(weight_fixtures.read_hdf5_datasets(out), arrays)
    _assert_same_arrays(read_weight_file(out), arrays)
    _assert_same_arrays(read_weight_file(weight_file), arrays)


def test_save_published_and_options_round_trip(tmp_path):
    options = weight_fixtures.make_options(n_characters=261)  # bilm-tf training value
    options["n_tokens_vocab"] = 793471
    options["lstm"]["unroll_steps"] = 20
    arrays = weight_fixtures.random_weight_arrays(options, seed=6)
    options_file, weight_file = weight_fixtures.write_model_dir(
        str(tmp_path / "in"), options, arrays)
    bilm = BiLM.from_weights(options_file, weight_file)
    out_dir = str(tmp_path / "published")
    save_published(bilm, out_dir)
    with open(os.path.join(out_dir, "options.json"), encoding="utf-8") as f:
        written = json.load(f)
    assert written["char_cnn"]["n_characters"] == 262
    for section in ("lstm", "char_cnn"):
        for key, value in options[section].items():
            if key != "n_characters":
                assert written[section][key] == value, (section, key)
    assert written["n_tokens_vocab"] == 793471
    assert written["lstm"]["unroll_steps"] == 20
    _assert_same_arrays(weight_fixtures.read_hdf5_datasets(os.path.join(out_dir, "weights.hdf5")),
                        arrays)
    # And the written directory loads again to the same model.
    again = BiLM.from_weights(os.path.join(out_dir, "options.json"),
                              os.path.join(out_dir, "weights.hdf5"))
    ids = np.zeros((1, 2, 50), np.int32)
    ids[0, :, :4] = [259, 100, 260, 261]
    a, b = bilm(ids, training=False)["layers"], again(ids, training=False)["layers"]
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("name,bad_shape", [
    ("CNN/W_cnn_1", (1, 3, 4, 8)),
    ("char_embed", (262, 4)),
    ("CNN_high_0/W_carry", (20, 19)),
    ("CNN_proj/b_proj", (9,)),
    ("RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_0", (16, 40)),
    ("RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_P_0", (8, 12)),
])
def test_wrong_shape_refused(tmp_path, tiny_options_dict, name, bad_shape):
    arrays = weight_fixtures.random_weight_arrays(tiny_options_dict, seed=8)
    expected_shape = arrays[name].shape
    arrays[name] = np.zeros(bad_shape, np.float32)
    options_file, weight_file = weight_fixtures.write_model_dir(
        str(tmp_path), tiny_options_dict, arrays)
    with pytest.raises(ValueError) as info:
        BiLM.from_weights(options_file, weight_file)
    _assert_names_shapes(str(info.value), name, bad_shape, expected_shape)


@pytest.mark.parametrize("name", ["CNN_high_0/W_carry", "CNN/b_cnn_2", "CNN_proj/W_proj",
                                  "RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/B"])
def test_missing_dataset_refused(tmp_path, tiny_options_dict, name):
    arrays = weight_fixtures.random_weight_arrays(tiny_options_dict, seed=9)
    del arrays[name]
    options_file, weight_file = weight_fixtures.write_model_dir(
        str(tmp_path), tiny_options_dict, arrays)
    with pytest.raises(ValueError, match=name):
        BiLM.from_weights(options_file, weight_file)


def test_options_file_mismatch_refused(tmp_path, tiny_options_dict):
    """Options with more layers than the file holds: the missing layer is named."""
    arrays = weight_fixtures.random_weight_arrays(tiny_options_dict, seed=10)
    tiny_options_dict["lstm"]["n_layers"] = 3
    options_file, weight_file = weight_fixtures.write_model_dir(
        str(tmp_path), tiny_options_dict, arrays)
    with pytest.raises(ValueError, match="Cell2"):
        BiLM.from_weights(options_file, weight_file)


def test_missing_files(tmp_path, tiny_model_dir):
    missing = str(tmp_path / "nope.hdf5")
    with pytest.raises(FileNotFoundError, match="nope.hdf5"):
        read_weight_file(missing)
    with pytest.raises(FileNotFoundError, match="nope.hdf5"):
        BiLM.from_weights(tiny_model_dir.options_file, missing)
    with pytest.raises(FileNotFoundError, match="nope.json"):
        BiLM.from_weights(str(tmp_path / "nope.json"), tiny_model_dir.weight_file)


def test_corrupt_hdf5_refused(tmp_path, tiny_model_dir):
    corrupt = tmp_path / "corrupt.hdf5"
    corrupt.write_bytes(os.urandom(64) + b"not an hdf5 file" * 20)
    with pytest.raises(ValueError, match="corrupt.hdf5"):
        read_weight_file(str(corrupt))
    with pytest.raises(ValueError, match="corrupt.hdf5"):
        BiLM.from_weights(tiny_model_dir.options_file, str(corrupt))


def test_bad_json_refused(tmp_path, tiny_model_dir):
    bad = tmp_path / "options.json"
    bad.write_text('{"lstm": {"dim": 12,, }', encoding="utf-8")
    with pytest.raises(ValueError, match="options.json"):
        BiLM.from_weights(str(bad), tiny_model_dir.weight_file)


def test_loading_in_blocks_of_rows_is_exact(tmp_path, monkeypatch):
    """Blocks of one row (the path a published-size matrix takes): still bit for bit."""
    from keras_elmo.formats import weight_file

    monkeypatch.setattr(weight_file, "_BLOCK_BYTES", 1)
    assert weight_file._block_rows((20, 48)) == 1
    options = weight_fixtures.make_options()
    arrays = weight_fixtures.random_weight_arrays(options, seed=11)
    options_file, path = weight_fixtures.write_model_dir(str(tmp_path / "in"), options, arrays)
    bilm = BiLM.from_weights(options_file, path)
    cell = bilm.contextual_encoder.cells["backward"][1]
    w_0 = arrays["RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_0"]  # (P + P, 4D), gates i, j, f, o
    d = 12
    i, j, f, o = (w_0[8:, k * d:(k + 1) * d] for k in range(4))
    # the cell stores its kernels (out, in)
    np.testing.assert_array_equal(cell.recurrent_kernel.numpy(), np.concatenate([i, f, j, o], 1).T)
    out = str(tmp_path / "out.hdf5")
    save_bilm_weights(bilm, out)
    _assert_same_arrays(weight_fixtures.read_hdf5_datasets(out), arrays)
    # Reads share the variable's buffer: no variable was left in TensorFlow's copy-on-read
    # mode (which sliced assignment causes, and which copies the matrix at every read).
    for variable in bilm.weights:
        reads = [np.from_dlpack(tf.convert_to_tensor(variable.value)) for _ in range(2)]
        addresses = {r.__array_interface__["data"][0] for r in reads}
        assert len(addresses) == 1, f"{variable.path} is copied at every read"
        # The loader hands over its arrays without a copy: they must suit TF's kernels.
        assert addresses.pop() % 64 == 0, f"{variable.path} is not 64-byte aligned"


def test_a_refused_file_assigns_nothing(tmp_path):
    """Values are checked before any weight is assigned: a NaN in the last LSTM dataset
    leaves a loaded model exactly as it was."""
    from keras_elmo.formats.weight_file import load_bilm_weights

    options = weight_fixtures.make_options()
    good = weight_fixtures.random_weight_arrays(options, seed=12)
    options_file, good_path = weight_fixtures.write_model_dir(str(tmp_path / "good"), options,
                                                              good)
    bilm = BiLM.from_weights(options_file, good_path)
    before = [v.numpy().copy() for v in bilm.weights]
    bad = weight_fixtures.random_weight_arrays(options, seed=13)
    bad["RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_P_0"][2, 3] = np.nan
    _, bad_path = weight_fixtures.write_model_dir(str(tmp_path / "bad"), options, bad)
    with pytest.raises(ValueError, match="W_P_0' holds 1 non-finite values"):
        load_bilm_weights(bilm, bad_path)
    for variable, value in zip(bilm.weights, before):
        np.testing.assert_array_equal(variable.numpy(), value, err_msg=variable.path)
