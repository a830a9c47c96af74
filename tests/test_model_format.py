"""keras_elmo.formats.model_format: one step tells a directory's format by its files; every
loader and the download check go through it."""

import json
import os
import shutil

import numpy as np
import pytest

from keras_elmo.formats import model_format
from keras_elmo.formats.model_files import resolve_model_files
from keras_elmo.pretrained.model_check import (ModelCheckError, check_model_dir,
                                               find_model_dir)
from weight_fixtures import make_options, random_weight_arrays, write_weight_file

HERE = os.path.dirname(os.path.abspath(__file__))
EFML_DIR = os.path.join(HERE, "fixtures", "efml", "tiny_zip")
TFHUB_DIR = os.path.join(HERE, "fixtures", "tfhub", "google_elmo")


def _pair(directory, options_name="options.json", weights_name="weights.hdf5"):
    os.makedirs(directory, exist_ok=True)
    options = make_options()
    with open(os.path.join(directory, options_name), "w") as f:
        json.dump(options, f)
    write_weight_file(os.path.join(directory, weights_name), random_weight_arrays(options, 0))
    return directory


def test_each_format_is_told_by_its_files(tmp_path):
    assert model_format.model_format(_pair(tmp_path / "ours")) == "bilm-tf"
    assert model_format.model_format(EFML_DIR) == "elmoformanylangs"
    assert model_format.model_format(tmp_path / "missing") is None
    os.makedirs(tmp_path / "empty")
    assert model_format.model_format(tmp_path / "empty") is None


def test_a_downloaded_pair_under_other_names_is_the_published_layout(tmp_path):
    # NorELMo's archives: options.json + model.hdf5; EMBEDDIA's: options.json + NAME.hdf5.
    norelmo = _pair(tmp_path / "norelmo", weights_name="model.hdf5")
    assert model_format.published_pair(norelmo) == (str(norelmo / "options.json"),
                                                    str(norelmo / "model.hdf5"))
    files = resolve_model_files(norelmo)
    assert (files.format, files.weight_file) == ("bilm-tf", str(norelmo / "model.hdf5"))
    long_names = _pair(tmp_path / "allennlp", "elmo_2x_options.json", "elmo_2x_weights.hdf5")
    assert model_format.model_format(long_names) == "bilm-tf"
    # Two weight files: which one is meant cannot be told, so no pair.
    shutil.copy(norelmo / "model.hdf5", norelmo / "other.hdf5")
    assert model_format.published_pair(norelmo) is None


def test_an_incomplete_directory_gets_the_format_it_is_meant_to_have(tmp_path):
    efml = tmp_path / "efml"
    shutil.copytree(EFML_DIR, efml)
    os.remove(efml / "encoder.pkl")
    assert model_format.model_format(efml) is None
    assert model_format.intended_format(efml) == "elmoformanylangs"
    files = resolve_model_files(efml)
    assert (files.format, files.efml_dir) == ("elmoformanylangs", str(efml))
    hub = tmp_path / "hub"
    os.makedirs(hub)
    (hub / "saved_model.pb").write_bytes(b"")
    assert model_format.intended_format(hub) == "tfhub-module"
    assert resolve_model_files(hub).module_dir == str(hub)
    os.makedirs(tmp_path / "half")
    (tmp_path / "half" / "options.json").write_text("{}")
    assert model_format.intended_format(tmp_path / "half") == "bilm-tf"
    with pytest.raises(FileNotFoundError, match="has no weights.hdf5"):
        resolve_model_files(tmp_path / "half")


def test_describe_model_counts_the_weights_of_each_format(tmp_path):
    pair = model_format.describe_model(_pair(tmp_path / "ours"))
    expected = sum(a.size for a in random_weight_arrays(make_options(), 0).values())
    assert (pair.format, pair.parameter_count, pair.options.lstm_units) == (
        "bilm-tf", expected, 12)
    efml = model_format.describe_model(EFML_DIR)
    assert efml.format == "elmoformanylangs" and efml.parameter_count > 0


def test_the_download_check_finds_one_model_of_any_format(tmp_path):
    staging = tmp_path / "staging"
    _pair(staging / "slovenian", "options.json", "slovenian-elmo-weights.hdf5")
    (staging / "README").write_text("x")
    assert find_model_dir(staging, "embeddia-elmo-sl") == "slovenian"
    facts = check_model_dir(staging / "slovenian", "embeddia-elmo-sl")
    assert (facts["lstm_dim"], facts["projection_dim"], facts["output_dim"]) == (12, 8, 16)
    shutil.copytree(EFML_DIR, staging / "efml")
    with pytest.raises(ModelCheckError, match=r"holds 2 model directories") as error:
        find_model_dir(staging, "x")
    assert "\n" not in str(error.value)


@pytest.mark.skipif(not os.path.isdir(TFHUB_DIR), reason="fixture modules not built")
def test_a_tfhub_module_is_one_model_directory_and_its_variables_are_not_another(tmp_path):
    staging = tmp_path / "staging"
    shutil.copytree(TFHUB_DIR, staging)
    assert model_format.model_format(staging) == "tfhub-module"
    assert find_model_dir(staging, "tfhub-elmo-3") == "."
    description = model_format.describe_model(staging)
    assert description.format == "tfhub-module" and description.mix is not None
    files = resolve_model_files(staging)
    assert (files.format, files.module_dir, files.options_file) == (
        "tfhub-module", str(staging), None)
    assert np.isfinite(description.parameter_count)
