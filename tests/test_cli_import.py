"""The command line's TensorFlow import skips the extras Keras would load for nothing, leaves
them importable afterwards, keeps the import's objects out of the garbage collector's
reach, and starts an example script as quietly as the command."""

import importlib.util
import json
import subprocess
import sys

import pytest

from keras_elmo.cli.tensorflow_start import UNUSED_EXTRAS, _without

# Run in a fresh interpreter: this one has imported TensorFlow already.
_PROBE = r"""
import gc, importlib, json, sys
from keras_elmo.cli.tensorflow_start import UNUSED_EXTRAS, import_tensorflow
import_tensorflow()
frozen = gc.get_freeze_count()
during = [name for name in UNUSED_EXTRAS if name in sys.modules]
importable = {}
for name in UNUSED_EXTRAS:
    try:
        importlib.import_module(name)
        importable[name] = True
    except ImportError:
        importable[name] = False
print(json.dumps({"during": during, "importable": importable, "frozen": frozen,
                  "entries_gone": not any(name in sys.modules and sys.modules[name] is None
                                          for name in UNUSED_EXTRAS)}))
"""


def test_tensorflow_import_skips_the_extras_and_they_import_later():
    done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["during"] == [], result
    assert result["entries_gone"], result
    # the import's objects are out of the collector's reach (TensorFlow's: far more than
    # 10,000)
    assert result["frozen"] > 10_000, result
    installed = {name: importlib.util.find_spec(name) is not None for name in UNUSED_EXTRAS}
    assert result["importable"] == installed, (result, installed)


def test_the_block_refuses_only_the_named_packages_not_yet_imported():
    with _without(["json", "keras_elmo_no_such_extra"]):
        assert json.dumps([1]) == "[1]"  # imported before: untouched
        with pytest.raises(ModuleNotFoundError, match="keras_elmo_no_such_extra"):
            importlib.import_module("keras_elmo_no_such_extra.sub")
        assert importlib.util.find_spec("keras_elmo_no_such_extra") is None
        assert importlib.import_module("csv")  # not named: imports
    assert "keras_elmo_no_such_extra" not in sys.modules
    with pytest.raises(ModuleNotFoundError, match="No module named 'keras_elmo_no_such_extra'"):
        importlib.import_module("keras_elmo_no_such_extra")


_QUIET_START = r"""
import _example
tf = _example.import_tensorflow()
import keras_elmo
tf.config.list_physical_devices("GPU")  # where TensorFlow looks for CUDA
bilm = keras_elmo.BiLM(keras_elmo.BiLMOptions.tiny())
print(bilm(keras_elmo.batch_to_ids([["a", "b"]]))["layers"].shape)
"""


def test_an_example_script_starts_as_quietly_as_the_command():
    """No native start-up lines (absl, cuda stubs) and no C++ log lines (cuInit, oneDNN's
    DT_BOOL notice) reach an example's stderr: it starts the way `keras-elmo` does."""
    import os

    examples = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            "examples")
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    done = subprocess.run([sys.executable, "-c", _QUIET_START], capture_output=True, text=True,
                          timeout=300, cwd=examples, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "(1, 3, 2, 16)"
    noise = [line for line in done.stderr.splitlines()
             if any(mark in line for mark in ("I0000", "E0000", "W0000", "cuInit",
                                              "All log messages before absl"))]
    assert noise == [], noise
