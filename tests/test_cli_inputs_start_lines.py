"""What reaches stderr when keras-elmo's code starts TensorFlow with TF_CPP_MIN_LOG_LEVEL=3.

`examples/use_saved_model.py` (the main job's last step) prints nothing there: it starts
TensorFlow as the command does (`keras_elmo.cli.tensorflow_start`) when keras-elmo is
installed. `import keras_elmo.models` imports no tensorflow-text and adds no line of its
own: what it shows are TensorFlow's own start-up lines (absl writes them while TensorFlow's
libraries load, before any Python setting is read; `import tensorflow` alone shows them),
which only a program's start (`import_tensorflow`) holds back, not a library's import.
"""

import os
import subprocess
import sys

from keras_elmo.cli.tensorflow_start import NOISE

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: The marks of a C++ start-up or log line (absl's prefix, CUDA's probe).
_MARKS = ("I0000", "E0000", "W0000", "cuInit", "All log messages before absl")


def _python(*argv, cwd=ROOT):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True,
                          timeout=600, cwd=cwd, env=env)


def test_use_saved_model_prints_nothing_on_stderr(exported_tiny_model):
    # the order of the script's docstring: the SavedModel, --word, then the sentences
    done = _python("examples/use_saved_model.py", exported_tiny_model["path"], "--word", "b",
                   "a b c", "c b a")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr == ""
    assert "cosine similarity of 'b' across sentences" in done.stdout, done.stdout


def test_use_saved_model_checks_its_argument_before_tensorflow_starts(tmp_path):
    done = _python("-c", "import runpy, sys; sys.argv = ['use_saved_model.py', sys.argv[1]]\n"
                   "try:\n    runpy.run_path('examples/use_saved_model.py', "
                   "run_name='__main__')\nexcept SystemExit as stop:\n"
                   "    print(stop.code, 'tensorflow' in sys.modules)", str(tmp_path))
    assert done.stdout.split() == ["2", "False"], (done.stdout, done.stderr)
    assert done.stderr.strip() == (f"use_saved_model: error: no saved_model.pb in {tmp_path} "
                                   "(expected a SavedModel directory: a version folder of "
                                   "`keras-elmo export`)")


def test_importing_the_models_adds_no_start_up_line_of_its_own():
    done = _python("-c", "import sys, keras_elmo.models\n"
                   "print(sorted(m for m in sys.modules if m.startswith('tensorflow_text')))")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[]"  # tensorflow-text is imported where its op runs only
    own = [line for line in done.stderr.splitlines() if not NOISE.fullmatch(line.strip())]
    assert own == [], own  # every line left is TensorFlow's own start-up line


def test_the_models_import_quietly_after_tensorflow_started_as_a_program_does():
    done = _python("-c", "from keras_elmo.cli.tensorflow_start import import_tensorflow\n"
                   "import_tensorflow()\nimport keras_elmo.models")
    assert done.returncode == 0, done.stderr[-3000:]
    noise = [line for line in done.stderr.splitlines() if any(m in line for m in _MARKS)]
    assert noise == [] and done.stderr == "", done.stderr
