"""TF1 Hub modules by every way a user names one: a catalog name, a tfhub.dev handle, Kaggle's
download URL (archives with `./` entries, at paths with no extension), a local .tar.gz and
a directory, all giving the module's numbers; and what is refused, in one line, with nothing
left in the cache: a tar.gz that holds no module, a TF2 SavedModel where a TF1 module is
expected, a module whose graph contradicts its variables."""

import io
import os
import shutil
import tarfile

import numpy as np
import pytest

import keras_elmo
import model_mirror
from keras_elmo.pretrained.model_check import ModelCheckError
from keras_elmo.pretrained.resolve import resolve_model

HERE = os.path.dirname(os.path.abspath(__file__))
GOOGLE = os.path.join(HERE, "fixtures", "tfhub", "google_elmo")
DEEPPAVLOV = os.path.join(HERE, "fixtures", "tfhub", "deeppavlov_elmo")
HANDLE = "https://tfhub.dev/google/elmo/3"
KAGGLE = "https://www.kaggle.com/api/v1/models/google/elmo/tensorFlow1/elmo/3/download"
SENTENCES = [["the", "cat", "sat", "."], ["北京", "欢迎", "你"]]


def _tar_gz(directory):
    """`directory` packed as TF Hub serves a module: `./` entries in a tar.gz."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        archive.add(directory, ".")
    return buffer.getvalue()


def _served_extra(directory):
    (directory / "google/elmo").mkdir(parents=True, exist_ok=True)
    (directory / "google/elmo/3").write_bytes(model_mirror.tfhub_archive_bytes(GOOGLE))
    kaggle = directory / "api/v1/models/google/elmo/tensorFlow1/elmo/3"
    kaggle.mkdir(parents=True, exist_ok=True)
    (kaggle / "download").write_bytes(model_mirror.tfhub_archive_bytes(GOOGLE))


mirror_dir, served = model_mirror.served_fixtures(
    ["tfhub-elmo-3", "deeppavlov-elmo-ru-news"], extra=_served_extra)


def _vectors(model):
    layer = keras_elmo.ElmoLayer.from_preset(model, return_layers=True)
    out = layer(keras_elmo.ElmoPreprocessor.from_preset(model)(SENTENCES))
    return np.asarray(out["layers"]), np.asarray(out["elmo"])


@pytest.fixture(scope="module")
def expected():
    return {GOOGLE: _vectors(GOOGLE), DEEPPAVLOV: _vectors(DEEPPAVLOV)}


@pytest.mark.parametrize("model, module", [("tfhub-elmo-3", GOOGLE),
                                           ("deeppavlov-elmo-ru-news", DEEPPAVLOV),
                                           (HANDLE, GOOGLE), (KAGGLE, GOOGLE)])
def test_a_module_by_name_or_url_gives_the_module_directory_s_numbers(model, module, served,
                                                                      expected):
    layers, elmo = _vectors(model)
    np.testing.assert_array_equal(layers, expected[module][0])
    np.testing.assert_array_equal(elmo, expected[module][1])
    if model == HANDLE:  # fetched as TF Hub's own resolver fetches a handle
        assert any("tf-hub-format=compressed" in target for target in served.targets)


def test_a_local_tar_gz_is_unpacked_into_the_cache_once(served, tmp_path, expected):
    archive = tmp_path / "3.tar.gz"
    archive.write_bytes(_tar_gz(GOOGLE))
    layers, elmo = _vectors(str(archive))
    np.testing.assert_array_equal(elmo, expected[GOOGLE][1])
    cached = model_mirror.left_in_cache(tmp_path)
    assert any(path.endswith("variables.index") for path in cached)
    again = resolve_model(str(archive)).model_dir
    assert os.path.isfile(os.path.join(again, "tfhub_module.pb"))
    assert model_mirror.left_in_cache(tmp_path) == cached  # nothing unpacked a second time


def _tf2_saved_model(directory):
    import tensorflow as tf

    module = tf.Module()
    module.v = tf.Variable([1.0, 2.0])
    module.f = tf.function(lambda x: x * module.v,
                           input_signature=[tf.TensorSpec([2], tf.float32)])
    tf.saved_model.save(module, str(directory))
    return directory


def test_what_is_no_tf1_module_is_one_line_and_nothing_is_kept(served, tmp_path):
    not_a_module = tmp_path / "docs"
    not_a_module.mkdir()
    (not_a_module / "README.md").write_text("no model here\n")
    (not_a_module / "saved_model.pb").write_bytes(b"\x08\x01")  # a stray, empty SavedModel
    tf2 = _tf2_saved_model(tmp_path / "tf2")
    for source, expected in ((not_a_module, "holds no model director"),
                             (tf2, "TF2 SavedModel")):
        archive = tmp_path / f"{source.name}.tar.gz"
        archive.write_bytes(_tar_gz(source))
        with pytest.raises((ModelCheckError, ValueError), match=expected) as error:
            keras_elmo.load_bilm(str(archive))
        assert "\n" not in str(error.value) and "nothing of it was kept" in str(error.value)
    assert model_mirror.left_in_cache(tmp_path) == []


def test_a_module_whose_graph_contradicts_its_variables_is_refused_by_name(tmp_path):
    """The graph's initializer of a conv kernel says width 5; the checkpoint's is cut to 4
    positions: the reader names the variable, both shapes, and loads nothing."""
    from keras_elmo.formats import tensor_bundle

    bundle = tensor_bundle.read_tensor_bundle(os.path.join(GOOGLE, "variables", "variables"))
    assert bundle.shapes()["bilm/CNN/W_cnn_4"][1] == (1, 5, 4, 8)
    import tensorflow as tf

    module = tmp_path / "module"
    shutil.copytree(GOOGLE, module)
    names = sorted(bundle.entries)
    values = [bundle.read(name) for name in names]
    values[names.index("bilm/CNN/W_cnn_4")] = values[names.index("bilm/CNN/W_cnn_4")][:, :4]
    prefix = str(module / "variables" / "variables")
    for name in os.listdir(module / "variables"):
        os.remove(module / "variables" / name)
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(v) for v in values])
    with pytest.raises(ValueError, match=r"bilm/CNN/W_cnn_4.*\(1, 4, 4, 8\).*\(1, 5, 4, 8\)") \
            as error:
        keras_elmo.load_bilm(str(module))
    assert "\n" not in str(error.value)
