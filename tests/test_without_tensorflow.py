"""keras-elmo where TensorFlow is not installed: Keras on JAX or PyTorch (CPU) alone.

The slow tests run in a virtual environment of their own, without the system's packages:
keras-elmo's core dependencies and its `jax` and `torch` extras as pyproject.toml states
them (keras, numpy, h5py, jax, torch), and keras-elmo itself (editable, `--no-deps`). It is
built once under the temporary folder (`KERAS_ELMO_TEST_VENVS` to choose another), in a
folder named by a hash of those requirements, this checkout's path and the Python, and
reused while they stay the same; its `pip list` is printed (`pytest -s` shows it). In it,
under `KERAS_BACKEND=jax` and `torch`: TensorFlow cannot be imported; the package, char ids,
weight files, ELMoForManyLangs directories, the catalog and a download from the test mirror
work; the models' numbers equal the numpy reference's and EFML's own outputs; `keras-elmo
embed` and `neighbors` run and name the backend; `train`, `export`, `perplexity` and
`--tokenizer unicode-script` say in one line that they need TensorFlow and write nothing.

The fast tests check the same refusals in this process, with TensorFlow made to look absent.
"""

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib

import h5py
import numpy as np
import pytest

import keras_elmo
import model_mirror
import numpy_reference
import weight_fixtures
from keras_elmo.cli.main import main
from keras_elmo.process import keras_backend
from keras_elmo.text.token_vocabulary import vocabulary_batch_to_ids

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BACKENDS = ("jax", "torch")
EFML = os.path.join(ROOT, "tests", "fixtures", "efml", "tiny_zip")
TFHUB = os.path.join(ROOT, "tests", "fixtures", "tfhub", "google_elmo")
SENTENCES = [["The", "cat", "sat", "down"], ["北京", "欢迎", "你"], ["x" * 60], []]
ATOL = 1e-5
#: The one line of a command that needs TensorFlow, where it is not installed.
NEEDS_TENSORFLOW = ('needs TensorFlow, which is not installed (Keras backend {backend}): '
                    'pip install "keras-elmo[tensorflow]"')
#: The venv's build: pip's time limit (the first build downloads jax, about 100 MB).
_BUILD_SECONDS = 1200


# --- the environment without TensorFlow ------------------------------------------------------
def venv_requirements():
    """keras-elmo's core dependencies and its `jax` and `torch` extras (pyproject.toml)."""
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as handle:
        project = tomllib.load(handle)["project"]
    extras = project["optional-dependencies"]
    return project["dependencies"] + extras["jax"] + extras["torch"]


def venv_path(requirements):
    """The venv's folder: one per requirements, checkout and Python."""
    key = json.dumps([requirements, ROOT, sys.version, sys.executable])
    base = os.environ.get("KERAS_ELMO_TEST_VENVS") or os.path.join(
        tempfile.gettempdir(), "keras-elmo-test-venvs")
    return os.path.join(base, "no-tensorflow-" + hashlib.sha256(key.encode()).hexdigest()[:12])


def _pip(python, *arguments):
    done = subprocess.run([python, "-m", "pip", "--disable-pip-version-check", *arguments],
                          capture_output=True, text=True, timeout=_BUILD_SECONDS)
    assert done.returncode == 0, (arguments, done.stdout[-3000:], done.stderr[-3000:])
    return done.stdout


@pytest.fixture(scope="module")
def venv():
    """The venv's folder, built when missing; prints its `pip list`."""
    path = build_venv()
    with open(os.path.join(path, "pip-list.txt"), encoding="utf-8") as handle:
        print(f"\nthe venv without TensorFlow ({path}), pip list:\n{handle.read()}")
    return path


def build_venv():
    """The venv's folder, built when missing (under a lock: one build at a time).
    scripts/test.sh builds it before the tests (`python tests/test_without_tensorflow.py`),
    so its install is not part of the suite's time."""
    requirements = venv_requirements()
    path = venv_path(requirements)
    ready = os.path.join(path, "pip-list.txt")  # written last: the build is complete
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.isfile(ready):
            shutil.rmtree(path, ignore_errors=True)  # an interrupted build
            subprocess.run([sys.executable, "-m", "venv", path], check=True, timeout=300)
            python = os.path.join(path, "bin", "python")
            _pip(python, "install", "--quiet", *requirements)
            _pip(python, "install", "--quiet", "--no-deps", "-e", ROOT)
            listing = _pip(python, "list", "--format", "freeze")
            with open(ready, "w", encoding="utf-8") as handle:
                handle.write(listing)
    return path


