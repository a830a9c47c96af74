"""The shipped TF1 Hub module fixtures (tests/fixtures/tfhub) are what their README claims.

Each module is run by TensorFlow's own loader (`tf.saved_model.load`, which loads a TF1
SavedModel's signatures) and compared with `numpy_reference`, computed from the model the
module was built from (`input_model/`), with the mix applied by the publisher's rule:
- google_elmo: elmo = scaling * sum_j softmax(weights)_j h_j, zero at padding; default = the
  mean of elmo over real tokens;
- deeppavlov_elmo: elmo = gamma * sum_j softmax(W + 1/3)_j h_j, not masked at padding;
  default = the mean over real tokens of the mix without gamma.
The modules' LSTMs carry state across calls: the first call after loading starts from the
zero state kept in the checkpoint, so it equals a stateless model; a second call on the same
input does not.
"""

import glob
import json
import os

import h5py
import numpy as np
import pytest

import numpy_reference as ref

tf = pytest.importorskip("tensorflow")

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "tfhub")
INPUT_MODEL = os.path.join(FIXTURES, "input_model")
MODULES = ("google_elmo", "deeppavlov_elmo")
SENTENCES = [["The", "cat", "sat"],
             ["naïve", "日本", "x" * 60, "", "ok"]]  # UTF-8, a token past 48 bytes, an empty one
SEQUENCE_LEN = [len(s) for s in SENTENCES]
TOKENS = [s + [""] * (max(SEQUENCE_LEN) - len(s)) for s in SENTENCES]
DEFAULT_SENTENCES = [["The", "cat", "sat"], ["naïve", "日本", "x" * 60, "ok"]]  # split on " "
ATOL = 1e-5


def load_input_model():
    with open(os.path.join(INPUT_MODEL, "options.json")) as f:
        options = json.load(f)
    with h5py.File(os.path.join(INPUT_MODEL, "weights.hdf5"), "r") as f:
        arrays = {}
        f.visititems(lambda name, item: arrays.__setitem__(name, item[...])
                     if isinstance(item, h5py.Dataset) else None)
    with open(os.path.join(INPUT_MODEL, "mix.json")) as f:
        mix = json.load(f)
    return options, arrays, mix


OPTIONS, ARRAYS, MIX = load_input_model()
PROJECTION_DIM = OPTIONS["lstm"]["projection_dim"]


def expected_outputs(name, sentences):
    """The numpy outputs of module `name` for `sentences`, stateless (first call)."""
    layers, mask = ref.bilm(ARRAYS, OPTIONS, sentences)  # (b, 3, T, 2P), (b, T)
    m = mask[..., None].astype(np.float64)
    count = np.maximum(m.sum(axis=1), 1.0)  # (b, 1)
    if name == "google_elmo":
        mix = MIX[name]
        elmo = ref.scalar_mix(layers, mask, mix["aggregation/weights"],
                              mix["aggregation/scaling"]) * m
        default = elmo.sum(axis=1) / count
    else:
        mix = MIX[name]
        w = np.asarray(mix["aggregation/elmo_output_ELMo_W"]) + 1.0 / layers.shape[1]
        gamma = mix["aggregation/elmo_output_ELMo_gamma"][0]
        unscaled = ref.scalar_mix(layers, mask, w, 1.0)
        elmo = gamma * unscaled
        default = (unscaled * m).sum(axis=1) / count
    return {"word_emb": layers[:, 0, :, :PROJECTION_DIM], "lstm_outputs1": layers[:, 1],
            "lstm_outputs2": layers[:, 2], "elmo": elmo, "default": default}, mask


@pytest.fixture(scope="module")
def runs():
    """name -> dict of the loaded module and its outputs: first and second `tokens` calls,
    first `default` call (each signature has its own state buffers)."""
    out = {}
    for name in MODULES:
        module = tf.saved_model.load(os.path.join(FIXTURES, name))
        tokens = module.signatures["tokens"]
        feed = {"tokens": tf.constant(TOKENS), "sequence_len": tf.constant(SEQUENCE_LEN)}
        first = {k: v.numpy() for k, v in tokens(**feed).items()}
        second = {k: v.numpy() for k, v in tokens(**feed).items()}
        input_name = "default" if name == "google_elmo" else "strings"
        strings = tf.constant([" ".join(s) for s in DEFAULT_SENTENCES])
        default = {k: v.numpy() for k, v in
                   module.signatures["default"](**{input_name: strings}).items()}
        out[name] = {"module": module, "first": first, "second": second, "default": default}
    return out


