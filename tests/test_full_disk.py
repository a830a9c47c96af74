"""Issue 43 on a real small filesystem (a tmpfs of a few MB; root only, else skipped with the
reason): `train`, `embed`, `export` and `vocab` on a full or read-only disk give one line and
exit 75, leave nothing partial and the earlier state intact, and training goes on once space
is freed. The `embed` whose disk fills while it writes runs in a process of its own (a crash
would be exit 139), from the module's first test on (`background`)."""

import glob
import os
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

import keras
import keras_elmo
from background import background_jobs
from keras_elmo.cli.main import main
from keras_elmo.process.storage_errors import format_bytes
from small_filesystem import small_filesystem, unavailable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINES = "the cat sat on the mat\na dog ran to the red house\nthe end\n"
EXIT = 75

_CANNOT_MOUNT = unavailable()
pytestmark = pytest.mark.skipif(_CANNOT_MOUNT is not None, reason=str(_CANNOT_MOUNT))


def _one_line(capsys, command):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"keras-elmo {command}: error: cannot write "), err[0]
    return err[0]


def _tiny_model(directory):
    keras.utils.set_random_seed(5)
    return keras_elmo.save_published(keras_elmo.BiLM(keras_elmo.BiLMOptions.tiny()), directory)


def _embed_while_the_disk_fills(folder):
    """`keras-elmo embed` into an 8 MB tmpfs that another writer fills once the output's
    temporary holds 50 kB: `(exit code, stderr, names left, the earlier output's bytes)`."""
    model = str(folder / "model")
    _tiny_model(model)
    text = folder / "in.txt"
    text.write_text("".join(f"the cat sat {i}\n" for i in range(8000)))
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)  # the command's own default: what a user sees
    with small_filesystem(folder / "disk", size_kib=8192) as disk:
        out = os.path.join(disk.path, "out.hdf5")
        with open(out, "wb") as handle:
            handle.write(b"an earlier output")
        process = subprocess.Popen(
            ["timeout", "-k", "5", "240", sys.executable, "-m", "keras_elmo.cli", "embed",
             model, str(text), out, "--top", "--no-progress"], cwd=ROOT, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        while process.poll() is None:
            temporaries = glob.glob(os.path.join(disk.path, ".out.hdf5.*.tmp"))
            if temporaries and os.path.getsize(temporaries[0]) > 50_000:
                break
            time.sleep(0.01)
        disk.fill()
        _, err = process.communicate()
        with open(out, "rb") as handle:
            earlier = handle.read()
        return process.returncode, err, disk.entries(), earlier


JOBS = {"test_embed_survives_a_disk_that_fills_while_it_writes": _embed_while_the_disk_fills}


@pytest.fixture(scope="module", autouse=True)
def background(request, tmp_path_factory):
    with background_jobs(request, tmp_path_factory, JOBS) as jobs:
        yield jobs


def test_train_stops_on_a_full_disk_and_goes_on_once_space_is_freed(tmp_path, monkeypatch,
                                                                    capsys):
    corpus, vocab = tmp_path / "train.txt", tmp_path / "vocab.txt"
    corpus.write_text(LINES * 30)
    vocab.write_text("<S>\n</S>\n<UNK>\nthe\ncat\nsat\non\nmat\na\ndog\n")
    with small_filesystem(tmp_path / "disk", size_kib=3072) as disk:
        model_dir = os.path.join(disk.path, "run")
        checkpoints = os.path.join(model_dir, "checkpoints")
        argv = ["train", model_dir, "--train", str(corpus), "--vocab", str(vocab), "--size",
                "tiny", "--epochs", "100", "--checkpoint-every", "2", "--log-every", "100",
                "--max-steps", "6"]
        disk.leave_free(100 * 1024)  # ckpt-2 fits, ckpt-4 does not
        # 1. Without the check before each save: TensorFlow's SaveV2 meets the full disk.
        for module in ("run_state", "checkpoint_saving"):  # run_state imports the other's
            monkeypatch.setattr(f"keras_elmo.training.{module}.check_space",
                                lambda *args, **kwargs: None)
        assert main(argv) == EXIT
        line = _one_line(capsys, "train")
        assert line.startswith(f"keras-elmo train: error: cannot write checkpoint ckpt-4 "
                               f"({checkpoints}): no space left on device (")
        assert line.endswith("the last complete checkpoint is ckpt-2 (step 2); free some space "
                             "there and run the same command to go on.")
        assert sorted(os.listdir(checkpoints)) == ["checkpoint", "ckpt-2.data-00000-of-00001",
                                                   "ckpt-2.index"]  # no ckpt-4_temp
        reader = tf.train.load_checkpoint(os.path.join(checkpoints, "ckpt-2"))
        assert all(np.all(np.isfinite(reader.get_tensor(name)))
                   for name, dtype in reader.get_variable_to_dtype_map().items()
                   if dtype.is_floating)
        assert not os.path.exists(os.path.join(model_dir, "weights.hdf5"))
        monkeypatch.undo()
        # 2. Run again, still full: refused before a step is spent.
        assert main(argv) == EXIT
        line = _one_line(capsys, "train")
        size = sum(os.path.getsize(path) for path in glob.glob(checkpoints + "/ckpt-2.*"))
        assert f"cannot write the next checkpoint ({checkpoints}): no space left on device " \
               f"(needs at least {format_bytes(size)}, " in line  # ckpt-2's size
        assert "; the last complete checkpoint is ckpt-2 (step 2); free " in line
        assert "tracing the training step" not in capsys.readouterr().out
        # 3. Space freed: the same command finishes the run from ckpt-2.
        disk.remove_filler()
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert "stopped (max_steps) at step 6" in out and "resumed from ckpt-2" in out
        keras_elmo.BiLM.from_weights(os.path.join(model_dir, "options.json"),
                                     os.path.join(model_dir, "weights.hdf5"))
        assert not [name for name in disk.entries() if name.endswith((".tmp", "_temp"))]


def test_embed_refuses_a_full_disk_before_any_work_and_a_read_only_one(tmp_path, capsys):
    model = str(tmp_path / "model")
    _tiny_model(model)
    text = tmp_path / "in.txt"
    text.write_text("".join(f"the cat sat on the mat {i}\n" for i in range(2000)))
    with small_filesystem(tmp_path / "disk", size_kib=3072) as disk:
        out = os.path.join(disk.path, "out.hdf5")
        disk.leave_free(200 * 1024)
        assert main(["embed", model, str(text), out, "--no-progress"]) == EXIT
        line = _one_line(capsys, "embed")
        assert f"cannot write the ELMo vectors ({out}): no space left on device (needs at least " \
               "3.1 MB, 200 kB free); nothing was written; free 2.9 MB or more there" in line
        assert disk.entries() == []
        disk.remove_filler()
        disk.remount("ro")
        try:
            assert main(["embed", model, str(text), out, "--no-progress"]) == EXIT
            line = _one_line(capsys, "embed")
            assert f"({out}): read-only file system; nothing was written; make that " \
                   "filesystem writable (or write elsewhere) and run the same command again." \
                   in line
        finally:
            disk.remount("rw")


def test_embed_survives_a_disk_that_fills_while_it_writes(background, request):
    code, err, left, earlier = background.result(request)
    assert code == EXIT, err[-3000:]  # never 139 (a segmentation fault)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err[-3000:]
    assert lines[0].startswith("keras-elmo embed: error: cannot write the ELMo vectors (")
    assert "no space left on device" in lines[0] and "as it was before is untouched" in lines[0]
    assert left == ["out.hdf5"] and earlier == b"an earlier output"


def test_export_on_a_full_disk_leaves_no_version_folder(tmp_path, capsys):
    options, weights = _tiny_model(str(tmp_path / "model"))
    with small_filesystem(tmp_path / "disk", size_kib=3072) as disk:
        base = os.path.join(disk.path, "serving")
        argv = ["export", "--options", options, "--weights", weights, base, "--version", "1"]
        disk.leave_free(16 * 1024)  # less than the weights: refused before tracing
        assert main(argv) == EXIT
        line = _one_line(capsys, "export")
        assert f"cannot write the SavedModel ({base}/1): no space left on device (needs at " \
               "least 23 kB, 16 kB free); nothing was written; free 7.1 kB or more" in line
        disk.leave_free(300 * 1024)  # the weights fit, the graph does not
        assert main(argv) == EXIT
        line = _one_line(capsys, "export")
        assert f"cannot write the SavedModel ({base}/1): no space left on device (" in line
        assert "no partial directory was left; free some space there" in line
        assert disk.entries() == []  # not even the base folder


def test_vocab_on_a_full_and_a_read_only_disk(tmp_path, capsys):
    corpus = tmp_path / "train.txt"
    corpus.write_text(LINES)
    with small_filesystem(tmp_path / "disk", size_kib=1024) as disk:
        out = os.path.join(disk.path, "vocab.txt")
        disk.fill()
        assert main(["vocab", "--train", str(corpus), "--out", out]) == EXIT
        assert "no space left on device" in _one_line(capsys, "vocab")
        disk.remove_filler()
        disk.remount("ro")
        try:
            assert main(["vocab", "--train", str(corpus), "--out", out]) == EXIT
            line = _one_line(capsys, "vocab")
            assert f"cannot write the vocabulary ({out}): read-only file system" in line
        finally:
            disk.remount("rw")
        assert disk.entries() == []
