"""`keras-elmo export`: model directory or --options/--weights, --version, errors."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from keras_elmo.cli.main import main
from test_export_helpers import BATCHES, MIX, assert_outputs_close, eager_reference, make_model_dir


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("cli") / "model")
    make_model_dir(directory)
    return directory


def _metadata(path):
    with open(os.path.join(path, "assets.extra", "keras_elmo_export.json")) as f:
        return json.load(f)


def test_export_model_dir_to_a_tf_serving_version_folder(model_dir, tmp_path, capsys):
    mix_file = tmp_path / "mix.json"
    mix_file.write_text(json.dumps(MIX))
    code = main(["export", model_dir, str(tmp_path / "elmo"), "--version", "3",
                 "--max-length", "40", "--mix-weights", str(mix_file)])
    assert code == 0
    path = str(tmp_path / "elmo" / "3")
    assert sorted(os.listdir(tmp_path / "elmo")) == ["3"]  # no staging folder left behind
    assert "wrote SavedModel" in capsys.readouterr().out
    assert _metadata(path)["max_length"] == 40
    outputs = tf.saved_model.load(path).signatures["serving_default"](
        text=tf.constant([" ".join(s) for s in BATCHES[1]]))
    options, weights = (os.path.join(model_dir, n) for n in ("options.json", "weights.hdf5"))
    expected = eager_reference(options, weights, BATCHES[1], mix=MIX)
    assert_outputs_close({k: v.numpy() for k, v in outputs.items()}, expected, "cli")


@pytest.mark.slow  # two exports
def test_export_from_options_and_weights_files(model_dir, tmp_path):
    options, weights = (os.path.join(model_dir, n) for n in ("options.json", "weights.hdf5"))
    out = str(tmp_path / "sm")
    assert main(["export", out, "--options", options, "--weights", weights]) == 0
    metadata = _metadata(out)
    assert metadata["max_length"] == 512
    np.testing.assert_allclose(metadata["scalar_mix"]["scalar_parameters"], [0.0] * 3)
    assert metadata["scalar_mix"]["gamma"] == 1.0
    assert metadata["trainable_bilm"] is False
    # An existing export is not replaced unless asked.
    assert main(["export", out, "--options", options, "--weights", weights]) == 2
    assert main(["export", out, "--options", options, "--weights", weights,
                 "--overwrite", "--trainable-bilm"]) == 0
    assert _metadata(out)["trainable_bilm"] is True
    assert len(tf.saved_model.load(out).trainable_variables) == 29 + 2  # biLM + s, gamma


@pytest.mark.parametrize("argv, message", [
    (["OUT"], "expected a model: MODEL_DIR"),
    (["OUT", "--options", "o.json"], "--options and --weights go together"),
    (["MODEL", "OUT", "--options", "o.json", "--weights", "w.hdf5"],
     "give either MODEL_DIR or --options/--weights, not both"),
    (["{missing}", "OUT"], "model directory not found"),
    (["{model}", "OUT", "--version", "-1"], "--version must be >= 0"),
    (["{model}", "OUT", "--max-length", "0"], "--max-length must be >= 1"),
    (["{model}", "OUT", "--mix-weights", "{missing}"], "mix weights file not found"),
])
def test_bad_arguments_give_one_line_and_exit_2(model_dir, tmp_path, capsys, argv, message):
    argv = [a.format(model=model_dir, missing=str(tmp_path / "nothing")) for a in argv]
    argv = [str(tmp_path / a) if a in ("OUT", "MODEL") else a for a in argv]
    assert main(["export", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert not os.path.exists(tmp_path / "OUT")


def test_three_paths_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["export", "a", "b", "c"])
    assert exit_info.value.code == 2
    assert "unrecognized arguments: c" in capsys.readouterr().err


def test_model_dir_without_weights_says_what_is_missing(tmp_path, capsys):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "options.json").write_text("{}")
    assert main(["export", str(tmp_path / "run"), str(tmp_path / "out")]) == 2
    assert "has no weights.hdf5" in capsys.readouterr().err