def run_in(venv, backend, argv, cwd, **variables):
    """`argv` (a program of the venv's `bin/` and its arguments) under `KERAS_BACKEND=backend`,
    with this process's environment but its Python path; Keras' folder in `cwd`."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "KERAS_BACKEND", "VIRTUAL_ENV")}
    env.update(KERAS_HOME=os.path.join(cwd, ".keras"), **variables)
    if backend is not None:
        env["KERAS_BACKEND"] = backend
    program = os.path.join(venv, "bin", argv[0])
    return subprocess.run([program, *argv[1:]], capture_output=True, text=True,
                          timeout=600, cwd=cwd, env=env)


def python_in(venv, backend, script, spec, cwd, **variables):
    """Runs `script` with `json.dumps(spec)` as its argument; its last stdout line (JSON)."""
    done = run_in(venv, backend, ["python", "-c", script, json.dumps(spec)], str(cwd),
                  **variables)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A published-layout model directory (random arrays), the test mirror's folder (with
    `elmo-small`'s stand-in) and two text files."""
    root = tmp_path_factory.mktemp("without_tensorflow")
    options = weight_fixtures.make_options()
    arrays = weight_fixtures.random_weight_arrays(options, seed=3)
    weight_fixtures.write_model_dir(str(root / "model"), options, arrays)
    mirror = root / "mirror"
    model_mirror.write_mirror(str(mirror), ["elmo-small"])
    (root / "two.txt").write_text("The cat sat\n北京 欢迎 你\n", encoding="utf-8")
    (root / "corpus.txt").write_text("the cat sat on the mat\na dog sat\n", encoding="utf-8")
    (root / "vocab.txt").write_text("<S>\n</S>\n<UNK>\nthe\ncat\nsat\n", encoding="utf-8")
    return dict(root=root, model=str(root / "model"), options=options, arrays=arrays,
                mirror=str(mirror))


@pytest.fixture
def mirror(files, tmp_path, monkeypatch):
    """The test mirror served; `KERAS_ELMO_MIRROR`, `KERAS_ELMO_CATALOG` and
    `KERAS_ELMO_CACHE` set in this process's environment, which the venv's processes get."""
    with model_mirror.serving(files["mirror"], tmp_path / "cache", monkeypatch) as server:
        yield server


def reference(options, arrays, sentences):
    """The numpy reference's layers `(batch, L + 1, T, 2P)` and mask."""
    return numpy_reference.bilm(arrays, options, sentences)


def stand_in(files):
    """`elmo-small`'s stand-in on the mirror: its options dict and arrays."""
    path = os.path.join(files["mirror"], model_mirror.mirror_path(
        "https://x" + model_mirror.SMALL_OPTIONS))
    with open(path, encoding="utf-8") as handle:
        options = json.load(handle)
    weights = path.replace("_options.json", "_weights.hdf5")
    return options, weight_fixtures.read_hdf5_datasets(weights)


def efml_sentences():
    with open(os.path.join(EFML, "sentences.txt"), encoding="utf-8") as handle:
        return [line.split() for line in handle.read().splitlines() if line.split()]


def efml_outputs():
    saved = np.load(os.path.join(EFML, "efml_outputs.npz"))
    return [saved[str(i)] for i in range(len(saved.files))]


