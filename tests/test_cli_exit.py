"""The `keras-elmo` program ends through the interpreter's normal shutdown with its exit code
and every line it printed (atexit handlers run)."""

import subprocess
import sys

# An atexit handler that prints: it runs when the interpreter shuts down normally.
_PROGRAM = r"""
import atexit, sys
atexit.register(lambda: print("TEARDOWN", flush=True))
from keras_elmo.cli.main import console_main
sys.exit(console_main(sys.argv[1:]))
"""


def _run(*argv):
    return subprocess.run([sys.executable, "-c", _PROGRAM, *argv], capture_output=True,
                          text=True, timeout=300)


def test_a_command_ends_normally_with_its_output_and_code(tmp_path):
    text = tmp_path / "train.txt"
    text.write_text("a b a\nc a\n", encoding="utf-8")
    out = tmp_path / "vocab.txt"
    done = _run("vocab", "--train", str(text), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert out.read_text(encoding="utf-8").split("\n")[:4] == ["<S>", "</S>", "<UNK>", "a"]
    assert done.stdout.strip().splitlines()[-1] == "TEARDOWN"
    assert len(done.stdout.strip().splitlines()) > 1, "the command's own lines were lost"


def test_an_error_keeps_its_line_and_exit_code(tmp_path):
    done = _run("vocab", "--train", str(tmp_path / "missing*.txt"), "--out",
                str(tmp_path / "v.txt"))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("keras-elmo vocab: error: ")
    assert "TEARDOWN" in done.stdout
