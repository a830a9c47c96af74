"""A TF1 Hub module (Google's and DeepPavlov's conventions, built by tensorflow_hub 0.13 and
bilm-tf's graph code: tests/tfhub_module_builder.py) run by TensorFlow's own loader, against
keras-elmo reading the same directory without running its graph: ElmoLayer.from_preset, our
SavedModel export of the module, and the export read by tf.saved_model.load again.

The module's LSTMs carry their state across calls (bilm-tf's state variables), so every
comparison is of the module's FIRST call after loading, where that state is zero."""

import os

import numpy as np
import pytest
import tensorflow as tf

import keras_elmo

HERE = os.path.dirname(os.path.abspath(__file__))
MODULES = {name: os.path.join(HERE, "fixtures", "tfhub", f"{name}_elmo")
           for name in ("google", "deeppavlov")}
#: Chinese tokens, a 60-byte token (cut at 48 bytes as bilm-tf cuts it), punctuation, and
#: three lengths (padding in two rows).
SENTENCES = [["The", "cat", "sat", "on", "the", "mat", "."],
             ["北京", "欢迎", "你", "x" * 60],
             ["a"]]
TOLERANCE = 1e-5


def _batch(sentences):
    width = max(map(len, sentences))
    tokens = tf.constant([s + [""] * (width - len(s)) for s in sentences])
    lengths = np.array([len(s) for s in sentences])
    return tokens, lengths, np.arange(width)[None, :] < lengths[:, None]


def _module_outputs(path, tokens, lengths):
    """The `tokens` signature's outputs at the module's first call after loading."""
    module = tf.saved_model.load(path)  # TensorFlow's loader of TF1 SavedModels
    outputs = module.signatures["tokens"](tokens=tokens,
                                          sequence_len=tf.constant(lengths, tf.int32))
    return {key: value.numpy() for key, value in outputs.items()}


def _ours(layer, tokens):
    out = layer(tokens)
    layers, elmo = out["layers"].numpy(), out["elmo"].numpy()
    projection = layers.shape[-1] // 2
    ours = {"word_emb": layers[:, 0, :, :projection], "elmo": elmo}
    for j in range(1, layers.shape[1]):
        ours[f"lstm_outputs{j}"] = layers[:, j]
    return ours


@pytest.fixture(scope="module")
def batch():
    return _batch(SENTENCES)


@pytest.mark.parametrize("publisher", sorted(MODULES))
def test_elmo_layer_from_the_module_returns_what_the_module_returns(publisher, batch):
    tokens, lengths, real = batch
    theirs = _module_outputs(MODULES[publisher], tokens, lengths)
    layer = keras_elmo.ElmoLayer.from_preset(MODULES[publisher], return_layers=True)
    ours = _ours(layer, tokens)
    for key in ("word_emb", "lstm_outputs1", "lstm_outputs2", "elmo"):
        assert theirs[key].shape == ours[key].shape, key
        difference = np.abs(theirs[key][real] - ours[key][real]).max()
        print(f"parity {publisher} ElmoLayer {key}: {difference:.2e}")  # pytest -s shows it
        assert difference < TOLERANCE, (publisher, key, difference)
        # Ours is zero past each sentence's end; the modules' LSTM outputs are too.
        assert not ours[key][~real].any(), key
    assert not theirs["lstm_outputs1"][~real].any() and not theirs["lstm_outputs2"][~real].any()
    # What differs per publisher at padding: bilm-tf's token layer is not masked (both), and
    # only Google's module masks `elmo`.
    assert np.abs(theirs["word_emb"][~real]).max() > 0.01
    assert (np.abs(theirs["elmo"][~real]).max() > 0.01) == (publisher == "deeppavlov")
    # `default`: the mean over the real tokens of `elmo` (Google) or of the mix without
    # gamma (DeepPavlov), from our layers and the module's own trained mix.
    mix = layer.scalar_mixes[0]
    weights = tf.nn.softmax(mix.scalar_parameters).numpy()
    pooled = ours["elmo"] if publisher == "google" else np.einsum(
        "l,bltd->btd", weights, layer(tokens)["layers"].numpy())
    default = (pooled * real[..., None]).sum(1) / lengths[:, None]
    print(f"parity {publisher} ElmoLayer default: {np.abs(theirs['default'] - default).max():.2e}")
    assert np.abs(theirs["default"] - default).max() < TOLERANCE
    # The module's trained mix, not the even one.
    assert float(mix.gamma.numpy()) != 1.0 and np.ptp(mix.scalar_parameters.numpy()) > 0.1


