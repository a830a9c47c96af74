"""Trainer: the loss falls on a repetitive corpus; checkpoints hold the data position."""

import io
import os

import h5py
import numpy as np
import pytest
import tensorflow as tf

from keras_elmo.models.bilm import BiLM
from keras_elmo.text.characters import batch_to_ids
from keras_elmo.training.model_dir import ModelDir
from keras_elmo.training.trainer import Trainer


@pytest.fixture
def corpus(tiny_corpus):
    return tiny_corpus


@pytest.mark.slow
def test_loss_decreases_and_model_dir_is_complete(corpus):
    config, vocab, model_dir, files = corpus
    trainer = Trainer(config, vocab, model_dir, log_every=5, stream=io.StringIO())
    result = trainer.fit(files, max_steps=40)
    assert result["step"] == 40 and result["stopped"] == "max_steps"
    losses = [report["loss"] for report in result["history"]]  # every 5 steps
    assert len(losses) == 8
    # Adagrad 0.2 from a near-uniform start: slow but clear (dropout makes it noisy).
    assert np.mean(losses[-3:]) < np.mean(losses[:3]) - 0.08, losses
    assert losses[-1] < losses[0] - 0.1, losses
    # Checkpoints every 10 steps, the data position included.
    assert model_dir.latest_checkpoint().endswith("ckpt-40")
    names = dict(tf.train.list_variables(model_dir.latest_checkpoint()))
    assert any(name.startswith("batches_in_epoch") for name in names)
    assert any("accumulator" in name for name in names)  # Adagrad state
    # weights.hdf5 + options.json load as a BiLM with the trained weights.
    bilm = BiLM.from_weights(model_dir.options_path, model_dir.weights_path)
    ids = batch_to_ids([["the", "cat", "sat"]])
    expected = trainer.model.backbone(ids)["layers"].numpy()  # the trained object itself
    np.testing.assert_allclose(bilm(ids)["layers"].numpy(), expected, atol=1e-6)
    with h5py.File(model_dir.weights_path, "r") as f:
        assert "char_embed" in f
    assert [f for f in os.listdir(model_dir.logs_dir) if "tfevents" in f]


@pytest.mark.slow
def test_restore_continues_the_step_epoch_and_data_position(corpus):
    config, vocab, model_dir, files = corpus
    first = Trainer(config, vocab, model_dir, log_every=100, stream=io.StringIO())
    first.fit(files, max_steps=13)
    second = Trainer(config, vocab, model_dir, log_every=100, stream=io.StringIO())
    assert second.restore_latest().endswith("ckpt-13")
    assert int(second.step.numpy()) == 13
    position = (int(second.epoch.numpy()), int(second.batches_in_epoch.numpy()))
    assert position == (int(first.epoch.numpy()), int(first.batches_in_epoch.numpy()))
    for a, b in zip(first.model.get_weights(), second.model.get_weights()):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(first.optimizer.variables, second.optimizer.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    result = second.fit(files, max_steps=16)
    assert result["step"] == 16 and result["resumed_from"].endswith("ckpt-13")


def test_relative_model_dir_finds_its_checkpoint(corpus, tmp_path, monkeypatch):
    """Regression: a relative MODEL_DIR joined the checkpoint path twice (resume and
    `keras-elmo perplexity` then called a good directory damaged)."""
    config, vocab, _, files = corpus
    monkeypatch.chdir(tmp_path)
    model_dir = ModelDir("relative_model")
    model_dir.prepare(config, str(tmp_path / "vocab.txt"))
    Trainer(config, vocab, model_dir, log_every=100, stream=io.StringIO()).fit(files, max_steps=2)
    latest = model_dir.latest_checkpoint()
    assert latest == os.path.join("relative_model", "checkpoints", "ckpt-2")
    resumed = Trainer(config, vocab, model_dir, log_every=100, stream=io.StringIO())
    assert resumed.restore_latest() == latest and int(resumed.step.numpy()) == 2
