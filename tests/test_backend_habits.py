"""JAX and PyTorch as their users write them, held to the TensorFlow backend's numbers.

- JAX: `elmo(ids)` outside any `jax.jit` runs one compiled function per shape class
  (keras_elmo/backend/jax_compiled_calls.py): loading compiles nothing; calls of one class
  compile once; `assign`, `set_weights` and `load_weights` are seen at the next call; a
  user's `jax.jit` still traces the layer; dropout draws anew at each call.
- PyTorch: `state_dict()` names from the structure, each weight once; `load_state_dict`
  in the same process, in another one, and inside a user's `torch.nn.Module`;
  `train()`/`eval()` decide dropout where `training` is not passed; `.half()` and the like
  refused in one line.

Each backend runs `tests/backend_habits_checks.py` in its own process.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import weight_fixtures
from backend_habits_checks import weight_model
from keras_elmo import ElmoLayer, batch_to_ids
from keras_elmo.models.bilm import BiLM

HERE = os.path.dirname(os.path.abspath(__file__))
ATOL = 1e-5
SENTENCES = {
    "b1": [["The", "cat", "sat", "on", "the", "mat", "."]],  # (1, 7): class (1, 8)
    "b1_6": [["The", "cat", "sat", "on", "the", "mat"]],  # (1, 6): the same class
    # an empty sentence, an empty string token, a 300-byte token: class (3, 8)
    "b3": [["我", "爱", "北京", "天安门"], [], ["a" + "é" * 150, "b" * 300, "", "c"]],
    "b5": [["w"] * n for n in (13, 2, 9, 1, 11)],  # (5, 13): class (6, 16)
}
MIX = {"scalar_parameters": [0.3, -0.2, 0.5], "gamma": 1.7}


def _mixed(elmo, gamma=None, scalar_parameters=None):
    mix = elmo.scalar_mixes[0]
    if gamma is not None:
        mix.gamma.assign(gamma)
    if scalar_parameters is not None:
        mix.scalar_parameters.assign(np.asarray(scalar_parameters, "float32"))
    return elmo


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("habits"))
    options = weight_fixtures.make_options()
    arrays = weight_fixtures.random_weight_arrays(options, seed=11, lstm_scale=2.0)
    paths = weight_fixtures.write_model_dir(os.path.join(root, "tiny"), options, arrays)
    files = {"options": paths[0], "weights": paths[1]}
    trained = _mixed(ElmoLayer.from_weights(*paths), **MIX)
    mix_weights = os.path.join(root, "mix.weights.h5")
    weight_model(trained).save_weights(mix_weights)
    inputs = {f"ids_{name}": batch_to_ids(s) for name, s in SENTENCES.items()}
    np.savez(os.path.join(root, "inputs.npz"), **inputs)
    with open(os.path.join(root, "cases.json"), "w") as f:
        json.dump({"model": files, "batches": list(SENTENCES), "mix_weights": mix_weights}, f)
    return {"root": root, "files": files, "inputs": inputs}


def _run(workdir, backend, step=None):
    env = dict(os.environ, KERAS_BACKEND=backend,
               PYTHONPATH=HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
    command = [sys.executable, os.path.join(HERE, "backend_habits_checks.py"), workdir["root"]]
    done = subprocess.run(command + ([step] if step else []), env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    out = os.path.join(workdir["root"], backend + (f"-{step}" if step else ""))
    facts = json.load(open(os.path.join(out, "results.json")))
    errors = {k: facts[f"trace:{k[6:]}"] for k in facts if k.startswith("error:")}
    assert not errors, errors
    return dict(np.load(os.path.join(out, "results.npz"))), facts


@pytest.fixture(scope="module")
def jax_run(workdir):
    return _run(workdir, "jax")


@pytest.fixture(scope="module")
def torch_runs(workdir):
    saved = _run(workdir, "torch", "save")
    loaded = _run(workdir, "torch", "load")  # another process
    return saved, loaded


def _one_line(message):
    assert message is not None, "no error raised"
    assert "\n" not in message and "\x1b" not in message, message
    return message


# --- JAX -----------------------------------------------------------------------------------
def test_jax_loading_compiles_nothing(jax_run):
    arrays, facts = jax_run
    assert facts["compiles/loading"] == 0


@pytest.mark.parametrize("batch", sorted(SENTENCES))
def test_jax_eager_calls_equal_tensorflow_at_every_shape(jax_run, workdir, batch):
    arrays, facts = jax_run
    ids = workdir["inputs"][f"ids_{batch}"]
    elmo = ElmoLayer.from_weights(workdir["files"]["options"], workdir["files"]["weights"],
                                  return_layers=True)
    expected = elmo(ids)
    assert arrays[f"eager/elmo/{batch}"].shape == tuple(expected["elmo"].shape)
    np.testing.assert_allclose(arrays[f"eager/elmo/{batch}"], expected["elmo"], atol=ATOL,
                               rtol=0)
    np.testing.assert_allclose(arrays[f"eager/layers/{batch}"], expected["layers"],
                               atol=ATOL, rtol=0)


def test_jax_bilm_eager_call_equals_tensorflow(jax_run, workdir):
    arrays, facts = jax_run
    bilm = BiLM.from_weights(workdir["files"]["options"], workdir["files"]["weights"])
    expected = bilm(workdir["inputs"]["ids_b3"])
    np.testing.assert_allclose(arrays["eager/bilm/b3"], expected["layers"], atol=ATOL, rtol=0)
    np.testing.assert_array_equal(arrays["eager/bilm_mask/b3"], expected["mask"])


def test_jax_shapes_of_one_class_compile_once(jax_run):
    arrays, facts = jax_run
    counts = dict(zip(SENTENCES, facts["compiles/per_call"]))
    assert counts["b1"] >= 1  # the first call of its class compiles
    assert counts["b1_6"] == 0  # (1, 6) runs (1, 7)'s function: no compilation at all
    assert counts["b3"] >= 1 and counts["b5"] >= 1


def test_jax_eager_calls_see_assign_set_weights_and_load_weights(jax_run, workdir):
    arrays, facts = jax_run
    files, ids = workdir["files"], workdir["inputs"]["ids_b3"]
    np.testing.assert_allclose(arrays["fresh/first"],
                               ElmoLayer.from_weights(files["options"], files["weights"])(ids),
                               atol=ATOL, rtol=0)
    for name, mix in (("assign", {"gamma": 2.0}), ("set_weights", {"gamma": 0.5}),
                      ("load_weights", MIX), ("closure", MIX), ("stateless", MIX)):
        expected = _mixed(ElmoLayer.from_weights(files["options"], files["weights"]), **mix)
        key = f"jit/{name}" if name in ("closure", "stateless") else f"fresh/{name}"
        np.testing.assert_allclose(arrays[key], expected(ids), atol=ATOL, rtol=0,
                                   err_msg=name)


def test_jax_eager_dropout_draws_anew_at_each_call(jax_run):
    arrays, facts = jax_run
    assert facts["dropout/differs"]
    assert 0.3 < facts["dropout/zeroed"] < 0.7


# --- PyTorch -------------------------------------------------------------------------------
def test_torch_state_dict_names_come_from_the_structure(torch_runs):
    (arrays, facts), (loaded_arrays, loaded_facts) = torch_runs
    names = facts["state/names"]
    assert len(names) == len(set(names)) == facts["state/num_variables"]  # each once
    assert "bilm.token_embedder.char_embeddings" in names
    assert "bilm.contextual_encoder.cells.backward.1.projection_kernel" in names
    assert "scalar_mixes.0.gamma" in names and "scalar_mixes.0.scalar_parameters" in names
    assert not any("/" in n or "_torch_params" in n or "elmo_layer" in n for n in names)
    assert loaded_facts["state/names"] == names  # another process: the same names


def test_torch_load_state_dict_in_another_process_keeps_the_trained_mix(torch_runs):
    (arrays, facts), (loaded_arrays, loaded_facts) = torch_runs
    assert loaded_facts["state/load_result"] == "<All keys matched successfully>"
    assert np.max(np.abs(loaded_arrays["state/fresh"] - arrays["state/saved"])) > 1e-3
    np.testing.assert_allclose(loaded_arrays["state/loaded"], arrays["state/saved"], atol=1e-6,
                               rtol=0)


def test_torch_load_state_dict_inside_a_users_module(torch_runs):
    (arrays, facts), _ = torch_runs
    assert facts["module/load_result"] == "<All keys matched successfully>"
    assert facts["module/difference"] < 1e-6
    names = facts["module/names"]
    assert "elmo.scalar_mixes.0.gamma" in names and "tags.weight" in names
    assert len(names) == len(set(names))


def test_torch_train_and_eval_decide_dropout(torch_runs):
    (arrays, facts), _ = torch_runs
    assert facts["module/new_mode"] is False  # a new layer runs inference
    assert facts["mode/train_drops"]
    assert facts["mode/train_passed_false"] == 0.0  # training=False passed wins
    assert facts["mode/eval_difference"] == 0.0


def test_torch_dtype_moves_are_refused_in_one_line(torch_runs):
    (arrays, facts), _ = torch_runs
    for name, dtype in (("half", "float16"), ("to_bfloat16", "bfloat16"),
                        ("double", "float64")):
        message = _one_line(facts[f"message/{name}"])
        assert f'dtype="{dtype}"' in message and f"torch.{dtype}" in message
    assert facts["dtype_after_refusals"] == "torch.float32"


def test_torch_mismatched_state_dicts_are_one_line(torch_runs):
    (arrays, facts), _ = torch_runs
    assert "scalar_mixes.0.gamma has shape (3,), expected ()" in _one_line(
        facts["message/misshapen"])
    assert "missing scalar_mixes.0.gamma" in _one_line(facts["message/missing"])
    assert "unexpected extra" in _one_line(facts["message/unexpected"])
