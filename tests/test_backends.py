"""The same ELMo on Keras' JAX and PyTorch backends: numbers, gradients, training, files.

Each backend runs `tests/backend_checks.py` once, in its own process (Keras fixes its backend
at import; the processes run at the same time), on weight files, inputs and `.keras` files
this TensorFlow process made; every test here holds one of its results to the TensorFlow
backend's and to the numpy reference (tests/numpy_reference.py), in float32 on the CPU.
"""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import numpy_reference as ref
import weight_fixtures
import keras_elmo
from keras_elmo import ElmoLayer, batch_to_ids
from keras_elmo.models.bilm import BiLM

pytestmark = pytest.mark.slow

HERE = os.path.dirname(os.path.abspath(__file__))
ATOL = 1e-5
BACKENDS = ("jax", "torch")
EFML_DIR = os.path.join(HERE, "fixtures", "efml", "tiny_no_words")
SENTENCES = {
    "b1": [["The", "cat", "sat", "on", "the", "mat", "."]],
    # ragged lengths, an empty sentence, a token of 300 bytes (over the 50 chars per token),
    # an empty string token between two words (no token)
    "b3": [["我", "爱", "北京", "天安门"], [], ["a" + "é" * 150, "b" * 300, "", "c"]],
}
MODELS = {
    "tiny": weight_fixtures.make_options(),
    # the architecture of bilm-tf's own test model (its fixture's options; random weights)
    "bilmtf_test": weight_fixtures.make_options(
        dim=64, projection_dim=16, char_dim=4, n_highway=2,
        filters=((1, 4), (2, 8), (3, 16), (4, 32), (5, 64))),
}


def _sentences_b30():
    rng = np.random.default_rng(30)
    words = ["the", "cat", "sat", "on", "mats", "人民", "日报", "欢迎", "你", "🎉", "x" * 60]
    return [[words[i] for i in rng.integers(0, len(words), rng.integers(1, 12))]
            for _ in range(30)]


def _tagger(elmo):
    ids = keras.Input(shape=(None, elmo.options.max_characters_per_token), dtype="int32")
    return keras.Model(ids, keras.layers.Dense(3, activation="softmax")(elmo(ids)))


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """What every backend reads: weight files, inputs, a TensorFlow-saved `.keras` file."""
    root = str(tmp_path_factory.mktemp("backends"))
    SENTENCES["b30"] = _sentences_b30()
    cases = {"models": {}, "batches": ["b1", "b3", "b30"], "efml_dir": EFML_DIR,
             "sentences_b3": SENTENCES["b3"],
             "efml_sentences": [line.split() for line in open(
                 os.path.join(EFML_DIR, "sentences.txt"), encoding="utf-8") if line.split()]}
    arrays = {}
    for seed, (name, options) in enumerate(MODELS.items()):
        arrays[name] = weight_fixtures.random_weight_arrays(options, seed=seed + 5,
                                                            lstm_scale=2.0)
        paths = weight_fixtures.write_model_dir(os.path.join(root, name), options,
                                                arrays[name])
        cases["models"][name] = {"options": paths[0], "weights": paths[1]}
    inputs = {f"ids_{b}": batch_to_ids(s) for b, s in SENTENCES.items()}
    rng = np.random.default_rng(0)
    inputs["tags_b30"] = rng.integers(0, 3, inputs["ids_b30"].shape[:2])
    inputs["tags_b3"] = rng.integers(0, 3, inputs["ids_b3"].shape[:2])
    inputs["grad_weights"] = rng.normal(size=inputs["ids_b3"].shape[:2] + (16,)).astype(
        "float32")
    np.savez(os.path.join(root, "inputs.npz"), **inputs)
    with open(os.path.join(root, "cases.json"), "w") as f:
        json.dump(cases, f)
    files = cases["models"]["tiny"]
    model = _tagger(ElmoLayer.from_weights(files["options"], files["weights"]))
    model.save(os.path.join(root, "tf_model.keras"))
    model.save_weights(os.path.join(root, "tf_model.weights.h5"))
    return {"root": root, "cases": cases, "inputs": inputs, "arrays": arrays,
            "tf_model": model}


