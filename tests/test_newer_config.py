"""A `.keras` file written by a newer keras-elmo (a config key this version does not know):
one line that says so, not Keras' error nor a setting silently dropped."""

import json
import zipfile

import keras
import pytest

import keras_elmo


def _find(config, class_name):
    if isinstance(config, dict):
        if config.get("class_name") == class_name:
            return config
        values = config.values()
    elif isinstance(config, list):
        values = config
    else:
        return None
    return next((found for v in values if (found := _find(v, class_name))), None)


@pytest.fixture(scope="module")
def tagger_file(tmp_path_factory):
    ids = keras.Input(shape=(None, 50), dtype="int32")
    elmo = keras_elmo.ElmoLayer(keras_elmo.BiLMOptions.tiny())
    path = str(tmp_path_factory.mktemp("newer") / "tagger.keras")
    keras.Model(ids, keras.layers.Dense(2)(elmo(ids))).save(path)
    return path


@pytest.mark.parametrize("class_name", ["ElmoLayer", "BiLM"])
def test_a_newer_config_key_is_one_line(tagger_file, tmp_path, class_name):
    with zipfile.ZipFile(tagger_file) as archive:
        files = {name: archive.read(name) for name in archive.namelist()}
    config = json.loads(files["config.json"])
    _find(config, class_name)["config"]["attention_heads"] = 4  # a setting of a later version
    files["config.json"] = json.dumps(config).encode()
    newer = str(tmp_path / "newer.keras")
    with zipfile.ZipFile(newer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    keras.models.load_model(tagger_file)  # the file as written loads
    with pytest.raises(ValueError) as error:
        keras.models.load_model(newer)
    message = str(error.value)
    assert message == (f"this {class_name} was saved by a newer keras-elmo: its config has "
                       f"attention_heads, which keras-elmo {keras_elmo.__version__} does not "
                       "know; expected a file of this version or older (pip install -U "
                       "keras-elmo to read it).")
