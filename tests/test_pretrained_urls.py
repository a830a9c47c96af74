"""URLs wherever a model's files go: `BiLM.from_weights` and `ElmoLayer.from_weights` take
the two files' URLs as `load_bilm` and `from_preset` do, and a Python call's error names the
call's arguments where the command line's names its flags."""

import numpy as np
import pytest

import model_mirror
from keras_elmo.cli.main import main

SMALL_WEIGHTS, SMALL_OPTIONS = model_mirror.SMALL_WEIGHTS, model_mirror.SMALL_OPTIONS


@pytest.fixture(scope="module")
def mirror_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("mirror")
    model_mirror.write_mirror(str(directory), ["elmo-small"])
    return directory


@pytest.fixture
def served(mirror_dir, tmp_path, monkeypatch):
    with model_mirror.serving(mirror_dir, tmp_path / "cache", monkeypatch) as server:
        monkeypatch.delenv("KERAS_ELMO_MIRROR")  # the URLs as given
        yield server


def test_from_weights_takes_the_two_files_urls(served, mirror_dir):
    import keras_elmo

    options_url, weights_url = served.url + SMALL_OPTIONS, served.url + SMALL_WEIGHTS
    local = keras_elmo.load_bilm(str(mirror_dir / ".tiny_model"))
    ids = keras_elmo.batch_to_ids([["The", "cat", "sat"], ["Hello"]])
    bilm = keras_elmo.BiLM.from_weights(options_url, weights_url)
    np.testing.assert_array_equal(bilm(ids)["layers"], local(ids)["layers"])
    assert served.paths() == [SMALL_OPTIONS, SMALL_WEIGHTS]
    elmo = keras_elmo.ElmoLayer.from_weights(options_url, weights_url,
                                             num_output_representations=2)
    tokens = np.array([["The", "cat", "sat"], ["Hello", "", ""]], object)
    np.testing.assert_array_equal(
        elmo(tokens)[1],
        keras_elmo.ElmoLayer(local, num_output_representations=2)(tokens)[1])
    assert len(served.requests) == 2  # the second call reads the cache


def test_a_python_call_names_its_arguments_and_the_command_line_its_flags(served, tmp_path,
                                                                          capsys, monkeypatch):
    import keras_elmo

    with pytest.raises(ValueError) as raised:
        keras_elmo.BiLM.from_preset(served.url + SMALL_WEIGHTS)
    line = str(raised.value)
    assert line.startswith(f"the model URL {served.url}{SMALL_WEIGHTS} names no archive; ")
    assert "options_file=URL, weight_file=URL" in line and "\n" not in line
    with pytest.raises(ValueError) as raised:
        keras_elmo.BiLM.from_weights(served.url + SMALL_OPTIONS, "weights.hdf5")
    assert str(raised.value) == (
        "options_file and weight_file (--options and --weights on the command line) go "
        "together as two URLs or two files; received options_file="
        f"'{served.url}{SMALL_OPTIONS}' and weight_file='weights.hdf5'.")
    monkeypatch.chdir(tmp_path)
    code = main(["export", served.url + SMALL_WEIGHTS, "out"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1].startswith(
        f"keras-elmo export: error: the model URL {served.url}{SMALL_WEIGHTS} names no archive")
    assert "--options URL --weights URL" in err[-1]
