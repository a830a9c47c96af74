"""docs/migrating.md: every keras-elmo block (```python and ```bash, not the "peer" blocks of
the other libraries) runs on a tiny model, as a user would type it.

Two substitutions keep it fast and are the only changes: the training command's
`--size small --max-minutes 20` becomes `--size tiny --max-steps 2`."""

import contextlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

import keras
import keras_elmo

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs",
                   "migrating.md")
_BLOCK = re.compile(r"^```([^\n]*)\n(.*?)^```$", re.S | re.M)
_FAST = {"--size small --max-minutes 20": "--size tiny --max-steps 2"}


def _blocks():
    """`(language, code)` of the executed blocks, in order."""
    text = open(DOC, encoding="utf-8").read()
    return [(info.strip(), code) for info, code in _BLOCK.findall(text)
            if info.strip() in ("python", "bash")]


def _commands(code):
    """The shell commands of a bash block (continuation lines joined)."""
    for line in code.replace("\\\n", " ").splitlines():
        line = line.split("#")[0].strip() if line.strip().startswith("#") else line.strip()
        if line:
            for slow, fast in _FAST.items():
                line = line.replace(slow, fast)
            yield line


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    keras.utils.set_random_seed(5)
    bilm = keras_elmo.BiLM(keras_elmo.BiLMOptions.tiny())
    keras_elmo.save_published(bilm, str(tmp_path / "model"))
    shutil.copyfile(tmp_path / "model" / "options.json", tmp_path / "elmo_options.json")
    shutil.copyfile(tmp_path / "model" / "weights.hdf5", tmp_path / "elmo_weights.hdf5")
    (tmp_path / "model" / "vocab.txt").write_text("<S>\n</S>\n<UNK>\nthe\ncat\nsat\n",
                                                  encoding="utf-8")
    (tmp_path / "sentences.txt").write_text("the cat sat\nhello\n", encoding="utf-8")
    (tmp_path / "train.txt").write_text("the cat sat .\nthe dog sat .\na cat ran .\n" * 4,
                                        encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_doc_has_blocks_for_each_library():
    languages = [language for language, _ in _blocks()]
    assert languages.count("python") >= 5 and languages.count("bash") >= 4
    text = open(DOC, encoding="utf-8").read()
    for old in ("hub.Module", "hub.KerasLayer", "ElmoEmbedder", "allennlp elmo",
                "BidirectionalLanguageModel", "dump_bilm_embeddings", "train_elmo.py",
                "stateful=True"):
        assert old in text, old


@pytest.mark.slow
def test_every_keras_elmo_block_runs(workspace):
    for language, code in _blocks():
        if language == "python":
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(code, DOC, "exec"), {"__name__": "__doc_block__"})
            continue
        for command in _commands(code):
            argv = shlex.split(command)
            assert argv[0] == "keras-elmo", command
            proc = subprocess.run([sys.executable, "-m", "keras_elmo.cli", *argv[1:]],
                                  capture_output=True, text=True, timeout=600)
            assert proc.returncode == 0, (command, proc.stderr[-2000:])
    for written in ("serving/elmo/1/saved_model.pb", "elmo_layers.hdf5", "elmo_top.hdf5",
                    "elmo.hdf5", "token_embeddings.hdf5", "vocab.txt", "run/weights.hdf5"):
        assert (workspace / written).exists(), written
