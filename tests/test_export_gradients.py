"""The export under a GradientTape, and TF Hub's variable contract, in this process.

Every entry point of the loaded SavedModel (the four signatures and `__call__`) is called
under a tape, eagerly and inside a `tf.function`; the gradients of a downstream variable and
of the mix's `s` and `gamma` are compared with a numpy computation from the outputs.
tests/test_export_training.py trains through the export with Keras 3, tf_keras +
tensorflow_hub and a raw tape, each in a process that has nothing of keras-elmo.
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

import keras_elmo
from keras_elmo.export import ElmoModule, export_model_dir, export_saved_model
from test_export_helpers import BATCHES, MIX, assert_outputs_close, eager_reference, padded

#: Tiny biLM of `make_model_dir`: 29 weight tensors, P = 8, output dim 16, 3 layers.
NUM_BILM_VARIABLES = 29
SENTENCES = BATCHES[0]  # batch 3, lengths 4, 2 and 0


@pytest.fixture(scope="module")
def model(exported_tiny_model):
    """Tiny model dir with a scalar_mix.json, exported (once per session, conftest.py) and
    loaded."""
    return dict(exported_tiny_model, loaded=tf.saved_model.load(exported_tiny_model["path"]))


def _entry_points():
    tokens, lengths = padded(SENTENCES)
    tokens = tf.constant(tokens.astype(str).reshape(tokens.shape))
    lengths = tf.constant(lengths)
    text = tf.constant([" ".join(s) for s in SENTENCES])
    char_ids = tf.constant(keras_elmo.batch_to_ids(SENTENCES))
    return {
        "tokens": lambda m: m.signatures["tokens"](tokens=tokens, sequence_len=lengths),
        "default": lambda m: m.signatures["default"](text=text),
        "serving_default": lambda m: m.signatures["serving_default"](text=text),
        "char_ids": lambda m: m.signatures["char_ids"](char_ids=char_ids),
        "__call__(text)": lambda m: m(text),
        "__call__(tokens)": lambda m: m({"tokens": tokens, "sequence_len": lengths}),
        "__call__(char_ids)": lambda m: m(char_ids),
    }


def _expected_gradients(outputs, w, probe, s, gamma):
    """numpy dL/dw, dL/ds, dL/dgamma of `L = sum((default @ w)^2) + sum(elmo * probe)`."""
    word = outputs["word_emb"]
    layers = np.stack([np.concatenate([word, word], -1), outputs["lstm_outputs1"],
                       outputs["lstm_outputs2"]], axis=1)  # (batch, 3, T, 16)
    mask = outputs["sequence_mask"].astype(np.float32)  # (batch, T)
    count = np.maximum(mask.sum(1), 1.0)  # (batch,)
    scores = outputs["default"] @ w  # (batch, 2)
    # dL/d elmo: the probe, plus the mean pooling's share of the quadratic term.
    d_elmo = probe + (mask / count[:, None])[..., None] * (2 * scores @ w.T)[:, None, :]
    a = np.exp(s) / np.exp(s).sum()
    d_a = gamma * np.einsum("btd,bjtd->j", d_elmo, layers)
    d_s = a * (d_a - (a * d_a).sum())
    d_gamma = (2 * (scores ** 2).sum() + (outputs["elmo"] * probe).sum()) / gamma
    d_w = 2 * outputs["default"].T @ scores
    return d_w, d_s, d_gamma


@pytest.mark.parametrize("mode", ["eager", "tf.function"])
@pytest.mark.parametrize("entry", sorted(_entry_points()))
def test_every_entry_point_has_gradients_for_what_consumes_it(model, entry, mode):
    loaded = model["loaded"]
    call = _entry_points()[entry]
    rng = np.random.default_rng(0)
    w = tf.Variable(rng.normal(size=(16, 2)).astype("float32"))  # a downstream layer
    probe = tf.constant(rng.normal(size=(3, 4, 16)).astype("float32"))
    frozen = [v for v in loaded.variables if v.name.startswith("bilm/")][-1]

    def step():
        with tf.GradientTape() as tape:
            out = call(loaded)
            loss = (tf.reduce_sum(tf.square(out["default"] @ w))
                    + tf.reduce_sum(out["elmo"] * probe))
        grads = tape.gradient(loss, [w, loaded.scalar_parameters, loaded.gamma, frozen])
        return out, grads

    out, (d_w, d_s, d_gamma, d_frozen) = (tf.function(step) if mode == "tf.function"
                                          else step)()
    outputs = {k: v.numpy() for k, v in out.items()}
    expected = _expected_gradients(outputs, w.numpy(), probe.numpy(),
                                   np.array(MIX["scalar_parameters"], np.float32), MIX["gamma"])
    for got, want, name in zip((d_w, d_s, d_gamma), expected, ("w", "s", "gamma")):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-4, err_msg=name)
    assert np.abs(d_s.numpy()).min() > 0 and d_frozen is None  # the biLM is not watched


def test_plain_loop_traces_no_custom_gradient_and_gives_the_same_gradients():
    """The export's loop: outside training the LSTM layers have no tf.custom_gradient (its
    IdentityN op), and their autodiff gradients equal the hand-written ones of training."""
    encoder = keras_elmo.ResidualBiLSTM(units=6, projection_dim=4, num_layers=2, cell_clip=0.5,
                                        proj_clip=0.5)
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(2, 5, 4)) * 2.0, tf.float32)
    mask = tf.constant([[True] * 5, [True] * 3 + [False] * 2])
    encoder(x, mask=mask)
    probe = tf.constant(rng.normal(size=(2, 2, 5, 8)), tf.float32)
    counts, grads = [], []
    for training in (True, False):
        def run(x, training=training):
            return encoder(x, mask=mask, training=training)

        graph = tf.function(run).get_concrete_function(x).graph.as_graph_def()
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(run(x) * probe)
        grads.append(tape.gradient(loss, [x] + encoder.trainable_weights))
        nodes = list(graph.node) + [n for f in graph.library.function for n in f.node_def]
        counts.append(sum(n.op == "IdentityN" for n in nodes))
    assert counts[0] > 0 and counts[1] == 0, counts
    for custom, autodiff in zip(*grads):
        np.testing.assert_allclose(autodiff.numpy(), custom.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("entry", ["__call__(text)", "__call__(tokens)", "__call__(char_ids)"])
def test_call_equals_the_eager_keras_model(model, entry):
    outputs = {k: v.numpy() for k, v in _entry_points()[entry](model["loaded"]).items()}
    expected = eager_reference(model["options"], model["weights"], SENTENCES, mix=MIX)
    assert_outputs_close(outputs, expected, entry)


def test_trainable_variables_are_the_mix_and_variables_all_of_them(model):
    loaded = model["loaded"]
    assert [(v.name, v.shape.as_list()) for v in loaded.trainable_variables] == [
        ("scalar_mix/scalar_parameters:0", [3]), ("scalar_mix/gamma:0", [])]
    np.testing.assert_allclose(loaded.scalar_parameters.numpy(), MIX["scalar_parameters"])
    assert loaded.gamma.numpy() == pytest.approx(MIX["gamma"])
    bilm = [v for v in loaded.variables if v.name.startswith("bilm/")]
    assert len(loaded.variables) == NUM_BILM_VARIABLES + 2 == len(bilm) + 2
    assert not any(v.trainable for v in bilm)
    assert "bilm/contextual_encoder/forward_layer_0/recurrent_kernel:0" in {v.name for v in bilm}
    # "<name>:0" is TensorFlow's tensor name of every variable; the names given have no ":".
    assert all(v.name.count(":") == 1 and v.name.endswith(":0") for v in loaded.variables)
    ids = {id(v) for v in loaded.variables}
    for name, function in loaded.signatures.items():  # each reads the saved variables only
        assert {id(v) for v in function.variables} == ids, name


@pytest.mark.slow  # traces the module and differentiates both LSTM loops
def test_a_trainable_bilm_is_an_explicit_flag_and_its_gradient_is_the_layers(model):
    """With `trainable_bilm=True` the biLM is trainable too; the gradient of the traced plain
    autodiff step equals the eager Keras model's (hand-written LSTM gradient)."""
    bilm = keras_elmo.BiLM.from_weights(model["options"], model["weights"])
    module = ElmoModule(bilm, trainable_bilm=True)
    assert len(module.trainable_variables) == NUM_BILM_VARIABLES + 2
    assert all(v.trainable for v in module.variables)
    ids = tf.constant(keras_elmo.batch_to_ids(SENTENCES))
    probe = tf.constant(np.random.default_rng(1).normal(size=(3, 3, 4, 16)), tf.float32)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(bilm(ids)["layers"][:, :, :4] * probe)
    eager = dict(zip((v.path for v in bilm.trainable_variables),
                     tape.gradient(loss, bilm.trainable_variables)))
    with tf.GradientTape() as tape:
        out = module.char_ids(ids)
        layers = tf.stack([tf.concat([out["word_emb"]] * 2, -1), out["lstm_outputs1"],
                           out["lstm_outputs2"]], axis=1)
        loss = tf.reduce_sum(layers * probe)
    traced = tape.gradient(loss, module.trainable_variables[2:])
    assert len(traced) == len(eager)
    for variable, got in zip(module.trainable_variables[2:], traced):
        path = variable.name[len("bilm/"):-len(":0")]
        np.testing.assert_allclose(tf.convert_to_tensor(got).numpy(),  # IndexedSlices too
                                   tf.convert_to_tensor(eager[path]).numpy(), rtol=1e-4,
                                   atol=1e-5, err_msg=path)