# --- in the venv: the package without a model ------------------------------------------------
_FILES = r"""
import importlib.util, json, os, sys
import numpy as np
spec = json.loads(sys.argv[1])
import keras_elmo
from keras_elmo.formats.efml_model import read_efml_model
from keras_elmo.formats.weight_file import read_weight_file

out = {"tensorflow_found": importlib.util.find_spec("tensorflow") is not None}
try:
    import tensorflow  # noqa: F401
    out["import_tensorflow"] = "imported"
except ImportError as error:
    out["import_tensorflow"] = type(error).__name__
out["char_ids"] = keras_elmo.batch_to_ids(spec["sentences"]).tolist()
out["options"] = keras_elmo.BiLMOptions.from_file(spec["options"]).to_dict()
arrays = read_weight_file(spec["weights"])
out["arrays"] = {name: np.asarray(array).tolist() for name, array in arrays.items()}
vocabulary = keras_elmo.efml_vocabulary(spec["efml"])
out["efml_ids"] = {key: ids.tolist() for key, ids in
                   keras_elmo.vocabulary_batch_to_ids(vocabulary, spec["sentences"]).items()}
out["efml_encoder_arrays"] = len(read_efml_model(spec["efml"]).encoder_weights)
out["catalog"] = len(keras_elmo.pretrained_models())
out["download"] = sorted(os.listdir(keras_elmo.download_model("elmo-small", progress=False)))
out["tensorflow_modules"] = sorted(m for m in sys.modules
                                   if m.split(".")[0] in ("tensorflow", "tensorflow_text"))
print(json.dumps(out))
"""


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_the_package_and_its_files_without_tensorflow(venv, files, mirror, backend, tmp_path):
    spec = dict(sentences=SENTENCES, options=os.path.join(files["model"], "options.json"),
                weights=os.path.join(files["model"], "weights.hdf5"), efml=EFML)
    out = python_in(venv, backend, _FILES, spec, tmp_path)
    assert out["tensorflow_found"] is False and out["import_tensorflow"] == "ModuleNotFoundError"
    np.testing.assert_array_equal(out["char_ids"], numpy_reference.batch_char_ids(SENTENCES))
    assert out["options"] == keras_elmo.BiLMOptions.from_dict(files["options"]).to_dict()
    assert sorted(out["arrays"]) == sorted(files["arrays"])
    for name, array in files["arrays"].items():
        np.testing.assert_array_equal(out["arrays"][name], array)
    vocabulary = keras_elmo.efml_vocabulary(EFML)
    expected = vocabulary_batch_to_ids(vocabulary, SENTENCES)
    assert sorted(out["efml_ids"]) == sorted(expected)
    for key, ids in expected.items():
        np.testing.assert_array_equal(out["efml_ids"][key], ids)
    assert out["efml_encoder_arrays"] > 0
    assert out["catalog"] == len(keras_elmo.pretrained_models())
    assert [n for n in out["download"] if not n.startswith(".")] == ["options.json",
                                                                   "weights.hdf5"]
    assert out["tensorflow_modules"] == []


