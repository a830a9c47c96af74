"""Issue 15: a training run cannot be silently broken.

One run per MODEL_DIR (lock, stale lock of a killed run), divergence (NaN learning rate),
SIGTERM (checkpoint + weights.hdf5 + resume hint), resume from another directory, a
checkpoint that does not match options.json, non-finite checkpoints refused. The training
processes of the SIGTERM and the concurrent-trainers tests run from the module's first test
on, beside the others (`background`).
"""

import glob
import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import tensorflow as tf

from background import background_jobs
from keras_elmo.cli.main import main
from keras_elmo.training.config import TrainingConfig
from keras_elmo.training.model_dir import ModelDir
from keras_elmo.training.run_lock import RunLock, RunLockedError
from keras_elmo.training.trainer import Trainer
from keras_elmo.training.vocabulary import Vocabulary

LINES = "the cat sat on the mat\na dog ran to the red house\nthe end\n"
_CPP_LOG = re.compile(r"^([EIW]\d{4} |WARNING: All log messages before absl)")
_HOLDER = textwrap.dedent("""
    import sys, time
    from keras_elmo.training.run_lock import RunLock
    lock = RunLock(sys.argv[1]).acquire()
    print("locked", flush=True)
    time.sleep(60)
""")


def _write_data(tmp_path):
    corpus = tmp_path / "train.txt"
    corpus.write_text(LINES * 30)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("<S>\n</S>\n<UNK>\nthe\ncat\nsat\non\nmat\na\ndog\n")
    return tmp_path, str(corpus), str(vocab)


@pytest.fixture
def data(tmp_path):
    return _write_data(tmp_path)


def _error_lines(capfd):
    return [line for line in capfd.readouterr().err.strip().splitlines()
            if line and not _CPP_LOG.match(line)]


def _hold_lock(directory):
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, directory],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    return holder


def test_a_second_trainer_is_refused_naming_the_holder(data, capfd):
    tmp_path, corpus, vocab = data
    model = str(tmp_path / "model")
    holder = _hold_lock(model)
    try:
        with pytest.raises(RunLockedError, match=f"pid {holder.pid} on host "
                                                 f"{re.escape(socket.gethostname())}"):
            RunLock(model).acquire()
        assert main(["train", model, "--train", corpus, "--vocab", vocab,
                     "--size", "tiny"]) == 2
        err = _error_lines(capfd)
        assert len(err) == 1 and f"{model} is being trained by pid {holder.pid}" in err[0], err
        assert "wait for that run to end or use another MODEL_DIR" in err[0]
        assert os.listdir(model) == [".train.lock"]  # nothing written by the refused run
    finally:
        holder.kill()
        holder.wait()
    # The holder was killed (-9): its lock does not block the next run.
    with RunLock(model):
        pass


_SLOW_WRITER = textwrap.dedent("""
    import fcntl, json, os, socket, sys, time
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # locked, the record is not written yet
    print("locked", flush=True)
    time.sleep(0.6)
    record = {"pid": os.getpid(), "host": socket.gethostname(), "since": "now"}
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(record) + "\\n").encode(), 0)
    time.sleep(60)
""")


