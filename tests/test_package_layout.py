"""The installed package: one top-level name, lazy public names, layers that import only
downwards (and, inside `keras_elmo/`, folders that import only the folders below them), no
hidden modes, and a command line whose argument checks never load TensorFlow."""

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
    assert [e.value for e in entry] == ["keras_elmo.cli.main:console_main"]


def _python_files(folder):
    """Every .py file under `folder` (a repository folder), as relative paths."""
    for root, _, names in sorted(os.walk(os.path.join(_ROOT, folder))):
        for name in sorted(names):
            if name.endswith(".py"):
                yield os.path.relpath(os.path.join(root, name), os.path.join(_ROOT, folder))


@pytest.mark.parametrize("folder, package", LAYERS)
def test_each_layer_imports_only_lower_layers(folder, package):
    wrong = []
    for name in _python_files(folder):
        path = os.path.join(_ROOT, folder, name)
        for module in _imported_modules(path):
            if module.split(".")[0] in ("training", "export", "cli", "applications",
                                        "evaluation", "embedding"):
                wrong.append(f"{folder}/{name} imports the top-level name {module}")
            layer = _layer_of(module)
            if layer is not None and layer != package and layer not in ALLOWED[package]:
                wrong.append(f"{folder}/{name} imports {module} (layer {layer})")
    assert wrong == []


#: The folders of `keras_elmo/`, lowest first: a folder imports only from those before it
#: (and `keras_elmo.constants`). `text` and `process` know nothing of the model, `formats`
#: reads and writes the layers' weights without importing them, `pretrained` fetches the
#: published models' files (checked with `formats`), `backend` holds what differs between
#: Keras' backends (it knows no layer), `models` assembles layers.
INNER = ["process", "text", "formats", "pretrained", "backend", "layers", "models"]


def test_keras_elmo_folders_import_only_lower_folders():
    wrong = []
    for level, folder in enumerate(INNER):
        allowed = {f"keras_elmo.{f}" for f in INNER[:level + 1]}
        for name in _python_files(os.path.join("keras_elmo", folder)):
            for module in _imported_modules(os.path.join(_ROOT, "keras_elmo", folder, name)):
                inner = ".".join(module.split(".")[:2])
                if module.startswith("keras_elmo.") and inner.split(".")[1] in INNER \
                        and inner not in allowed:
                    wrong.append(f"keras_elmo/{folder}/{name} imports {module}")
    assert wrong == []


#: What must never be in the package: import hooks, private import state, thread-local or
#: context-variable switches of behaviour. Each behaviour is an argument where it is needed.
HIDDEN_MODES = ("sys.meta_path", "_initializing", "threading.local", "ContextVar")


def test_no_hidden_modes_in_the_package():
    found = []
    for folder, _ in LAYERS:
        for name in _python_files(folder):
            text = open(os.path.join(_ROOT, folder, name), encoding="utf-8").read()
            found += [f"{folder}/{name}: {word}" for word in HIDDEN_MODES if word in text]
    assert found == []


#: What changes a process the program owns: its fd 2, its garbage collector, its imports.
PROCESS_WIDE = ("os.dup2", "gc.freeze", "] = None")


def test_only_the_command_changes_process_wide_state():
    """The command's start-up measures live in cli/; no library folder holds one."""
    found = []
    for folder, _ in LAYERS[:-1]:
        for name in _python_files(folder):
            text = open(os.path.join(_ROOT, folder, name), encoding="utf-8").read()
            found += [f"{folder}/{name}: {word}" for word in PROCESS_WIDE if word in text
                      and (word != "] = None" or "sys.modules[" in text)]
    assert found == []


_LIBRARY_USE = r"""
import gc, json, os, sys
import h5py, keras, tensorflow  # what they set themselves (TF2_BEHAVIOR, ...) is theirs
environment, fd2 = dict(os.environ), os.fstat(2)
absent = {name for name, module in sys.modules.items() if module is None}
import keras_elmo
bilm = keras_elmo.BiLM(keras_elmo.BiLMOptions.tiny())
bilm(keras_elmo.batch_to_ids([["a", "b"]]))
keras_elmo.save_published(bilm, sys.argv[1])
keras_elmo.ElmoEmbedder(sys.argv[1]).embed_sentence(["a", "b"])
print(json.dumps({
    "environment": sorted(k for k in set(os.environ) | set(environment)
                          if os.environ.get(k) != environment.get(k)),
    "fd2": os.fstat(2).st_ino == fd2.st_ino, "frozen": gc.get_freeze_count(),
    "absent": sorted({n for n, m in sys.modules.items() if m is None} - absent)}))
"""


@pytest.mark.slow
def test_library_calls_leave_the_process_alone(tmp_path):
    """Building, running, saving, loading and embedding change no environment variable,
    neither fd 2 nor the garbage collector, and hide no module."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TF_", "ONEDNN_", "KERAS_ELMO_"))}
    done = subprocess.run([sys.executable, "-c", _LIBRARY_USE, str(tmp_path / "model")],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"environment": [], "fd2": True, "frozen": 0, "absent": []}, result


def test_public_names_resolve_lazily():
    for name in keras_elmo.__all__:
        assert getattr(keras_elmo, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        keras_elmo.Nope  # noqa: B018


_LOAD_AFTER_IMPORT = """
import sys, keras_elmo
assert "tensorflow" not in sys.modules and "keras" not in sys.modules  # a light import
import keras, keras_elmo.models  # importing the models registers every layer, nothing else
model = keras.models.load_model(sys.argv[1])
print(type(model.get_layer("elmo")).__name__)
"""


@pytest.mark.slow
def test_a_keras_file_loads_in_a_fresh_process_after_importing_keras_elmo_models(tmp_path):
    import keras

    tokens = keras.Input(shape=(None,), dtype="string")
    vectors = keras_elmo.ElmoLayer(keras_elmo.BiLM(keras_elmo.BiLMOptions.tiny()),
                                   name="elmo")(tokens)
    path = str(tmp_path / "tagger.keras")
    keras.Model(tokens, keras.layers.Dense(3)(vectors)).save(path)
    proc = subprocess.run([sys.executable, "-c", _LOAD_AFTER_IMPORT, path], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.split() == ["ElmoLayer"], proc.stderr[-2000:]


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
    ["embed", "elmo-smal", "{tmp}/corpus.txt", "{tmp}/out.hdf5"],  # not a catalog name
    ["models", "download", "no-such-model"],
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