# --- in the venv: the models -----------------------------------------------------------------
_MODELS = r"""
import json, sys
import numpy as np
spec = json.loads(sys.argv[1])
import keras
import keras_elmo

def numpy(x):
    return keras.ops.convert_to_numpy(x)

sentences = spec["sentences"]
ids = keras_elmo.batch_to_ids(sentences)
arrays = {}
tiny = keras_elmo.BiLM(keras_elmo.BiLMOptions.tiny())
out = tiny(ids)
arrays["tiny_layers"], arrays["tiny_mask"] = numpy(out["layers"]), numpy(out["mask"])
arrays["elmo_layer"] = numpy(keras_elmo.ElmoLayer(tiny)(ids))
arrays["published"] = numpy(keras_elmo.load_bilm(spec["model"])(ids)["layers"])
arrays["preset"] = numpy(keras_elmo.load_bilm("elmo-small")(ids)["layers"])
embedder = keras_elmo.ElmoEmbedder(spec["efml"])
for i, layers in enumerate(embedder.embed_sentences(spec["efml_sentences"])):
    arrays[f"efml_{i}"] = layers
for i, layers in enumerate(keras_elmo.ElmoEmbedder(spec["model"]).embed_sentences(sentences)):
    arrays[f"embedder_{i}"] = layers
hub = keras_elmo.ElmoLayer.from_preset(spec["tfhub"], return_layers=True)
hub_out = hub(keras_elmo.ElmoPreprocessor.from_preset(spec["tfhub"])(sentences))
arrays["tfhub_layers"], arrays["tfhub_elmo"] = numpy(hub_out["layers"]), numpy(hub_out["elmo"])
np.savez(spec["out"], **arrays)
print(json.dumps({"backend": keras.config.backend(),
                  "tensorflow": "tensorflow" in sys.modules}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_the_models_without_tensorflow_equal_the_references(venv, files, mirror, backend,
                                                            tmp_path):
    """A tiny biLM and an `ElmoLayer` on char ids; a published-layout directory, a preset
    (the mirror's `elmo-small`), an ELMoForManyLangs directory and a TF1 Hub module, held
    to the numpy reference and to EFML's own outputs; `ElmoEmbedder` (JAX: compiled, padded
    shapes)."""
    saved = str(tmp_path / "out.npz")
    spec = dict(sentences=SENTENCES, model=files["model"], efml=EFML,
                efml_sentences=efml_sentences(), out=saved, tfhub=TFHUB)
    assert python_in(venv, backend, _MODELS, spec, tmp_path) == {"backend": backend,
                                                                 "tensorflow": False}
    got = np.load(saved)
    lengths = [len(s) for s in SENTENCES]
    steps = max(lengths)
    assert got["tiny_layers"].shape == (len(SENTENCES), 3, steps, 16)
    np.testing.assert_array_equal(got["tiny_mask"], np.arange(steps) < np.array(lengths)[:, None])
    # The default mix is even (softmax(0), gamma 1) and the layer's output zero past the end.
    np.testing.assert_allclose(got["elmo_layer"], got["tiny_layers"].mean(axis=1), atol=ATOL)
    layers, _ = reference(files["options"], files["arrays"], SENTENCES)
    np.testing.assert_allclose(got["published"], layers, rtol=0, atol=ATOL)
    options, arrays = stand_in(files)
    np.testing.assert_allclose(got["preset"], reference(options, arrays, SENTENCES)[0], rtol=0,
                               atol=ATOL)
    for i, expected in enumerate(efml_outputs()):
        np.testing.assert_allclose(got[f"efml_{i}"], expected, rtol=0, atol=ATOL)
    for i, n in enumerate(lengths):
        np.testing.assert_allclose(got[f"embedder_{i}"], layers[i, :, :n], rtol=0, atol=ATOL)
    # A TF1 Hub module (Google's naming), read without TensorFlow, with its trained mix.
    source = os.path.join(os.path.dirname(TFHUB), "input_model")
    with open(os.path.join(source, "options.json"), encoding="utf-8") as handle:
        hub_options = json.load(handle)
    with open(os.path.join(source, "mix.json"), encoding="utf-8") as handle:
        hub_mix = json.load(handle)["google_elmo"]
    hub_layers, hub_mask = reference(
        hub_options, weight_fixtures.read_hdf5_datasets(os.path.join(source, "weights.hdf5")),
        SENTENCES)
    np.testing.assert_allclose(got["tfhub_layers"], hub_layers, rtol=0, atol=ATOL)
    weights = np.exp(hub_mix["aggregation/weights"])
    weights /= weights.sum()
    expected = hub_mix["aggregation/scaling"] * np.einsum("l,bltd->btd", weights, hub_layers)
    np.testing.assert_allclose(got["tfhub_elmo"], expected * hub_mask[..., None], rtol=0,
                               atol=ATOL)


# --- in the venv: the command line -----------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_embed_and_neighbors_run_on_the_backend(venv, files, backend, tmp_path):
    out = str(tmp_path / "two.hdf5")
    done = run_in(venv, backend, ["keras-elmo", "embed", files["model"],
                                  str(files["root"] / "two.txt"), out], str(tmp_path))
    assert done.returncode == 0, done.stderr[-4000:]
    assert f"keras-elmo embed: Keras {_keras_version(venv)} on {backend} " in done.stderr
    assert "wrote " in done.stdout and "2 datasets (3, n, 16)" in done.stdout, done.stdout
    sentences = [["The", "cat", "sat"], ["北京", "欢迎", "你"]]
    layers, _ = reference(files["options"], files["arrays"], sentences)
    with h5py.File(out, "r") as written:
        for i, sentence in enumerate(sentences):
            np.testing.assert_allclose(written[str(i)][...], layers[i, :, :len(sentence)],
                                       rtol=0, atol=ATOL)
    done = run_in(venv, backend, ["keras-elmo", "neighbors", files["model"], "the cat sat",
                                  "--word", "cat", "--corpus", str(files["root"] / "corpus.txt"),
                                  "-k", "2"], str(tmp_path))
    assert done.returncode == 0, done.stderr[-4000:]
    assert f"keras-elmo neighbors: Keras {_keras_version(venv)} on {backend} " in done.stderr
    assert "nearest tokens in context" in done.stdout, done.stdout


def _keras_version(venv):
    with open(os.path.join(venv, "pip-list.txt"), encoding="utf-8") as handle:
        return next(line.split("==")[1].strip() for line in handle
                    if line.lower().startswith("keras=="))


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_what_needs_tensorflow_says_so_in_one_line(venv, files, backend, tmp_path):
    root = files["root"]
    commands = {
        "train": ["train", str(tmp_path / "run"), "--train", str(root / "corpus.txt"),
                  "--vocab", str(root / "vocab.txt")],
        "export": ["export", files["model"], str(tmp_path / "export")],
        "perplexity": ["perplexity", str(tmp_path / "run"), "--heldout",
                       str(root / "corpus.txt")],
        "embed": ["embed", files["model"], str(root / "two.txt"), str(tmp_path / "out.hdf5"),
                  "--tokenizer", "unicode-script"],
    }
    for name, argv in commands.items():
        done = run_in(venv, backend, ["keras-elmo", *argv], str(tmp_path))
        assert done.returncode == 2 and done.stdout == "", (name, done.stdout, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, (name, done.stderr[-3000:])
        assert lines[0].startswith(f"keras-elmo {name}: error: ") and lines[0].endswith(
            'pip install "keras-elmo[tensorflow]"'), lines[0]
        assert NEEDS_TENSORFLOW.format(backend=backend).split(",")[0] in lines[0]
    assert [name for name in os.listdir(tmp_path) if name != ".keras"] == []  # nothing written
    done = run_in(venv, backend, ["keras-elmo", "train", "--help"], str(tmp_path))
    assert done.returncode == 0 and "--train" in done.stdout, done.stderr[-3000:]


@pytest.mark.slow
def test_keras_default_backend_without_tensorflow_is_one_line(venv, files, tmp_path):
    """No KERAS_BACKEND and no keras.json: Keras would run TensorFlow, which is absent."""
    done = run_in(venv, None, ["keras-elmo", "embed", files["model"],
                               str(files["root"] / "two.txt"), str(tmp_path / "out.hdf5")],
                  str(tmp_path))
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.strip() == (
        "keras-elmo embed: error: keras-elmo embed runs on Keras' tensorflow backend (Keras' "
        "default: no KERAS_BACKEND), which is not installed: pip install "
        '"keras-elmo[tensorflow]", or set KERAS_BACKEND to an installed one (jax, torch).')


# --- in this process: TensorFlow made to look absent -----------------------------------------
@pytest.fixture
def without_tensorflow(monkeypatch):
    """`keras_backend.installed` says TensorFlow and tensorflow-text are not installed."""
    real = keras_backend.installed
    monkeypatch.setattr(keras_backend, "installed",
                        lambda module: module not in ("tensorflow", "tensorflow_text")
                        and real(module))


@pytest.mark.parametrize("command", ["train", "export", "perplexity"])
def test_the_tensorflow_commands_refuse_before_writing(command, without_tensorflow, tmp_path,
                                                      tiny_model_dir, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "keras", None)  # as before Keras is imported
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a b c\n", encoding="utf-8")
    argv = {"train": ["train", str(tmp_path / "run"), "--train", str(corpus), "--vocab",
                      str(corpus)],
            "export": ["export", tiny_model_dir.directory, str(tmp_path / "export")],
            "perplexity": ["perplexity", str(tmp_path / "run"), "--heldout", str(corpus)]}
    assert main(argv[command]) == 2
    captured = capsys.readouterr()
    why = {"train": "tf.data, tf.distribute", "export": "a TensorFlow SavedModel",
           "perplexity": "tf.data"}[command]
    assert captured.err == (f"keras-elmo {command}: error: keras-elmo {command} ({why}) "
                            + NEEDS_TENSORFLOW.format(backend="jax") + "\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt", "model"]  # the fixture's


def test_the_tensorflow_commands_refuse_another_backend(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "keras", None)  # as before Keras is imported
    monkeypatch.setenv("KERAS_BACKEND", "torch")
    assert main(["export", "--options", "o.json", "--weights", "w.hdf5",
                 str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == (
        "keras-elmo export: error: keras-elmo export (a TensorFlow SavedModel) runs on Keras' "
        "tensorflow backend; received torch (KERAS_BACKEND=torch): run it with "
        "KERAS_BACKEND=tensorflow.\n")


def test_unicode_script_needs_tensorflow_text(without_tensorflow):
    from keras_elmo.text.tokenizers import tokenize

    assert tokenize(["a b"], "whitespace") == [["a", "b"]]
    with pytest.raises(keras_backend.MissingPackageError,
                       match=r"^tokenizer 'unicode-script' \(tensorflow-text\) needs TensorFlow "
                             r"and tensorflow-text, which are not installed"):
        tokenize(["a b"], "unicode-script")


def test_the_backend_is_read_as_keras_reads_it(tmp_path, monkeypatch):
    """KERAS_BACKEND, else keras.json's "backend" (in KERAS_HOME), else TensorFlow."""
    monkeypatch.setitem(sys.modules, "keras", None)  # as before Keras is imported
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    monkeypatch.delenv("KERAS_BACKEND", raising=False)
    assert keras_backend.configured_backend() == ("tensorflow",
                                                 "Keras' default: no KERAS_BACKEND")
    (tmp_path / "keras.json").write_text('{"backend": "torch"}', encoding="utf-8")
    assert keras_backend.configured_backend() == ("torch", str(tmp_path / "keras.json"))
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    assert keras_backend.configured_backend() == ("jax", "KERAS_BACKEND=jax")
    monkeypatch.setenv("KERAS_BACKEND", "numpy")
    with pytest.raises(ValueError, match=r"^keras-elmo embed runs on Keras' tensorflow, jax or "
                                         r"torch backend; received numpy \(KERAS_BACKEND="
                                         r"numpy\): run it with KERAS_BACKEND set to one of "
                                         r"them\.$"):
        keras_backend.require_backend("keras-elmo embed")


