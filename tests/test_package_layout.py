"""The installed package: one top-level name, lazy public names, layers that import only
downwards, and a command line whose argument checks never load TensorFlow."""

import ast
import importlib.metadata
import json
import os
import subprocess
import sys

import pytest

import keras_elmo

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: Repository folder -> installed package, lowest layer first. A package may import only
#: from the packages before it (and from itself).
LAYERS = [
    ("keras_elmo", "keras_elmo"),
    ("training", "keras_elmo.training"),
    ("evaluation", "keras_elmo.evaluation"),
    ("export", "keras_elmo.export"),
    ("embedding", "keras_elmo.embedding"),
    ("cli", "keras_elmo.cli"),
]
ALLOWED = {
    "keras_elmo": set(),
    "keras_elmo.training": {"keras_elmo"},
    "keras_elmo.evaluation": {"keras_elmo", "keras_elmo.training"},
    "keras_elmo.export": {"keras_elmo"},
    "keras_elmo.embedding": {"keras_elmo", "keras_elmo.export"},
    "keras_elmo.cli": {name for _, name in LAYERS},
}


def _layer_of(module):
    """The layer (installed package) a dotted `keras_elmo...` module name belongs to."""
    for _, package in reversed(LAYERS):
        if module == package or module.startswith(package + "."):
            return package
    return None


def _imported_modules(path):
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module


def test_only_keras_elmo_is_installed_as_a_top_level_name():
    top_level = importlib.metadata.distribution("keras-elmo").read_text("top_level.txt")
    assert top_level.split() == ["keras_elmo"]
    entry = [e for e in importlib.metadata.entry_points(group="console_scripts")
             if e.name == "keras-elmo"]
    assert [e.value for e in entry] == ["keras_elmo.cli.main:main"]


@pytest.mark.parametrize("folder, package", LAYERS)
def test_each_layer_imports_only_lower_layers(folder, package):
    wrong = []
    for name in sorted(os.listdir(os.path.join(_ROOT, folder))):
        if not name.endswith(".py"):
            continue
        path = os.path.join(_ROOT, folder, name)
        for module in _imported_modules(path):
            if module.split(".")[0] in ("training", "export", "cli", "applications",
                                        "evaluation", "embedding"):
                wrong.append(f"{folder}/{name} imports the top-level name {module}")
            layer = _layer_of(module)
            if layer is not None and layer != package and layer not in ALLOWED[package]:
                wrong.append(f"{folder}/{name} imports {module} (layer {layer})")
    assert wrong == []


def test_public_names_resolve_lazily():
    for name in keras_elmo.__all__:
        assert getattr(keras_elmo, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        keras_elmo.Nope  # noqa: B018


_KERAS_AFTER = """
import sys, keras_elmo
assert "tensorflow" not in sys.modules and "keras" not in sys.modules
import keras
print(keras.saving.get_registered_object("keras_elmo>ElmoLayer").__name__)
"""


@pytest.mark.slow
def test_layers_are_registered_when_keras_loads_after_keras_elmo():
    proc = subprocess.run([sys.executable, "-c", _KERAS_AFTER], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0 and proc.stdout.split() == ["ElmoLayer"], proc.stderr


#: Subcommand argument lists that fail their checks (one clear line, exit 2).
BAD_ARGUMENTS = [
    ["--help"],
    ["vocab", "--train", "{tmp}/corpus.txt", "--out", "{tmp}/vocab.txt"],
    ["train", "{tmp}/run", "--train", "{tmp}/missing.txt", "--vocab", "{tmp}/vocab.txt"],
    ["train", "{tmp}/run", "--train", "{tmp}/corpus.txt", "--vocab", "{tmp}/no_vocab.txt"],
    ["train", "{tmp}/run", "--train", "{tmp}/corpus.txt", "--vocab", "{tmp}/vocab.txt",
     "--heldout", "{tmp}/missing.txt"],
    ["perplexity", "{tmp}/no_run", "--heldout", "{tmp}/corpus.txt"],
    ["export", "{tmp}/no_run", "{tmp}/out"],
    ["embed", "{tmp}/no_run", "{tmp}/corpus.txt", "{tmp}/out.hdf5"],
    ["neighbors", "{tmp}/no_run", "a b", "--corpus", "{tmp}/corpus.txt", "--word", "a"],
    ["data", "people-daily", "--out", "{tmp}/corpus.txt"],
]

_PROBE = """
import json, sys
from keras_elmo.cli.main import main
try:
    code = main(json.loads(sys.argv[1]))
except SystemExit as exit:
    code = exit.code
print(json.dumps({"code": code, "tensorflow": "tensorflow" in sys.modules}))
"""


@pytest.mark.slow
def test_cli_checks_and_vocab_do_not_import_tensorflow(tmp_path):
    (tmp_path / "corpus.txt").write_text("a b c\nb c\n", encoding="utf-8")
    for arguments in BAD_ARGUMENTS:
        argv = [a.format(tmp=tmp_path) for a in arguments]
        proc = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(argv)],
                              capture_output=True, text=True, timeout=120)
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        assert result["tensorflow"] is False, (argv, proc.stderr)
        if argv[0] == "vocab":
            assert result["code"] == 0, proc.stderr
        elif argv[0] != "--help":
            assert result["code"] == 2, (argv, proc.stderr)
            assert len(proc.stderr.strip().splitlines()) == 1, (argv, proc.stderr)