@pytest.fixture(scope="module")
def checks(request, workdir):
    """`backend_checks.py` under each backend whose tests were selected, each in a process
    of its own, all started at once (each mostly compiles or traces, on one core); its
    output goes to `WORKDIR/<backend>.log`. Maps backend -> process."""
    selected = {item.callspec.params["run"] for item in request.session.items
                if item.module is request.module and "run" in getattr(
                    getattr(item, "callspec", None), "params", {})}
    processes = {}
    for backend in (b for b in BACKENDS if b in selected):
        env = dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=HERE + os.pathsep +
                   os.environ.get("PYTHONPATH", ""))
        with open(os.path.join(workdir["root"], f"{backend}.log"), "w") as log:
            processes[backend] = subprocess.Popen(
                [sys.executable, os.path.join(HERE, "backend_checks.py"), workdir["root"]],
                env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    yield processes
    for process in processes.values():  # the others, when one failed
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.fixture(scope="module", params=BACKENDS)
def run(request, workdir, checks):
    """`(arrays, facts)` that `backend_checks.py` computed under one backend."""
    backend = request.param
    try:
        returncode = checks[backend].wait(timeout=900)
    except subprocess.TimeoutExpired:
        checks[backend].kill()
        returncode = checks[backend].wait()
    with open(os.path.join(workdir["root"], f"{backend}.log"), errors="replace") as log:
        assert returncode == 0, log.read()[-3000:]
    out = os.path.join(workdir["root"], backend)
    facts = json.load(open(os.path.join(out, "results.json")))
    assert facts["backend"] == backend
    return backend, dict(np.load(os.path.join(out, "results.npz"))), facts


def _no_error(facts, name):
    assert f"error:{name}" not in facts, facts.get(f"trace:{name}")


def _tf_bilm(workdir, model="tiny", **kwargs):
    files = workdir["cases"]["models"][model]
    return BiLM.from_weights(files["options"], files["weights"], **kwargs)


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("batch", ["b1", "b3", "b30"])
def test_layers_equal_tensorflow_and_the_numpy_reference(run, workdir, model, batch):
    backend, arrays, facts = run
    _no_error(facts, "inference")
    ids = workdir["inputs"][f"ids_{batch}"]
    expected = _tf_bilm(workdir, model)(ids)
    got = arrays[f"layers/{model}/{batch}"]
    np.testing.assert_allclose(got, np.asarray(expected["layers"]), atol=ATOL, rtol=0)
    np.testing.assert_array_equal(arrays[f"mask/{model}/{batch}"], np.asarray(expected["mask"]))
    sentences = [[t for t in s if t] for s in SENTENCES[batch]]
    reference, _ = ref.bilm(workdir["arrays"][model], MODELS[model], sentences)
    mask = np.asarray(expected["mask"])
    for row in range(len(sentences)):  # the reference reads the sentence without its ""
        np.testing.assert_allclose(got[row][:, mask[row]], reference[row, :, :mask[row].sum()],
                                   atol=ATOL, rtol=0)


def test_a_compiled_predict_equals_the_eager_call(run, workdir):
    backend, arrays, facts = run
    _no_error(facts, "inference")
    for model in MODELS:
        np.testing.assert_allclose(arrays[f"predicted/{model}"], arrays[f"layers/{model}/b3"],
                                   atol=ATOL, rtol=0)


def test_mixes_layers_mask_and_dropout_equal_tensorflow(run, workdir):
    backend, arrays, facts = run
    _no_error(facts, "elmo_layer")
    files = workdir["cases"]["models"]["tiny"]
    ids = workdir["inputs"]["ids_b3"]
    layer = ElmoLayer.from_weights(files["options"], files["weights"],
                                   num_output_representations=2, return_layers=True)
    out = layer(ids)
    np.testing.assert_allclose(arrays["elmo/mix0"], out["elmo"][0], atol=ATOL, rtol=0)
    np.testing.assert_allclose(arrays["elmo/mix1"], out["elmo"][1], atol=ATOL, rtol=0)
    np.testing.assert_allclose(arrays["elmo/layers"], out["layers"], atol=ATOL, rtol=0)
    single = ElmoLayer.from_weights(files["options"], files["weights"], dropout=0.5)
    np.testing.assert_array_equal(arrays["elmo/mask"], single.compute_mask(ids))
    np.testing.assert_allclose(arrays["elmo/inference"], single(ids), atol=ATOL, rtol=0)
    assert 0.3 < facts["dropout_zeroed_fraction"] < 0.7  # half the real values dropped


def test_gradients_through_the_bilm_equal_tensorflow(run, workdir):
    backend, arrays, facts = run
    _no_error(facts, "gradient")
    files = workdir["cases"]["models"]["tiny"]
    layer = ElmoLayer.from_weights(files["options"], files["weights"], trainable_bilm=True,
                                   name="elmo")
    ids = workdir["inputs"]["ids_b3"]
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(layer(ids) * workdir["inputs"]["grad_weights"])
    grads = tape.gradient(loss, layer.trainable_variables)
    assert len(grads) == len([k for k in arrays if k.startswith("grad/")]) > 10
    for variable, grad in zip(layer.trainable_variables, grads):
        got, grad = arrays[f"grad/{variable.path}"], np.asarray(tf.convert_to_tensor(grad))
        scale = max(1.0, float(np.max(np.abs(grad))))
        np.testing.assert_allclose(got, np.asarray(grad), atol=ATOL * scale, rtol=0,
                                   err_msg=variable.path)


def test_fit_trains_the_mix_and_a_frozen_bilm_stays(run):
    backend, arrays, facts = run
    _no_error(facts, "training")
    assert facts["fit/frozen/bilm_change"] == 0.0
    assert facts["fit/frozen/mix_change"] > 1e-4
    assert facts["fit/fine_tuned/bilm_change"] > 1e-4
    assert facts["fit/frozen/trainable_weights"] == 2 + 2  # the mix's s, gamma; Dense's
    assert facts["fit/fine_tuned/trainable_weights"] > 10
    for key in ("frozen", "fine_tuned"):
        losses = facts[f"fit/{key}/losses"]
        assert all(np.isfinite(losses)) and losses[-1] < losses[0]
        assert np.isfinite(facts[f"fit/{key}/evaluate"])
        assert facts[f"fit/{key}/predict_shape"][-1] == 3


def test_a_stateful_bilm_carries_its_state_as_on_tensorflow(run, workdir):
    backend, arrays, facts = run
    _no_error(facts, "stateful")
    bilm = _tf_bilm(workdir, stateful=True)
    ids = workdir["inputs"]["ids_b3"]
    for key in ("first", "second"):
        np.testing.assert_allclose(arrays[f"stateful/{key}"], bilm(ids)["layers"], atol=ATOL,
                                   rtol=0)
    assert np.max(np.abs(arrays["stateful/second"] - arrays["stateful/first"])) > 1e-3
    np.testing.assert_allclose(arrays["stateful/reset"], arrays["stateful/first"], atol=ATOL,
                               rtol=0)


def test_keras_and_weight_files_move_between_backends(run, workdir):
    backend, arrays, facts = run
    _no_error(facts, "keras_files")
    ids = workdir["inputs"]["ids_b3"]
    expected = np.asarray(workdir["tf_model"](ids))
    np.testing.assert_allclose(arrays["keras_file/from_tf"], expected, atol=ATOL, rtol=0)
    np.testing.assert_allclose(arrays["weights_file/from_tf"], expected, atol=ATOL, rtol=0)
    saved = os.path.join(workdir["root"], backend)
    loaded = keras.models.load_model(os.path.join(saved, "model.keras"))
    np.testing.assert_allclose(loaded(ids), arrays["keras_file/saved_here"], atol=ATOL, rtol=0)
    files = workdir["cases"]["models"]["tiny"]
    model = _tagger(ElmoLayer.from_weights(files["options"], files["weights"]))
    model.load_weights(os.path.join(saved, "model.weights.h5"))
    np.testing.assert_allclose(model(ids), arrays["keras_file/saved_here"], atol=ATOL, rtol=0)


def test_efml_directories_and_model_directories_load(run, workdir):
    backend, arrays, facts = run
    _no_error(facts, "loaders")
    efml = keras_elmo.load_bilm(EFML_DIR)
    expected = efml(efml.batch_to_ids(workdir["cases"]["efml_sentences"]))["layers"]
    np.testing.assert_allclose(arrays["efml/layers"], expected, atol=ATOL, rtol=0)
    np.testing.assert_allclose(arrays["load_bilm/layers"],
                               _tf_bilm(workdir)(workdir["inputs"]["ids_b3"])["layers"],
                               atol=ATOL, rtol=0)


def test_the_preprocessor_gives_the_ids_of_batch_to_ids(run, workdir):
    backend, arrays, facts = run
    _no_error(facts, "preprocessor")
    np.testing.assert_array_equal(arrays["preprocessor/ids"], workdir["inputs"]["ids_b3"])
    np.testing.assert_array_equal(arrays["preprocessor/tf_data"], workdir["inputs"]["ids_b3"])
    efml = keras_elmo.load_bilm(EFML_DIR)
    expected = efml.batch_to_ids(workdir["cases"]["efml_sentences"])
    expected = expected["char_ids"] if isinstance(expected, dict) else expected
    np.testing.assert_array_equal(arrays["preprocessor/efml_char_ids"], expected)


def test_strings_and_tensorflow_only_loops_are_one_line(run):
    backend, arrays, facts = run
    _no_error(facts, "errors")
    for name in ("strings", "lists"):
        message = facts[f"message/{name}"]
        assert message is not None and "\n" not in message
        assert "ElmoPreprocessor" in message and backend in message
    for implementation in ("sequence_gradient", "one_row_loop"):
        message = facts[f"message/{implementation}"]
        assert message is not None and "\n" not in message
        assert f"'{implementation}' runs on Keras' TensorFlow backend only" in message
        assert "'batched_loop'" in message