def test_a_run_refused_before_the_holder_wrote_its_record_still_names_it(tmp_path):
    """The holder takes the lock, then writes: the refused run waits for the record and
    does not take a finished run's record (a pid that no longer runs) for the holder's."""
    model = tmp_path / "model"
    model.mkdir()
    lock_path = model / ".train.lock"
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True)
    lock_path.write_text(json.dumps({"pid": int(finished.stdout), "since": "earlier",
                                     "host": socket.gethostname()}) + "\n")
    holder = subprocess.Popen([sys.executable, "-c", _SLOW_WRITER, str(lock_path)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(RunLockedError, match=f"pid {holder.pid} on host .* since now"):
            RunLock(str(model)).acquire()
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize("content", ['["pid", "host", "since"]', '"pid host since"', "{}",
                                     "not json", ""])
def test_a_lock_file_without_a_holder_record_gives_the_neutral_line(tmp_path, monkeypatch,
                                                                    content):
    """A held lock whose file holds no usable record (foreign or corrupt) is still refused
    in one line, after the bounded wait for a record."""
    from keras_elmo.training import run_lock

    monkeypatch.setattr(run_lock, "HOLDER_RECORD_WAIT_S", 0.2)
    model = tmp_path / "model"
    holder = _hold_lock(str(model))
    try:
        (model / ".train.lock").write_text(content)  # over the holder's own record
        with pytest.raises(RunLockedError, match="is being trained by another process"):
            RunLock(str(model)).acquire()
    finally:
        holder.kill()
        holder.wait()


def _tiny_trainer(data):
    """`(trainer, corpus)`: a tiny run's Trainer over a prepared model directory."""
    tmp_path, corpus, vocab_path = data
    vocab = Vocabulary.load(vocab_path)
    config = TrainingConfig.preset("tiny").replace(n_tokens_vocab=len(vocab),
                                                   n_train_tokens=10, train_prefix=corpus)
    model_dir = ModelDir(str(tmp_path / "model"))
    model_dir.prepare(config, vocab_path)
    return Trainer(config, vocab, model_dir, stream=io.StringIO()), corpus


def test_a_checkpoint_that_does_not_match_options_json_is_one_line(data, capfd):
    trainer, corpus = _tiny_trainer(data)
    model_dir = trainer.model_dir
    trainer.save()
    options = json.loads(open(model_dir.options_path).read())
    options["lstm"]["dim"] = 14
    with open(model_dir.options_path, "w") as f:
        json.dump(options, f)
    capfd.readouterr()
    for argv in (["perplexity", model_dir.path, "--heldout", corpus],
                 ["train", model_dir.path, "--max-steps", "2"]):
        assert main(argv) == 2
        err = _error_lines(capfd)
        assert len(err) == 1, err  # no wall of TensorFlow warnings
        assert (f"checkpoint {model_dir.checkpoint_dir}/ckpt-0 does not match options.json "
                "(it was written with other options): model variable 0014_input_kernel has "
                "shape (48, 8), expected (56, 8).") in err[0], err


def test_perplexity_refuses_a_non_finite_checkpoint(data, capfd):
    trainer, corpus = _tiny_trainer(data)
    model_dir = trainer.model_dir
    variable = trainer.model.trainable_variables[3]
    variable.assign(np.full(variable.shape, np.nan, np.float32))
    trainer.manager.save(checkpoint_number=0)  # as a diverged run before this fix did
    with pytest.raises(ValueError, match="Stopped"):
        trainer.save()  # the trainer itself never saves it
    capfd.readouterr()
    assert main(["perplexity", model_dir.path, "--heldout", corpus]) == 2
    err = _error_lines(capfd)
    assert len(err) == 1 and "ckpt-0 holds non-finite values (NaN or inf) in 1 variable(s)" \
        in err[0], err


@pytest.mark.slow
def test_a_diverging_run_stops_and_keeps_the_last_finite_checkpoint(data, tmp_path, capfd,
                                                                    monkeypatch):
    _, corpus, vocab = data
    flags = ["--train", corpus, "--vocab", vocab, "--size", "tiny", "--epochs", "20",
             "--checkpoint-every", "2", "--log-every", "100"]
    # The command: diverges at once.
    model = tmp_path / "nan"
    assert main(["train", str(model), *flags, "--learning-rate", "1e30", "--clip-norm", "1e30",
                 "--max-steps", "20"]) == 2
    err = _error_lines(capfd)
    assert len(err) == 1 and re.search(r"training diverged at step \d+: loss nan", err[0]), err
    assert "weights.hdf5 was not written" in err[0]
    assert not os.path.exists(model / "weights.hdf5")
    for index in glob.glob(str(model / "checkpoints" / "ckpt-*.index")):
        reader = tf.train.load_checkpoint(index[:-len(".index")])
        for name in reader.get_variable_to_shape_map():
            value = reader.get_tensor(name)
            if np.issubdtype(np.asarray(value).dtype, np.floating):
                assert np.all(np.isfinite(value)), (index, name)
    # A good run diverging later: its last finite checkpoint and weights stay.
    vocabulary = Vocabulary.load(vocab)
    config = TrainingConfig.preset("tiny").replace(
        n_tokens_vocab=len(vocabulary), n_epochs=20, checkpoint_every_steps=2,
        train_prefix=corpus, n_train_tokens=10)
    model_dir = ModelDir(str(tmp_path / "good"))
    model_dir.prepare(config, vocab)
    trainer = Trainer(config, vocabulary, model_dir, stream=io.StringIO())
    trainer.fit([corpus], max_steps=4)
    weights = open(model_dir.weights_path, "rb").read()
    diverging = Trainer(config.replace(all_clip_norm_val=1e30), vocabulary, model_dir,
                        stream=io.StringIO())
    restore = diverging.restore_latest

    def restore_then_raise_the_learning_rate():  # the checkpoint holds the rate too
        path = restore()  # ckpt-4
        diverging.optimizer.learning_rate.assign(1e30)
        return path

    monkeypatch.setattr(diverging, "restore_latest", restore_then_raise_the_learning_rate)
    with pytest.raises(ValueError, match=r"training diverged at step (5|6): .*the newest "
                                         r"checkpoint, ckpt-4, is finite"):
        diverging.fit([corpus], max_steps=20)
    assert model_dir.latest_checkpoint().endswith("ckpt-4")
    assert open(model_dir.weights_path, "rb").read() == weights


def _train_command(model, corpus, vocab, *extra):
    return [sys.executable, "-m", "keras_elmo.cli", "train", model, "--train", corpus,
            "--vocab", vocab, "--size", "tiny", "--log-every", "1", *extra]


def _env():
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("TF_CONFIG", None)
    return env


def _sigterm_run(tmp_path):
    """A run sent SIGTERM after its third step: `(model, exit code, stdout, stderr)`."""
    _, corpus, vocab = _write_data(tmp_path)
    model = str(tmp_path / "model")
    process = subprocess.Popen(
        ["timeout", "-k", "120", "300"] + _train_command(model, corpus, vocab, "--epochs", "1000",
                                                       "--checkpoint-every", "100000"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    try:
        for line in process.stdout:  # wait for the first steps
            if line.startswith("step 3 "):
                break
        os.kill(process.pid, signal.SIGTERM)  # `timeout` passes it on to the trainer
        out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return model, process.returncode, out, err


def _concurrent_runs(tmp_path):
    """Two runs started at once on one model directory: `(model, [(exit code, stdout,
    stderr)])`."""
    _, corpus, vocab = _write_data(tmp_path)
    model = str(tmp_path / "model")
    runs = [subprocess.Popen(["timeout", "-k", "5", "300"] +
                             _train_command(model, corpus, vocab, "--max-steps", "3"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=_env()) for _ in range(2)]
    results = []
    for run in runs:
        out, err = run.communicate()
        results.append((run.returncode, out, err))
    return model, results


@pytest.fixture(scope="module", autouse=True)
def background(request, tmp_path_factory):
    """The training processes of the SIGTERM and concurrent-trainers tests, from the
    module's first test on (those tests are the last: the others run meanwhile)."""
    with background_jobs(request, tmp_path_factory, {
            "test_sigterm_writes_a_checkpoint_and_weights_then_says_how_to_resume":
                _sigterm_run,
            "test_two_concurrent_trainers_one_is_refused": _concurrent_runs}) as jobs:
        yield jobs


@pytest.mark.slow
def test_a_run_resumes_from_another_directory_and_by_another_path(data, monkeypatch):
    tmp_path, corpus, vocab = data
    monkeypatch.chdir(tmp_path)
    assert main(["train", "model", "--train", "train.txt", "--vocab", "vocab.txt",
                 "--size", "tiny", "--epochs", "10", "--max-steps", "2"]) == 0
    saved = json.loads((tmp_path / "model" / "options.json").read_text())
    assert saved["train_prefix"] == corpus  # stored absolute
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(corpus, elsewhere / "link.txt")
    monkeypatch.chdir(elsewhere)
    assert main(["train", "../model", "--max-steps", "3"]) == 0  # no --train
    assert main(["train", "../model", "--train", "link.txt", "--max-steps", "4"]) == 0
    assert ModelDir(str(tmp_path / "model")).latest_checkpoint().endswith("ckpt-4")
    # Relative paths stored by runs before this fix are read from the model directory.
    saved["train_prefix"] = "../train.txt"
    (tmp_path / "model" / "options.json").write_text(json.dumps(saved))
    assert main(["train", "../model", "--max-steps", "5"]) == 0


@pytest.mark.slow
def test_sigterm_writes_a_checkpoint_and_weights_then_says_how_to_resume(background, request):
    model, returncode, out, err = background.result(request)  # _sigterm_run
    assert returncode == 143, err[-2000:]
    step = int(re.search(r"stopped \(SIGTERM\) at step (\d+)", out).group(1))
    assert step >= 3
    lines = [line for line in err.splitlines() if line and not _CPP_LOG.match(line)]
    assert lines == [f"keras-elmo train: interrupted by SIGTERM at step {step}; checkpoint and "
                     f"weights.hdf5 written; resume with `keras-elmo train {model}`."], lines
    assert ModelDir(model).latest_checkpoint().endswith(f"ckpt-{step}")
    from keras_elmo.models.bilm import BiLM

    BiLM.from_weights(os.path.join(model, "options.json"), os.path.join(model, "weights.hdf5"))


@pytest.mark.slow
def test_two_concurrent_trainers_one_is_refused(background, request):
    model, results = background.result(request)  # _concurrent_runs
    codes = sorted(code for code, _, _ in results)
    assert codes == [0, 2], results
    refused = next(err for code, _, err in results if code == 2)
    assert re.search(rf"{re.escape(model)} is being trained by pid \d+ on host", refused)
    # The directory is one run's: its options and weights load together.
    from keras_elmo.models.bilm import BiLM

    BiLM.from_weights(os.path.join(model, "options.json"), os.path.join(model, "weights.hdf5"))
