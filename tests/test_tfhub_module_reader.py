"""TF1 Hub ELMo modules read without TensorFlow (`keras_elmo.formats.tfhub_module`), on the
fixture modules built by TF Hub 0.13 and bilm-tf (tests/fixtures/tfhub), and refusals on
copies of them changed with TensorFlow's own writers."""

import json
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from keras_elmo.formats.tfhub_module import looks_like_tfhub_module, read_tfhub_module

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "tfhub")
INPUT = os.path.join(FIXTURES, "input_model")
MODULES = {"google_elmo": "google", "deeppavlov_elmo": "deeppavlov"}


def _input_arrays():
    arrays = {}
    with h5py.File(os.path.join(INPUT, "weights.hdf5"), "r") as handle:
        handle.visititems(lambda name, item: arrays.__setitem__(name, item[...])
                          if isinstance(item, h5py.Dataset) else None)
    return arrays


@pytest.mark.parametrize("module", sorted(MODULES))
def test_fixture_module_equals_its_input_model(module):
    result = read_tfhub_module(os.path.join(FIXTURES, module))
    with open(os.path.join(INPUT, "options.json")) as handle:
        assert result.options == json.load(handle)
    expected = _input_arrays()
    assert sorted(result.arrays) == sorted(expected)
    for name, array in expected.items():
        assert result.arrays[name].dtype == np.float32 and result.arrays[name].shape == array.shape
        np.testing.assert_array_equal(result.arrays[name], array, err_msg=name)
    with open(os.path.join(INPUT, "mix.json")) as handle:
        weights, gamma = json.load(handle)[module].values()
    assert result.publisher == MODULES[module]
    assert result.mix.scalar_parameters == tuple(float(np.float32(w)) for w in weights)
    assert result.mix.gamma == float(np.float32(np.reshape(gamma, -1)[0]))
    assert {"default", "tokens"} <= set(result.signatures)
    assert len(result.state_variables) == 16 and result.max_batch_size == 8


def test_arrays_load_into_a_bilm():
    import keras_elmo
    from keras_elmo.formats.weight_file import bilm_weight_arrays, load_bilm_arrays

    result = read_tfhub_module(os.path.join(FIXTURES, "google_elmo"), verify_checksums=False)
    bilm = keras_elmo.BiLM(keras_elmo.BiLMOptions.from_dict(result.options))
    load_bilm_arrays(bilm, result.arrays, "google_elmo")
    for name, array in bilm_weight_arrays(bilm).items():
        np.testing.assert_array_equal(array, result.arrays[name], err_msg=name)
    bad = dict(result.arrays, **{"CNN/b_cnn_0": np.zeros(5, np.float32)})
    with pytest.raises(ValueError, match=r"^weight file google_elmo: dataset 'CNN/b_cnn_0' "
                                         r"has shape \(5,\), expected \(4,\)"):
        load_bilm_arrays(bilm, bad, "google_elmo")


def test_looks_like_a_module(tmp_path):
    assert looks_like_tfhub_module(os.path.join(FIXTURES, "google_elmo"))
    assert not looks_like_tfhub_module(INPUT)
    assert not looks_like_tfhub_module(tmp_path / "absent")
    (tmp_path / "variables").mkdir()
    (tmp_path / "saved_model.pb").write_bytes(b"")
    (tmp_path / "variables" / "variables.index").write_bytes(b"")
    assert looks_like_tfhub_module(tmp_path)
    (tmp_path / "options.json").write_text("{}")
    assert not looks_like_tfhub_module(tmp_path)


def test_reader_imports_no_tensorflow():
    code = ("import sys, keras_elmo.formats.tfhub_module; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('tensorflow', 'keras', 'h5py', 'google')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=os.path.dirname(os.path.dirname(__file__)))
    assert out.stdout.strip() == "[]"


# --- refusals --------------------------------------------------------------------------------
def _copy_module(tmp_path, module="google_elmo"):
    directory = tmp_path / module
    shutil.copytree(os.path.join(FIXTURES, module), directory)
    return directory


def _rewrite_variables(directory, change):
    """Rewrites the module's checkpoint with TensorFlow (`SaveV2`) after `change(tensors)`."""
    prefix = str(directory / "variables" / "variables")
    reader = tf.train.load_checkpoint(prefix)
    tensors = {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}
    change(tensors)
    shutil.rmtree(directory / "variables")
    (directory / "variables").mkdir()
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=list(tensors),
                      shape_and_slices=[""] * len(tensors),
                      tensors=[tf.constant(v) for v in tensors.values()])


