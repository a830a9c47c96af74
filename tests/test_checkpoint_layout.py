"""A checkpoint written before the LSTM cells stored their kernels `(out, in)` holds them,
and their optimizer slots, `(in, out)`: it restores, resumes, loads for evaluation and warm
starts with the same numbers as a checkpoint of today's layout."""

import io
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf

from keras_elmo.text.characters import batch_to_ids
from keras_elmo.training.model_dir import ModelDir
from keras_elmo.training.trainer import Trainer
from keras_elmo.training.warm_start import warm_start

_VALUE = "/.ATTRIBUTES/VARIABLE_VALUE"
# Written out here, independently of the code under test: the cells' kernels in the model
# group, and the Keras optimizer slots named after their paths.
_MODEL_KERNEL = re.compile(r"^model/\d{4}_(input|recurrent|projection)_kernel$")
_SLOT_KERNEL = re.compile(
    r"^optimizer/\d{4}_contextual_encoder_(forward|backward)_layer_\d+_"
    r"(input|recurrent|projection)_kernel_")


def _rewrite_in_older_layout(path):
    """Writes `path`'s values again under the same names, with the LSTM kernels and their
    slots transposed to `(in, out)`; returns how many were transposed."""
    reader = tf.train.load_checkpoint(path)
    groups, counters, flipped = {"model": {}, "optimizer": {}}, {}, 0
    for name in reader.get_variable_to_shape_map():
        if not name.endswith(_VALUE):
            continue
        key = name[:-len(_VALUE)]
        value = reader.get_tensor(name)
        if _MODEL_KERNEL.match(key) or _SLOT_KERNEL.match(key):
            value, flipped = value.T, flipped + 1
        if "/" in key:
            group, short = key.split("/", 1)
            groups[group][short] = tf.Variable(value)
        elif key != "save_counter":
            counters[key] = tf.Variable(value)
    tf.train.Checkpoint(**groups, **counters).write(path)
    return flipped


@pytest.fixture(scope="module")
def older_run_once(tiny_corpus_factory, tmp_path_factory):
    """A tiny Adam run of 3 steps whose checkpoint is rewritten in the older layout, made
    once for the module; returns `(config, vocab, model_dir, files, trainer)` with the
    trainer that wrote it."""
    config, vocab, model_dir, files = tiny_corpus_factory(tmp_path_factory.mktemp("older"))
    config = config.replace(optimizer="adam", learning_rate=0.01)
    model_dir.prepare(config, model_dir.vocab_path)
    trainer = Trainer(config, vocab, model_dir, log_every=100, stream=io.StringIO())
    trainer.fit(files, max_steps=3)
    path = model_dir.latest_checkpoint()
    # 2 layers x 2 directions x 3 kernels, each with Adam's two moments
    assert _rewrite_in_older_layout(path) == 12 * 3
    shapes = dict(tf.train.list_variables(path))
    assert shapes["model/0015_recurrent_kernel" + _VALUE] == [8, 48]  # (P, 4U): (in, out)
    return config, vocab, model_dir, files, trainer


@pytest.fixture
def older_run(older_run_once, tmp_path):
    """`older_run_once` with a copy of its model directory of the test's own (a test may
    train on in it): `(config, vocab, model_dir, files, trainer)`."""
    config, vocab, model_dir, files, trainer = older_run_once
    copy = str(tmp_path / "model")
    shutil.copytree(model_dir.path, copy)
    return config, vocab, ModelDir(copy), files, trainer


def test_an_older_checkpoint_restores_every_value_and_resumes(older_run):
    config, vocab, model_dir, files, written = older_run
    resumed = Trainer(config, vocab, model_dir, log_every=100, stream=io.StringIO())
    assert resumed.restore_latest().endswith("ckpt-3")
    assert int(resumed.step.numpy()) == 3
    assert int(resumed.epoch.numpy()) == int(written.epoch.numpy())
    for a, b in zip(written.model.weights, resumed.model.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)
    for a, b in zip(written.optimizer.variables, resumed.optimizer.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)
    result = resumed.fit(files, max_steps=5)
    assert result["step"] == 5 and result["resumed_from"].endswith("ckpt-3")
    shapes = dict(tf.train.list_variables(model_dir.latest_checkpoint()))
    assert shapes["model/0015_recurrent_kernel" + _VALUE] == [48, 8]  # saved (out, in) now


def test_an_older_checkpoint_loads_for_evaluation_and_warm_starts(older_run, tmp_path):
    config, vocab, model_dir, _, written = older_run
    ids = batch_to_ids([["the", "cat", "sat"], ["a", "dog"]])
    expected = written.model.backbone(ids)["layers"].numpy()
    _, _, model = ModelDir(model_dir.path).load_model()
    np.testing.assert_array_equal(model.backbone(ids)["layers"].numpy(), expected)
    fresh = Trainer(config.replace(init_from=model_dir.path), vocab,
                    ModelDir(str(tmp_path / "warm")), stream=io.StringIO())
    report = warm_start(fresh.model, model_dir.path, vocab)
    assert report["softmax_rows_copied"] == len(vocab)
    np.testing.assert_array_equal(fresh.model.backbone(ids)["layers"].numpy(), expected)
