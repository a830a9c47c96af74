"""The same results everywhere (issue 63, item 4): an empty batch, an empty sentence and a
batch of empty sentences give TensorFlow's result on JAX and PyTorch; bad ids are refused in
our one line (no Keras wrapper, no ANSI colours) that names what was received and what this
backend takes; without a usable backend, `keras_elmo.ElmoLayer` says which extra to install.

JAX and PyTorch each run `tests/backend_edge_checks.py` in a process of their own (Keras
fixes its backend at import; both start at once); this TensorFlow process runs the same
checks in itself and holds the others to its results.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import backend_edge_checks
import weight_fixtures
from keras_elmo import batch_to_ids

pytestmark = pytest.mark.slow  # processes of their own, as tests/test_backends.py

HERE = os.path.dirname(os.path.abspath(__file__))
ATOL = 1e-5
BACKENDS = ("jax", "torch")
#: Id batches `(batch, T, 50)`: no sentence, an empty one beside others, only empty ones.
BATCHES = {
    "b_empty": [],
    "b_empty_sentences": [[], ["The", "cat", "sat"], [], ["a", "b"]],
    "b_all_empty": [[], []],
}
#: The batches with no token at all (the first one also under a user's `jax.jit`).
WITHOUT_TOKENS = ["b_empty", "b_all_empty"]
#: The layers of `backend_edge_checks.layers_of` that run on each batch.
LAYERS = {"b_empty": ["bilm", "elmo1", "elmo2", "only_layers"],
          "b_all_empty": ["bilm", "elmo1", "elmo2"], "b_empty_sentences": ["bilm", "elmo2"]}
#: Sentences for the embedder (`keras-elmo embed`'s path), and a file with empty lines.
EMBED_SENTENCES = {"none": [], "all_empty": [[], []], "one_empty": [["a"], [], ["b", "c"]]}
EMBED_TEXT = "the cat\n\nsat\n\n"
CHARS = 50
#: A word model (ELMoForManyLangs layout: char and word ids), and a word id past its table.
WORD_MODEL = os.path.join(HERE, "fixtures", "efml", "tiny_legacy")
WORD_ID_TOO_HIGH = 10 ** 6
#: The wrong inputs: (nested list, dtype), and for the range errors the ids received.
BAD_INPUTS = {"float_ids": "float32", "width_49": "int32", "rank_2": "int32",
              "id_300": "int32", "id_negative": "int32"}
RANGE = ("char ids must be in [0, 261] (shifted ids, 0 = no token; see "
         "keras_elmo.batch_to_ids); received ids from {} to {}.")
IDS = (f"int char ids (batch, num_tokens, {CHARS}) or a word model's dict "
       '{"char_ids": ..., "word_ids": (batch, num_tokens)}')


def bad_inputs():
    ids = batch_to_ids([["a", "b"]])  # (1, 2, 50)
    high, negative = ids.copy(), ids.copy()
    high[0, 1, 3] = 300
    negative[0, 0, 5] = -1
    return {"float_ids": ids.astype("float32"), "width_49": ids[..., :49], "rank_2": ids[0],
            "id_300": high, "id_negative": negative}


def expected_error(backend, who, case):
    """The one line `who` raises for `case` on `backend`, written out here."""
    received = {"float_ids": "dtype float32, shape (1, 2, 50)",
                "width_49": "dtype int32, shape (1, 2, 49)",
                "rank_2": "dtype int32, shape (2, 50)"}
    if case.startswith("id_"):
        ids = bad_inputs()[case]
        return RANGE.format(ids.min(), ids.max())
    if who == "ElmoLayer" and backend == "tensorflow":
        expects = ('ElmoLayer expects tf.string tokens (batch, num_tokens), padded with "" or '
                   f"ragged, {IDS}")
    elif who == "ElmoLayer":
        expects = (f"ElmoLayer expects {IDS} on Keras' {backend} backend (string tokens become "
                   "ids first, through keras_elmo.ElmoPreprocessor)")
    else:
        expects = (f"BiLM expects {IDS} on Keras' {backend} backend (from "
                   "keras_elmo.batch_to_ids or bilm.batch_to_ids)")
    if case == "dict_without_char_ids":
        return f"{expects}; received a dict with keys ['chars']."
    return f"{expects}; received {received[case]}."


def assert_one_line(error, expected):
    assert error is not None, f"no error; expected {expected!r}"
    message = error["message"]
    assert "\n" not in message and "\x1b" not in message, message
    assert error["type"] == "ValueError", error
    assert message == expected


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """The tiny model's files, the batches and the wrong inputs that every backend reads."""
    root = str(tmp_path_factory.mktemp("edge_cases"))
    options = weight_fixtures.make_options()
    options_file, weight_file = weight_fixtures.write_model_dir(
        os.path.join(root, "model"), options,
        weight_fixtures.random_weight_arrays(options, seed=7, lstm_scale=2.0))
    text_file = os.path.join(root, "lines.txt")
    with open(text_file, "w", encoding="utf-8") as f:
        f.write(EMBED_TEXT)
    inputs = {name: batch_to_ids(sentences) for name, sentences in BATCHES.items()}
    inputs["b_two"] = batch_to_ids([["a", "b"]])
    np.savez(os.path.join(root, "inputs.npz"), **inputs)
    bad = bad_inputs()
    cases = {"options": options_file, "weights": weight_file, "batches": sorted(BATCHES),
             "batches_without_tokens": WITHOUT_TOKENS, "layers": LAYERS,
             "word_model": WORD_MODEL, "word_id_too_high": WORD_ID_TOO_HIGH,
             "embed_sentences": EMBED_SENTENCES, "embed_file": text_file,
             "bad_inputs": {name: value.tolist() for name, value in bad.items()},
             "bad_dtypes": BAD_INPUTS}
    with open(os.path.join(root, "cases.json"), "w") as f:
        json.dump(cases, f)
    return root