def _rewrite_graph(directory, change):
    """Rewrites saved_model.pb after `change(node)` on every node of every meta graph."""
    path = directory / "saved_model.pb"
    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString(path.read_bytes())
    for meta in proto.meta_graphs:
        for node in meta.graph_def.node:
            change(node)
    path.write_bytes(proto.SerializeToString())


def _refused(directory, *fragments):
    with pytest.raises(ValueError) as caught:
        read_tfhub_module(directory)
    message = str(caught.value)
    assert "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, message
    return message


def test_unknown_variable(tmp_path):
    directory = _copy_module(tmp_path)
    _rewrite_variables(directory, lambda t: t.update({"bilm/extra": np.zeros(2, np.float32)}))
    _refused(directory, "variable 'bilm/extra' of shape (2,), an unknown variable")


def test_missing_variable(tmp_path):
    directory = _copy_module(tmp_path)
    _rewrite_variables(directory, lambda t: t.pop("bilm/CNN_high_1/b_carry"))
    _refused(directory, "has no variable 'bilm/CNN_high_1/b_carry'", "shape (32,)")


def test_shape_that_does_not_fit(tmp_path):
    directory = _copy_module(tmp_path)
    _rewrite_variables(directory, lambda t: t.update(
        {"bilm/RNN_1/RNN/MultiRNNCell/Cell1/rnn/lstm_cell/bias": np.zeros(64, np.float32)}))
    _refused(directory, "'bilm/RNN_1/RNN/MultiRNNCell/Cell1/rnn/lstm_cell/bias' has shape "
                        "(64,); expected (128,)")


def test_char_table_row_zero_must_be_zero(tmp_path):
    directory = _copy_module(tmp_path)
    _rewrite_variables(directory, lambda t: t["bilm/char_embed"].__setitem__(0, 1.0))
    _refused(directory, "'bilm/char_embed' row 0 holds nonzero values")


def test_variables_contradicting_the_graph(tmp_path):
    directory = _copy_module(tmp_path)
    # A bank of width 6 in the variables: the graph's W_cnn_4 is (1, 5, 4, 8).
    _rewrite_variables(directory, lambda t: t.update(
        {"bilm/CNN/W_cnn_4": np.zeros((1, 6, 4, 8), np.float32)}))
    _refused(directory, "variable 'bilm/CNN/W_cnn_4' has shape (1, 6, 4, 8) in variables/ "
                        "and (1, 5, 4, 8) in the graph")


def test_graph_constants_that_disagree(tmp_path):
    directory = _copy_module(tmp_path)
    scope = "bilm/RNN_1/RNN/MultiRNNCell/Cell1/rnn/while/lstm_cell/clip_by_value/"

    def change(node):
        if node.name in (scope + "Minimum/y", scope + "y"):
            value = tf.make_ndarray(node.attr["value"].tensor)
            node.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(value * 2.0 / 3.0))

    _rewrite_graph(directory, change)
    _refused(directory, "cell_clip is 3.0 in", "and 2.0 in bilm/RNN_1/RNN/MultiRNNCell/Cell1/",
             "expected one value")


def test_activation_not_found(tmp_path):
    directory = _copy_module(tmp_path, "deeppavlov_elmo")
    _rewrite_graph(directory, lambda n: setattr(n, "op", "Elu") if n.op == "Relu"
                   and "/CNN/" in n.name else None)
    _refused(directory, "MaxPool", "expected one activation (Relu or Tanh)")


def test_tf2_saved_model_is_refused(tmp_path):
    module = tf.Module()
    module.v = tf.Variable([1.0, 2.0])
    module.f = tf.function(lambda x: x * module.v,
                           input_signature=[tf.TensorSpec([2], tf.float32)])
    tf.saved_model.save(module, str(tmp_path / "v2"))
    _refused(tmp_path / "v2", "is a TF2 SavedModel", "expected a TF1 Hub module")
    (tmp_path / "v2" / "tfhub_module.pb").write_bytes(b"")  # a marker does not make it TF1
    _refused(tmp_path / "v2", "holds a TF2 checkpoint (_CHECKPOINTABLE_OBJECT_GRAPH")


def test_not_a_module(tmp_path):
    with pytest.raises(FileNotFoundError, match="TF Hub module not found"):
        read_tfhub_module(tmp_path / "absent")
    with pytest.raises(FileNotFoundError, match="saved_model.pb not found"):
        read_tfhub_module(tmp_path)
