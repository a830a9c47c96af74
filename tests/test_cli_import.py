"""The command line's TensorFlow import skips the extras Keras would load for nothing, and
leaves them importable afterwards."""

import importlib.util
import json
import subprocess
import sys

import pytest

from keras_elmo.cli.quiet import UNUSED_EXTRAS, _without

# Run in a fresh interpreter: this one has imported TensorFlow already.
_PROBE = r"""
import importlib, json, sys
from keras_elmo.cli.quiet import UNUSED_EXTRAS, import_tensorflow
import_tensorflow()
during = [name for name in UNUSED_EXTRAS if name in sys.modules]
importable = {}
for name in UNUSED_EXTRAS:
    try:
        importlib.import_module(name)
        importable[name] = True
    except ImportError:
        importable[name] = False
print(json.dumps({"during": during, "importable": importable,
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