def test_a_backend_not_installed_names_its_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "keras", None)
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    monkeypatch.setattr(keras_backend, "installed", lambda module: module == "torch")
    with pytest.raises(keras_backend.MissingPackageError) as raised:
        keras_backend.require_backend("keras-elmo embed")
    assert str(raised.value) == ("keras-elmo embed runs on Keras' jax backend (KERAS_BACKEND="
                                 "jax), which is not installed: pip install "
                                 '"keras-elmo[jax]", or set KERAS_BACKEND to an installed one '
                                 "(torch).")


@pytest.mark.parametrize("size, minimum, expected", [(1, 1, 1), (2, 1, 2), (3, 1, 4),
                                                     (5, 8, 8), (9, 8, 16), (0, 8, 8)])
def test_shape_buckets(size, minimum, expected):
    from keras_elmo.embedding.traced_bilm import bucket

    assert bucket(size, minimum) == expected


def test_padded_rows_and_steps_change_no_output(tiny_model_dir):
    """What JAX's compiled functions get: the call padded with empty-sentence rows and
    masked steps (`_pad_rows`), the same numbers at the call's own positions."""
    from keras_elmo.embedding.row_packing import Piece
    from keras_elmo.embedding.traced_bilm import TracedBiLM, _pad_rows

    bilm = keras_elmo.load_bilm(tiny_model_dir.directory)
    traced = TracedBiLM(bilm)
    sentences = [["a", "b", "c"], ["d"], ["e", "f"]]
    vectors = [traced.token_vectors(keras_elmo.batch_to_ids([s]))[0] for s in sentences]
    rows = [[Piece(0, 0, 3)], [Piece(1, 0, 1), Piece(2, 0, 2)]]
    plain = traced.packed_layers(vectors, rows)  # (2, L + 1, S, 2P)
    steps = plain.shape[2]
    packed = np.zeros((2, steps, 8), np.float32)
    packed[0, 1:4] = vectors[0]
    packed[1, 1:2], packed[1, 4:6] = vectors[1], vectors[2]
    mask = np.zeros((2, steps), bool)
    mask[0, :5] = mask[1, :7] = True
    starts = np.zeros((2, steps), bool)
    starts[0, 0] = starts[1, 0] = starts[1, 3] = True
    padded = traced._rows(*_pad_rows(packed, mask, starts, (4, 16)),
                          traced.token_vectors(bilm.boundary_token_ids())[0])
    padded = np.asarray(padded)
    assert padded.shape == (4, 3, 16, 16)
    np.testing.assert_allclose(padded[:2, :, :steps] * mask[:, None, :, None],
                               plain * mask[:, None, :, None], rtol=0, atol=1e-6)


def test_char_ids_import_no_tensorflow():
    """characters.py is TensorFlow-free; the graph converters live in string_char_ids."""
    code = ("import sys\nimport keras_elmo.text.characters as c\n"
            "print(sorted(n for n in ('tf_token_char_ids', 'tf_padded_char_ids', "
            "'tf_ragged_char_ids') if hasattr(c, n)), 'tensorflow' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, KERAS_BACKEND="jax"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["[]", "False"]
    from keras_elmo.text import string_char_ids

    assert string_char_ids.tf_padded_char_ids([["a", ""]]).shape.as_list() == [1, 2, 50]


if __name__ == "__main__":
    print(build_venv())
