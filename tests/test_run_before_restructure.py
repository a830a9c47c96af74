"""What was saved before the backbone/head restructure loads after it with equal outputs:
a training run's weights.hdf5 and checkpoint, `.keras` files of a `BiLM` and of a tagger
holding an `ElmoLayer`, and a resumed training run (tests/fixtures/run_before_restructure)."""

import json
import os
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_elmo
from keras_elmo.cli.main import main
from keras_elmo.training.model_dir import ModelDir

FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures",
                       "run_before_restructure")
REFERENCE = np.load(os.path.join(FIXTURE, "reference_outputs.npz"))
SENTENCES = json.load(open(os.path.join(FIXTURE, "reference_inputs.json"),
                           encoding="utf-8"))["sentences"]
RUN = os.path.join(FIXTURE, "run")


def test_the_weight_file_gives_the_same_biLM_outputs():
    bilm = keras_elmo.BiLM.from_weights(os.path.join(RUN, "options.json"),
                                        os.path.join(RUN, "weights.hdf5"))
    ids = keras_elmo.batch_to_ids(SENTENCES)
    np.testing.assert_array_equal(ids, REFERENCE["char_ids"])
    np.testing.assert_allclose(bilm(ids)["layers"].numpy(), REFERENCE["bilm_layers"],
                               atol=1e-6)


def test_the_keras_files_load_with_the_same_outputs():
    bilm = keras.models.load_model(os.path.join(FIXTURE, "bilm.keras"))
    assert isinstance(bilm, keras_elmo.BiLM)
    np.testing.assert_allclose(bilm(REFERENCE["char_ids"])["layers"].numpy(),
                               REFERENCE["bilm_layers"], atol=1e-6)
    tagger = keras.models.load_model(os.path.join(FIXTURE, "tagger.keras"))
    elmo = tagger.get_layer("elmo")
    assert isinstance(elmo, keras_elmo.ElmoLayer) and isinstance(elmo.bilm, keras_elmo.BiLM)
    np.testing.assert_allclose(elmo.scalar_mixes[0].scalar_parameters.numpy(), [0.3, -0.2, 0.5])
    width = REFERENCE["tagger"].shape[1]
    tokens = tf.constant([s + [""] * (width - len(s)) for s in SENTENCES])
    np.testing.assert_allclose(tagger(tokens).numpy(), REFERENCE["tagger"], atol=1e-6)


def test_the_checkpoint_restores_the_language_model():
    config, vocab, model = ModelDir(RUN).load_model()
    width = max(len(s) for s in SENTENCES) + 2
    framed = [["<S>"] + s + ["</S>"] for s in SENTENCES]
    token_ids = tf.constant([[vocab.token_to_id(t) for t in s] + [0] * (width - len(s))
                             for s in framed])
    sums = model.nll_sums(keras_elmo.batch_to_ids(framed), token_ids)
    assert float(sums["count"]) == float(REFERENCE["nll_count"])
    for key in ("forward", "backward"):
        np.testing.assert_allclose(float(sums[key]), float(REFERENCE[f"nll_{key}"]), rtol=1e-6)
    # the head's backbone is the run's biLM: the same outputs as its weight file
    words = keras_elmo.batch_to_ids(SENTENCES)
    np.testing.assert_allclose(model.backbone(words)["layers"].numpy(),
                               REFERENCE["bilm_layers"], atol=1e-6)


@pytest.mark.slow
def test_an_old_run_resumes_from_its_checkpoint(tmp_path, capsys):
    run = str(tmp_path / "run")
    shutil.copytree(RUN, run)
    shutil.copy(os.path.join(FIXTURE, "train.txt"), tmp_path / "train.txt")
    options = json.load(open(os.path.join(run, "options.json")))
    options["train_prefix"] = str(tmp_path / "train.txt")  # where the corpus is now
    with open(os.path.join(run, "options.json"), "w") as f:
        json.dump(options, f)
    assert main(["train", run, "--epochs", "2", "--max-steps", "8"]) == 0
    out = capsys.readouterr().out
    assert "resumed from ckpt-5" in out and "at step 8" in out, out
    assert ModelDir(run).latest_checkpoint().endswith("ckpt-8")