# --- files and checkpoint ---------------------------------------------------------------------
@pytest.mark.parametrize("name", MODULES)
def test_module_files(name):
    directory = os.path.join(FIXTURES, name)
    for path in ("tfhub_module.pb", "saved_model.pb", "variables/variables.index"):
        assert os.path.isfile(os.path.join(directory, path)), path
    data = sorted(os.path.basename(p) for p in glob.glob(os.path.join(directory, "variables",
                                                                      "variables.data-*")))
    # bilm-tf pins char_embed to /cpu:0; TF Hub's sharded Saver writes one file per device
    assert data == ["variables.data-00000-of-00002", "variables.data-00001-of-00002"]


def expected_variables(name):
    cnn, lstm = OPTIONS["char_cnn"], OPTIONS["lstm"]
    n_filters = sum(n for _, n in cnn["filters"])
    proj, dim = lstm["projection_dim"], lstm["dim"]
    shapes = {"bilm/char_embed": [cnn["n_characters"], cnn["embedding"]["dim"]],
              "bilm/CNN_proj/W_proj": [n_filters, proj], "bilm/CNN_proj/b_proj": [proj]}
    for i, (width, num) in enumerate(cnn["filters"]):
        shapes[f"bilm/CNN/W_cnn_{i}"] = [1, width, cnn["embedding"]["dim"], num]
        shapes[f"bilm/CNN/b_cnn_{i}"] = [num]
    for k in range(cnn["n_highway"]):
        for w in ("carry", "transform"):
            shapes[f"bilm/CNN_high_{k}/W_{w}"] = [n_filters, n_filters]
            shapes[f"bilm/CNN_high_{k}/b_{w}"] = [n_filters]
    for d in range(2):
        for layer in range(lstm["n_layers"]):
            cell = f"bilm/RNN_{d}/RNN/MultiRNNCell/Cell{layer}/rnn/lstm_cell/"
            shapes[cell + "kernel"] = [2 * proj, 4 * dim]
            shapes[cell + "bias"] = [4 * dim]
            shapes[cell + "projection/kernel"] = [dim, proj]
    # state buffers (c, h) per direction and layer, max_batch_size rows; one set per signature
    for scope in ("bilm", "bilm_1"):
        for k in range(4 * lstm["n_layers"]):
            shapes[f"{scope}/Variable" + (f"_{k}" if k else "")] = [8, dim if k % 2 == 0 else proj]
    if name == "google_elmo":
        shapes.update({"aggregation/weights": [3], "aggregation/scaling": []})
    else:
        shapes.update({"aggregation/elmo_output_ELMo_W": [3],
                       "aggregation/elmo_output_ELMo_gamma": [1]})
    return shapes


@pytest.mark.parametrize("name", MODULES)
def test_checkpoint_variables(name):
    reader = tf.train.load_checkpoint(os.path.join(FIXTURES, name, "variables", "variables"))
    assert reader.get_variable_to_shape_map() == expected_variables(name)
    for variable, value in MIX[name].items():
        np.testing.assert_allclose(reader.get_tensor(variable), value, rtol=1e-7)
    table = reader.get_tensor("bilm/char_embed")
    assert not table[0].any()  # the padding row bilm-tf adds
    np.testing.assert_array_equal(table[1:], ARRAYS["char_embed"])
    np.testing.assert_array_equal(
        reader.get_tensor("bilm/RNN_1/RNN/MultiRNNCell/Cell1/rnn/lstm_cell/kernel"),
        ARRAYS["RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_0"])
    assert not reader.get_tensor("bilm/Variable_3").any()  # exported before any call


