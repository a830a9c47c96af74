"""A frozen biLM stays frozen, and a fine-tuned one trainable, through every way Keras
rebuilds a model: a `.keras` file (here and in a new process after `import keras_elmo`
alone), `from_config`, `clone_model` and `load_weights`. Counted in trainable weights, and
shown by a `fit` of the rebuilt tagger that leaves a frozen biLM's weights unchanged.

The tagger is the README's (`ElmoLayer.from_weights`, strings in, a Dense head), on a tiny
published-layout model.
"""

import json
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_elmo

TOKENS = tf.constant([["人民", "日报", ""], ["新年", "讲话", "。"]])
TAGS = np.array([[0, 1, 0], [2, 1, 0]])
#: What a frozen biLM's tagger trains: the mix's `s` and `gamma`, the head's kernel and bias.
FROZEN_TRAINABLE = 4


def _tagger(model_dir, trainable_bilm):
    elmo = keras_elmo.ElmoLayer.from_weights(model_dir.options_file, model_dir.weight_file,
                                             trainable_bilm=trainable_bilm, name="elmo")
    tokens = keras.Input(shape=(None,), dtype="string")
    tags = keras.layers.Dense(3, name="tags")(elmo(tokens))
    return keras.Model(tokens, tags)


def _expected_trainable(tagger, trainable_bilm):
    bilm = tagger.get_layer("elmo").bilm
    # A fine-tuned biLM trains every weight but the stateful LSTM's state buffers (none in a
    # stateless biLM).
    return FROZEN_TRAINABLE + (len(bilm.weights) if trainable_bilm else 0)


def _rebuilt(tagger, how, tmp_path, model_dir, trainable_bilm):
    if how == "keras_file":
        tagger.save(tmp_path / "tagger.keras")
        return keras.models.load_model(tmp_path / "tagger.keras")
    if how == "from_config":
        return keras.Model.from_config(tagger.get_config())
    if how == "clone_model":
        return keras.models.clone_model(tagger)
    assert how == "load_weights"
    tagger.save_weights(tmp_path / "tagger.weights.h5")
    other = _tagger(model_dir, trainable_bilm)
    other.load_weights(tmp_path / "tagger.weights.h5")
    return other


@pytest.mark.parametrize("trainable_bilm", [False, True], ids=["frozen", "fine_tuned"])
@pytest.mark.parametrize("how", ["keras_file", "from_config", "clone_model", "load_weights"])
def test_the_rebuilt_tagger_trains_what_the_original_trains(tiny_model_dir, tmp_path, how,
                                                            trainable_bilm):
    tagger = _tagger(tiny_model_dir, trainable_bilm)
    expected = _expected_trainable(tagger, trainable_bilm)
    assert len(tagger.trainable_weights) == expected
    rebuilt = _rebuilt(tagger, how, tmp_path, tiny_model_dir, trainable_bilm)
    elmo = rebuilt.get_layer("elmo")
    assert elmo.trainable_bilm is trainable_bilm
    assert len(rebuilt.trainable_weights) == expected
    assert all(v.trainable is trainable_bilm for v in elmo.bilm.weights)

    bilm_before = [w.copy() for w in elmo.bilm.get_weights()]
    mix_before = elmo.scalar_mixes[0].get_weights()[0].copy()
    # The head gives logits: as probabilities a negative one is clipped and passes no
    # gradient, so whether anything moved would depend on the head's random start.
    rebuilt.compile(keras.optimizers.SGD(0.5),
                    keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    rebuilt.fit(TOKENS, TAGS, epochs=2, verbose=0)
    changed = [not np.array_equal(before, after)
               for before, after in zip(bilm_before, elmo.bilm.get_weights())]
    assert any(changed) is trainable_bilm  # the char CNN and the LSTMs move only if tuned
    assert not np.array_equal(mix_before, elmo.scalar_mixes[0].get_weights()[0])


def test_a_biLM_built_from_a_frozen_config_is_frozen_in_every_sublayer():
    bilm = keras_elmo.BiLM(keras_elmo.BiLMOptions.tiny())
    bilm.trainable = False
    rebuilt = keras_elmo.BiLM.from_config(bilm.get_config())
    assert not rebuilt.trainable and rebuilt.trainable_weights == []
    assert all(not layer.trainable for layer in rebuilt.layers)
    assert all(not v.trainable for v in rebuilt.weights)
    # Given to an ElmoLayer as it is, the biLM adds nothing to train.
    elmo = keras_elmo.ElmoLayer(rebuilt)
    elmo.build()
    assert len(elmo.trainable_weights) == 2


_LOAD_IN_A_NEW_PROCESS = """
{imports}
import json
import tensorflow as tf
tagger = keras.models.load_model({path!r})
print("trainable", len(tagger.trainable_weights))
print("out", json.dumps(tagger(tf.constant([["人民", "日报"]])).numpy().tolist()))
"""


@pytest.mark.slow
@pytest.mark.parametrize("imports", ["import keras, keras_elmo",
                                     "import keras_elmo\nkeras_elmo.batch_to_ids([['a']])\n"
                                     "import keras",
                                     "import keras_elmo.models, keras"])
def test_import_keras_elmo_alone_lets_keras_load_the_tagger(tiny_model_dir, tmp_path,
                                                            imports):
    """The README's tagger reloads in a new process after `import keras, keras_elmo` (no
    `import keras_elmo.models`), or after any use of keras_elmo, and keeps its frozen
    biLM."""
    tagger = _tagger(tiny_model_dir, trainable_bilm=False)
    path = str(tmp_path / "tagger.keras")
    tagger.save(path)
    expected = tagger(tf.constant([["人民", "日报"]])).numpy()
    script = _LOAD_IN_A_NEW_PROCESS.format(imports=imports, path=path)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert int(lines["trainable"]) == FROZEN_TRAINABLE
    np.testing.assert_allclose(np.array(json.loads(lines["out"])), expected, atol=1e-6)


def test_import_keras_elmo_loads_no_tensorflow():
    """Without Keras loaded, the registration waits: the command line's checks still run
    before TensorFlow starts."""
    script = ("import sys, keras_elmo\n"
              "print(sorted(m for m in ('keras', 'tensorflow') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