@pytest.fixture(scope="module")
def processes(workdir):
    """`backend_edge_checks.py` under JAX and PyTorch, started at once; backend -> process."""
    started = {}
    for backend in BACKENDS:
        env = dict(os.environ, KERAS_BACKEND=backend,
                   PYTHONPATH=HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
        with open(os.path.join(workdir, f"{backend}.log"), "w") as log:
            started[backend] = subprocess.Popen(
                [sys.executable, os.path.join(HERE, "backend_edge_checks.py"), workdir],
                env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    yield started
    for process in started.values():
        if process.poll() is None:
            process.kill()
            process.wait()


def results(workdir, backend):
    return (dict(np.load(os.path.join(workdir, f"{backend}.npz"))),
            json.load(open(os.path.join(workdir, f"{backend}.json"))))


@pytest.fixture(scope="module")
def tensorflow(workdir, processes):
    """The same checks in this (TensorFlow) process, while the others run."""
    backend_edge_checks.run(workdir)
    return results(workdir, "tensorflow")


@pytest.fixture(scope="module", params=BACKENDS)
def other(request, workdir, processes):
    """`(backend, arrays, facts)` of the JAX or PyTorch process."""
    return finished(request.param, workdir, processes)


def finished(backend, workdir, processes):
    """`(backend, arrays, facts)` of `backend`'s process, once it has ended well."""
    try:
        returncode = processes[backend].wait(timeout=300)
    except subprocess.TimeoutExpired:
        processes[backend].kill()
        returncode = processes[backend].wait()
    with open(os.path.join(workdir, f"{backend}.log"), errors="replace") as log:
        assert returncode == 0, log.read()[-3000:]
    arrays, facts = results(workdir, backend)
    assert facts["backend"] == backend
    return backend, arrays, facts


def test_tensorflow_gives_the_empty_results(tensorflow):
    """TensorFlow's own results, the reference: empty shapes, zeros, a False mask."""
    arrays, facts = tensorflow
    assert not [key for key in facts if key.startswith("failed:")], facts
    assert arrays["bilm/b_empty/layers"].shape == (0, 3, 0, 16)
    assert arrays["bilm/b_empty/mask"].shape == (0, 0)
    assert arrays["bilm/b_all_empty/layers"].shape == (2, 3, 0, 16)
    assert arrays["elmo1/b_empty"].shape == (0, 0, 16)
    assert arrays["elmo2/b_all_empty/elmo/1"].shape == (2, 0, 16)
    assert arrays["elmo2/b_all_empty/layers"].shape == (2, 3, 0, 16)
    assert arrays["only_layers/b_empty"].shape == (0, 3, 0, 16)
    np.testing.assert_array_equal(arrays["bilm/b_empty_sentences/mask"],
                                  [[False] * 3, [True] * 3, [False] * 3, [True, True, False]])
    for mix in (arrays["elmo2/b_empty_sentences/elmo/0"],
                arrays["bilm/b_empty_sentences/layers"]):
        assert not mix[[0, 2]].any() and mix[[1, 3]].any()  # the empty sentences: zeros
    assert arrays["elmo1_own_tensor/b_empty"].shape == (0, 0, 16)
    assert arrays["word_model/b_empty/layers"].shape[::2] == (0, 0)
    assert [a.shape for a in (arrays["embed/one_empty/0"], arrays["embed/one_empty/1"])] == [
        (3, 1, 16), (3, 0, 16)]
    assert [arrays[f"embed_file/{i}"].shape[1] for i in range(3)] == [2, 0, 1]


def test_empty_batches_and_sentences_equal_tensorflow(other, tensorflow):
    backend, arrays, facts = other
    expected, _ = tensorflow
    failed = {key: value[-1500:] for key, value in facts.items() if key.startswith("failed:")}
    assert not failed, failed
    own = {key for key in arrays if "_jit/" not in key}  # JAX's jit has no TensorFlow twin
    assert own == set(expected)
    for key in sorted(arrays):
        want = expected[key.replace("elmo2_jit/", "elmo2/")]
        assert arrays[key].shape == want.shape, key
        assert arrays[key].dtype == want.dtype, key
        np.testing.assert_allclose(arrays[key], want, atol=ATOL, rtol=0, err_msg=key)


@pytest.mark.parametrize("who, case", [(who, case) for who in ("ElmoLayer", "BiLM")
                                       for case in sorted(BAD_INPUTS)]
                         + [("ElmoLayer", "dict_without_char_ids")])
def test_bad_ids_are_our_one_line(other, tensorflow, who, case):
    """No Keras wrapper, no ANSI colours: the message says what was received and what this
    backend takes (no tf.string off TensorFlow); the range errors are TensorFlow's own."""
    backend, _, facts = other
    assert_one_line(facts[f"{who}/{case}"], expected_error(backend, who, case))
    assert_one_line(tensorflow[1][f"{who}/{case}"], expected_error("tensorflow", who, case))
    assert "tf.string" not in facts[f"{who}/{case}"]["message"]


def test_a_word_models_ids_are_checked_before_the_call(other, tensorflow):
    """Char ids without word ids, a word id past the table, word ids of another shape."""
    from keras_elmo import BiLM

    backend, _, facts = other
    bilm = BiLM.from_efml(WORD_MODEL)
    chars, words = bilm.options.max_characters_per_token, bilm.word_embedder.vocabulary_size
    for name, facts_of in (("tensorflow", tensorflow[1]), (backend, facts)):
        expects = (f"BiLM expects int char ids (batch, num_tokens, {chars}) or a word model's "
                   'dict {"char_ids": ..., "word_ids": (batch, num_tokens)} on Keras\' '
                   f"{name} backend (from keras_elmo.batch_to_ids or bilm.batch_to_ids)")
        assert_one_line(facts_of["word_model/char_ids_alone"],
                        f'{expects}; this word model needs "word_ids" too: received char ids '
                        "alone.")
        assert_one_line(facts_of["word_model/word_ids_shape"],
                        f'{expects}; received "word_ids" dtype int32, shape (1, 1).')
        assert_one_line(facts_of["word_model/word_id_too_high"],
                        f"word ids must be in [0, {words}] (shifted ids, 0 = no token; see "
                        "keras_elmo.text.token_vocabulary); received ids from "
                        f"{WORD_ID_TOO_HIGH} to {WORD_ID_TOO_HIGH}.")


def test_the_backends_own_tensors_are_checked_before_the_call(other, tensorflow):
    backend, _, facts = other
    too_high = expected_error(backend, "ElmoLayer", "id_300")
    assert_one_line(facts["ElmoLayer/own_tensor/id_300"], too_high)
    assert_one_line(tensorflow[1]["ElmoLayer/own_tensor/id_300"], too_high)


def test_strings_say_what_this_backend_takes(other, tensorflow):
    backend, _, facts = other
    assert_one_line(facts["ElmoLayer/strings"], (
        f"ElmoLayer takes char ids on Keras' {backend} backend; received string tokens: turn "
        "them into ids first with keras_elmo.ElmoPreprocessor (preprocessor(tokens) -> ids), "
        "or bilm.batch_to_ids(sentences)."))
    assert tensorflow[1]["ElmoLayer/strings"] is None  # TensorFlow takes them


def test_a_bad_id_inside_jax_jit_ends_in_our_line(workdir, processes):
    """Traced ids have no values before the compiled call runs: JAX reports the check's
    `ValueError` inside its own runtime error, our line last."""
    backend, _, facts = finished("jax", workdir, processes)
    error = facts["jit/id_300"]
    assert error is not None and error["type"] == "JaxRuntimeError", error
    too_high = expected_error(backend, "ElmoLayer", "id_300")
    assert error["message"].splitlines()[-1] == "ValueError: " + too_high


# --- no usable backend --------------------------------------------------------------------
_BLOCKED_IMPORT = r"""
import importlib.abc, json, sys
blocked = sys.argv[1]

class Absent(importlib.abc.MetaPathFinder):  # the backend's package, as if not installed
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] == blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, Absent())
import keras_elmo
keras_elmo.ElmoLayer
"""


def missing_backend_line(backend, installed):
    return (f"keras_elmo.process.keras_backend.MissingPackageError: keras_elmo.ElmoLayer runs "
            f"on Keras' {backend} backend (KERAS_BACKEND={backend}), which is not installed: "
            f'pip install "keras-elmo[{backend}]", or set KERAS_BACKEND to an installed one '
            f"({', '.join(installed)}).")


@pytest.mark.parametrize("backend", ["tensorflow", "jax", "torch"])
def test_a_backend_not_installed_is_one_line_naming_its_extra(backend, tmp_path):
    """The chosen backend's package absent: `keras_elmo.ElmoLayer` raises our one line, and
    Keras' own `No module named ...` trace is not shown beside it."""
    env = dict(os.environ, KERAS_BACKEND=backend, KERAS_HOME=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", _BLOCKED_IMPORT, backend], env=env,
                          capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    others = [name for name in ("tensorflow", "jax", "torch") if name != backend]
    assert lines[-1] == missing_backend_line(backend, others), done.stderr[-3000:]
    assert "No module named" not in done.stderr


def test_keras_elmo_without_tensorflow_installed_names_the_extra(tmp_path):
    """In the venv without TensorFlow (tests/test_without_tensorflow.py builds it)."""
    from test_without_tensorflow import build_venv, run_in

    done = run_in(build_venv(), "tensorflow",
                  ["python", "-c", "import keras_elmo; keras_elmo.ElmoLayer"], str(tmp_path))
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == missing_backend_line(
        "tensorflow", ["jax", "torch"]), done.stderr[-3000:]
    assert "No module named" not in done.stderr