def test_module_copies_the_weights_when_made_and_keeps_its_trainable_bilm(model, tmp_path):
    """Later changes to the Keras model do not reach a module already made (nor its export);
    `trainable_bilm` is the module's, checked when it is made."""
    bilm = keras_elmo.BiLM.from_weights(model["options"], model["weights"])
    with pytest.raises(ValueError, match="trainable_bilm must be True or False; received 'yes'"):
        ElmoModule(bilm, trainable_bilm="yes")
    module = ElmoModule(bilm)
    before = module.default(tf.constant(["a b"]))["elmo"].numpy()
    bilm.token_embedder.weights[0].assign(tf.zeros_like(bilm.token_embedder.weights[0]))
    np.testing.assert_array_equal(module.default(tf.constant(["a b"]))["elmo"].numpy(), before)
    with pytest.raises(ValueError, match="trainable_bilm=True differs from the ElmoModule's"):
        export_saved_model(module, tmp_path / "x", trainable_bilm=True)
    assert not os.path.exists(tmp_path / "x")


@pytest.mark.slow  # a second export
def test_export_with_trainable_bilm_lists_every_variable_as_trainable(model, tmp_path):
    path = export_model_dir(os.path.dirname(model["options"]), tmp_path / "elmo",
                            trainable_bilm=True)
    loaded = tf.saved_model.load(path)
    assert len(loaded.trainable_variables) == len(loaded.variables) == NUM_BILM_VARIABLES + 2
    kernel = [v for v in loaded.variables if v.name.endswith("recurrent_kernel:0")][0]
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(loaded.signatures["default"](text=tf.constant(["a b c"]))["elmo"])
    assert np.abs(tape.gradient(loss, kernel).numpy()).sum() > 0
    # Every biLM weight's gradient through the loaded signature (its nested biLM function)
    # equals the module's before saving, itself held to the eager Keras model's above.
    module = ElmoModule(keras_elmo.BiLM.from_weights(model["options"], model["weights"]),
                        trainable_bilm=True)
    ids = tf.constant(keras_elmo.batch_to_ids(SENTENCES))
    probe = tf.constant(np.random.default_rng(2).normal(size=(3, 3, 4, 16)), tf.float32)

    def bilm_gradients(char_ids_function, variables):
        with tf.GradientTape() as tape:
            out = char_ids_function(ids)
            layers = tf.stack([tf.concat([out["word_emb"]] * 2, -1), out["lstm_outputs1"],
                               out["lstm_outputs2"]], axis=1)
            loss = tf.reduce_sum(layers * probe)
        return {v.name: tf.convert_to_tensor(g).numpy()  # IndexedSlices too
                for v, g in zip(variables, tape.gradient(loss, variables))
                if v.name.startswith("bilm/")}

    got = bilm_gradients(lambda x: loaded.signatures["char_ids"](char_ids=x),
                         loaded.trainable_variables)
    want = bilm_gradients(module.char_ids, module.trainable_variables)
    assert sorted(got) == sorted(want) and len(got) == NUM_BILM_VARIABLES
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-4, atol=1e-5, err_msg=name)
    with open(os.path.join(path, "assets.extra", "keras_elmo_export.json")) as f:
        assert json.load(f)["trainable_bilm"] is True