@pytest.mark.parametrize("publisher", sorted(MODULES))
def test_our_export_of_the_module_keeps_its_signatures_and_outputs(publisher, batch,
                                                                    tmp_path):
    from keras_elmo.export import export_model_dir

    tokens, lengths, real = batch
    theirs = _module_outputs(MODULES[publisher], tokens, lengths)
    path = export_model_dir(MODULES[publisher], tmp_path / "export")
    exported = tf.saved_model.load(path)
    ours = {key: value.numpy() for key, value in exported.signatures["tokens"](
        tokens=tokens, sequence_len=tf.constant(lengths, tf.int32)).items()}
    for key in ("word_emb", "lstm_outputs1", "lstm_outputs2", "elmo", "default"):
        difference = np.abs(theirs[key][real] - ours[key][real]).max() if key != "default" \
            else np.abs(theirs[key] - ours[key]).max()
        print(f"parity {publisher} export tokens {key}: {difference:.2e}")
        assert difference < TOLERANCE, key
    # The `default` signature keeps the module's input name, so a caller's keyword works.
    text = tf.constant([" ".join(s) for s in SENTENCES])
    name = {"google": "default", "deeppavlov": "strings"}[publisher]
    by_text = exported.signatures["default"](**{name: text})
    module_text = tf.saved_model.load(MODULES[publisher]).signatures["default"](**{name: text})
    for key in ("word_emb", "lstm_outputs1", "lstm_outputs2", "elmo", "default"):
        ours_key, theirs_key = by_text[key].numpy(), module_text[key].numpy()
        difference = np.abs(ours_key[real] - theirs_key[real]).max() if key != "default" \
            else np.abs(ours_key - theirs_key).max()
        print(f"parity {publisher} export default-signature {key}: {difference:.2e}")
        assert difference < TOLERANCE, key
    # Stateless: a second call returns the first call's numbers (the module's would not).
    again = exported.signatures["tokens"](tokens=tokens,
                                          sequence_len=tf.constant(lengths, tf.int32))
    np.testing.assert_array_equal(again["elmo"].numpy(), ours["elmo"])


def test_the_module_carries_state_and_stateful_true_carries_it_alike(batch):
    """The module's second call starts from the state its first call left; a stateful
    ElmoLayer does the same (rows below the batch size, docs/model.md section 3)."""
    tokens, lengths, real = batch
    module = tf.saved_model.load(MODULES["google"])
    call = module.signatures["tokens"]
    first = call(tokens=tokens, sequence_len=tf.constant(lengths, tf.int32))["elmo"].numpy()
    second = call(tokens=tokens, sequence_len=tf.constant(lengths, tf.int32))["elmo"].numpy()
    assert np.abs(first[real] - second[real]).max() > 1e-3
    layer = keras_elmo.ElmoLayer.from_preset(MODULES["google"], stateful=True)
    ours_first, ours_second = layer(tokens).numpy(), layer(tokens).numpy()
    assert np.abs(first[real] - ours_first[real]).max() < TOLERANCE
    # Carried state compounds the float32 rounding of both first calls (values up to 3.75).
    assert np.abs(second[real] - ours_second[real]).max() < 1e-4


def test_from_preset_can_start_from_the_even_mix_instead():
    layer = keras_elmo.ElmoLayer.from_preset(MODULES["google"], use_model_mix=False)
    mix = layer.scalar_mixes[0]
    assert float(mix.gamma.numpy()) == 1.0 and not mix.scalar_parameters.numpy().any()
