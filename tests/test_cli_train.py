"""`keras-elmo train`: bad input is one clear line; kill -9 + restart resumes cleanly.

The killed and restarted training processes run from the module's first test on, beside the
others (`background`)."""

import glob
import io
import os
import signal
import subprocess
import sys
import time

import pytest
import tensorflow as tf

from background import background_jobs
from keras_elmo.cli.main import main
from keras_elmo.models.bilm import BiLM
from keras_elmo.formats.options import BiLMOptions
from keras_elmo.training.config import TrainingConfig
from keras_elmo.training.model_dir import ModelDir
from keras_elmo.training.trainer import Trainer
from keras_elmo.training.vocabulary import Vocabulary

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINES = "the cat sat on the mat\na dog ran to the red house\nthe end\n"


def _write_data(tmp_path):
    corpus = tmp_path / "train.txt"
    corpus.write_text(LINES * 30)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("<S>\n</S>\n<UNK>\nthe\ncat\nsat\non\nmat\na\ndog\n")
    return tmp_path, str(corpus), str(vocab)


@pytest.fixture
def data(tmp_path):
    return _write_data(tmp_path)


def _error_line(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_bad_inputs_are_one_clear_line(data, capsys):
    tmp_path, corpus, vocab = data
    model = str(tmp_path / "model")
    line = _error_line(capsys, ["train", model, "--train", str(tmp_path / "nope*.txt"),
                                "--vocab", vocab, "--size", "tiny"])
    assert "No corpus file matches" in line and "nope*.txt" in line
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n")
    line = _error_line(capsys, ["train", model, "--train", str(empty), "--vocab", vocab,
                                "--size", "tiny"])
    assert "holds no token" in line
    bad_vocab = tmp_path / "bad_vocab.txt"
    bad_vocab.write_text("the\ncat\n")
    line = _error_line(capsys, ["train", model, "--train", corpus, "--vocab", str(bad_vocab),
                                "--size", "tiny"])
    assert "expected the special token '<S>'" in line
    line = _error_line(capsys, ["train", model, "--size", "tiny"])
    assert "--train and --vocab are required" in line
    assert not os.path.exists(model)  # nothing written for a refused run


def _tiny_model_dir(tmp_path, vocab_path, corpus):
    vocab = Vocabulary.load(vocab_path)
    config = TrainingConfig.preset("tiny").replace(n_tokens_vocab=len(vocab),
                                                   n_train_tokens=10, train_prefix=corpus)
    model_dir = ModelDir(str(tmp_path / "model"))
    model_dir.prepare(config, vocab_path)
    Trainer(config, vocab, model_dir, stream=io.StringIO()).save()
    return model_dir


def test_resume_refuses_conflicting_config_and_damaged_checkpoints(data, capsys):
    tmp_path, corpus, vocab = data
    model_dir = _tiny_model_dir(tmp_path, vocab, corpus)
    line = _error_line(capsys, ["train", model_dir.path, "--train", corpus,
                                "--batch-tokens", "512"])
    assert "was trained with batch_tokens=256; received batch_tokens=512" in line
    line = _error_line(capsys, ["train", model_dir.path, "--size", "small"])
    assert "was trained with" in line
    line = _error_line(capsys, ["train", model_dir.path, "--train", str(tmp_path / "*.txt")])
    assert "was trained with train_prefix=" in line
    # A data file cut short: restoring it fails with one line.
    data_file = glob.glob(os.path.join(model_dir.checkpoint_dir, "ckpt-0.data*"))[0]
    with open(data_file, "r+b") as f:
        f.truncate(100)
    line = _error_line(capsys, ["train", model_dir.path, "--train", corpus])
    assert line.startswith("keras-elmo train: error: cannot restore checkpoint")
    # The index named by the `checkpoint` file is gone.
    os.remove(os.path.join(model_dir.checkpoint_dir, "ckpt-0.index"))
    line = _error_line(capsys, ["train", model_dir.path])
    assert "is damaged" in line and "ckpt-0.index is missing" in line


def _read_back(model_dir):
    """Every file of the model directory must parse."""
    config = model_dir.load_config()
    Vocabulary.load(model_dir.vocab_path)
    state = tf.train.get_checkpoint_state(model_dir.checkpoint_dir)
    for path in state.all_model_checkpoint_paths:
        reader = tf.train.load_checkpoint(path)
        for name in reader.get_variable_to_shape_map():
            reader.get_tensor(name)
    BiLM.from_weights(model_dir.options_path, model_dir.weights_path)
    assert BiLMOptions.from_file(model_dir.options_path) == config.options
    for events in glob.glob(os.path.join(model_dir.logs_dir, "*tfevents*")):
        for _ in tf.data.TFRecordDataset(events):
            pass


def _killed_and_restarted(tmp_path):
    """A run killed with SIGKILL once it wrote a checkpoint, then the same command run to 25
    steps further: `(model_dir, the step saved, the target step, the second run)`."""
    _, corpus, vocab = _write_data(tmp_path)
    model_dir = ModelDir(str(tmp_path / "model"))
    command = [sys.executable, "-m", "keras_elmo.cli", "train", model_dir.path, "--train", corpus,
               "--vocab", vocab, "--size", "tiny", "--epochs", "1000", "--checkpoint-every", "10",
               "--log-every", "10"]
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("TF_CONFIG", None)
    first = subprocess.Popen(["timeout", "-k", "5", "240"] + command + ["--max-steps", "100000"],
                             cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
    state_file = os.path.join(model_dir.checkpoint_dir, "checkpoint")
    deadline = time.monotonic() + 200
    while not os.path.exists(state_file) and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(first.pid, signal.SIGKILL)  # the whole group: timeout and python
    first.wait()
    assert os.path.exists(state_file), "no checkpoint appeared before the deadline"
    saved_step = int(tf.train.latest_checkpoint(model_dir.checkpoint_dir).rsplit("-", 1)[1])
    assert saved_step >= 10 and not os.path.exists(model_dir.weights_path)

    target = saved_step + 25
    second = subprocess.run(["timeout", "-k", "5", "240"] + command +
                            ["--max-steps", str(target)],
                            cwd=ROOT, env=env, capture_output=True, text=True)
    return model_dir, saved_step, target, second


@pytest.fixture(scope="module", autouse=True)
def background(request, tmp_path_factory):
    """The killed and restarted runs of the kill -9 test, from the module's first test on
    (that test is the last: the others run meanwhile)."""
    with background_jobs(request, tmp_path_factory, {
            "test_kill_9_then_restart_resumes_from_the_last_checkpoint":
                _killed_and_restarted}) as jobs:
        yield jobs


@pytest.mark.slow
def test_a_resumed_run_ends_with_the_weights_of_an_uninterrupted_one(data, tmp_path):
    """Stop at step 6, resume to 12 == 12 steps at once (no dropout, full softmax: the
    random parts a process does not carry over are off), optimizer state included."""
    import keras
    import numpy as np

    _, corpus, vocab = data
    flags = ["--train", corpus, "--vocab", vocab, "--size", "tiny", "--optimizer", "adam",
             "--learning-rate", "0.01", "--dropout", "0.0", "--epochs", "10",
             "--log-every", "100"]
    keras.utils.set_random_seed(0)
    assert main(["train", str(tmp_path / "once")] + flags + ["--max-steps", "12"]) == 0
    keras.utils.set_random_seed(0)
    assert main(["train", str(tmp_path / "twice")] + flags + ["--max-steps", "6"]) == 0
    assert main(["train", str(tmp_path / "twice"), "--max-steps", "12"]) == 0
    once = tf.train.load_checkpoint(str(tmp_path / "once" / "checkpoints" / "ckpt-12"))
    twice = tf.train.load_checkpoint(str(tmp_path / "twice" / "checkpoints" / "ckpt-12"))
    names = [n for n in once.get_variable_to_shape_map()
             if n.startswith(("model/", "optimizer/", "epoch", "batches_in_epoch"))]
    assert len(names) > 50
    for name in names:
        np.testing.assert_allclose(twice.get_tensor(name), once.get_tensor(name), atol=1e-6,
                                   err_msg=name)


@pytest.mark.slow
def test_kill_9_then_restart_resumes_from_the_last_checkpoint(background, request):
    model_dir, saved_step, target, second = background.result(request)
    assert second.returncode == 0, second.stderr[-3000:]
    assert f"resumed from ckpt-{saved_step}" in second.stdout
    assert f"stopped (max_steps) at step {target}" in second.stdout
    steps = [int(line.split()[1]) for line in second.stdout.splitlines()
             if line.startswith("step ")]
    assert steps and min(steps) > saved_step  # continued, did not start from 0
    assert tf.train.latest_checkpoint(model_dir.checkpoint_dir).endswith(f"ckpt-{target}")
    _read_back(model_dir)