# --- signatures -------------------------------------------------------------------------------
@pytest.mark.parametrize("name", MODULES)
def test_signatures(name, runs):
    signatures = runs[name]["module"].signatures
    assert sorted(signatures) == ["default", "tokens"]
    d, p = 2 * PROJECTION_DIM, PROJECTION_DIM
    outputs = {"word_emb": ([None, None, p], tf.float32),
               "lstm_outputs1": ([None, None, d], tf.float32),
               "lstm_outputs2": ([None, None, d], tf.float32),
               "elmo": ([None, None, d], tf.float32), "default": ([None, d], tf.float32)}
    if name == "deeppavlov_elmo":
        outputs["version"] = ([], tf.string)
    for signature in signatures.values():
        got = {k: (v.shape.as_list(), v.dtype) for k, v in signature.structured_outputs.items()}
        assert got == outputs
    tokens_inputs = signatures["tokens"].structured_input_signature[1]
    assert {k: (v.shape.as_list(), v.dtype) for k, v in tokens_inputs.items()} == {
        "tokens": ([None, None], tf.string), "sequence_len": ([None], tf.int32)}
    default_inputs = signatures["default"].structured_input_signature[1]
    if name == "google_elmo":  # one unnamed input: TF Hub names it "default"
        assert {k: (v.shape.as_list(), v.dtype) for k, v in default_inputs.items()} == {
            "default": ([None], tf.string)}
    else:  # DeepPavlov's placeholder has no static shape
        assert list(default_inputs) == ["strings"]
        assert default_inputs["strings"].shape.rank is None
        assert runs[name]["first"]["version"] == b"from_dp_1"


# --- outputs against numpy --------------------------------------------------------------------
@pytest.mark.parametrize("name", MODULES)
def test_tokens_outputs_match_numpy(name, runs):
    expected, mask = expected_outputs(name, SENTENCES)
    got = runs[name]["first"]
    for key in ("word_emb", "lstm_outputs1", "lstm_outputs2", "elmo"):
        assert got[key].shape == expected[key].shape, key
        np.testing.assert_allclose(got[key][mask], expected[key][mask], atol=ATOL, err_msg=key)
    np.testing.assert_allclose(got["default"], expected["default"], atol=ATOL)


@pytest.mark.parametrize("name", MODULES)
def test_default_signature_splits_on_spaces(name, runs):
    expected, mask = expected_outputs(name, DEFAULT_SENTENCES)
    got = runs[name]["default"]
    for key in ("word_emb", "lstm_outputs1", "lstm_outputs2", "elmo"):
        np.testing.assert_allclose(got[key][mask], expected[key][mask], atol=ATOL, err_msg=key)
    np.testing.assert_allclose(got["default"], expected["default"], atol=ATOL)


@pytest.mark.parametrize("name", MODULES)
def test_padding(name, runs):
    """word_emb at padding is the char CNN of an all-zero id row (bilm-tf does not mask it);
    the LSTM outputs are zero there; elmo is masked by Google, not by DeepPavlov."""
    got = runs[name]["first"]
    pad = ~ref.bilm(ARRAYS, OPTIONS, SENTENCES)[1]
    max_chars = OPTIONS["char_cnn"]["max_characters_per_token"]
    zero_row = ref.char_cnn(ARRAYS, OPTIONS, np.zeros(max_chars, int))  # (P,)
    np.testing.assert_allclose(got["word_emb"][pad],
                               np.broadcast_to(zero_row, (pad.sum(), PROJECTION_DIM)), atol=ATOL)
    assert not got["lstm_outputs1"][pad].any() and not got["lstm_outputs2"][pad].any()
    if name == "google_elmo":
        assert not got["elmo"][pad].any()
    else:
        mix = MIX[name]
        w = np.exp(mix["aggregation/elmo_output_ELMo_W"])
        layer0 = np.concatenate([zero_row, zero_row]) * (w[0] / w.sum())
        gamma = mix["aggregation/elmo_output_ELMo_gamma"][0]
        np.testing.assert_allclose(
            got["elmo"][pad], np.broadcast_to(gamma * layer0, (pad.sum(), 2 * PROJECTION_DIM)),
            atol=ATOL)


@pytest.mark.parametrize("name", MODULES)
def test_state_carries_across_calls(name, runs):
    """The first call after loading equals a stateless model (checked above); the second call
    on the same input starts from the first call's final states and differs."""
    first, second = runs[name]["first"], runs[name]["second"]
    mask = ref.bilm(ARRAYS, OPTIONS, SENTENCES)[1]
    np.testing.assert_array_equal(second["word_emb"], first["word_emb"])  # no state in the CNN
    for key in ("lstm_outputs1", "lstm_outputs2", "elmo"):
        assert np.abs(second[key][mask] - first[key][mask]).max() > 1e-3, key
