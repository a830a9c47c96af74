"""`keras_elmo.process.cpu_setup`: the thread layout of a biLM (both directions side by side)."""

import os
import subprocess
import sys

import pytest

from keras_elmo.process import cpu_setup as cpu_threads


@pytest.mark.parametrize("cores, layout", [(1, (1, 2)), (2, (1, 2)), (3, (1, 2)), (16, (8, 2))])
def test_default_layout_gives_each_direction_half_the_cores(cores, layout):
    assert cpu_threads.default_thread_layout(cores) == layout


def test_default_layout_refuses_no_cores():
    with pytest.raises(ValueError, match="cores must be >= 1; received 0"):
        cpu_threads.default_thread_layout(0)


def test_set_layout_fills_unset_variables_and_keeps_the_users():
    environ = {}
    assert cpu_threads.set_default_thread_layout(environ, cores=4) == {
        "TF_NUM_INTRAOP_THREADS": "2", "TF_NUM_INTEROP_THREADS": "2"}
    users = {"TF_NUM_INTRAOP_THREADS": "3"}
    effective = cpu_threads.set_default_thread_layout(users, cores=4)
    assert users == {"TF_NUM_INTRAOP_THREADS": "3"}  # nothing added beside the user's choice
    assert effective["TF_NUM_INTRAOP_THREADS"] == "3"
    assert "default" in effective["TF_NUM_INTEROP_THREADS"]
    assert "3 per op" in cpu_threads.describe_thread_layout(users)


def test_the_command_line_sets_the_layout_before_tensorflow_starts():
    """Importing the CLI sets TensorFlow's variables and imports no TensorFlow itself."""
    code = ("import os, sys, keras_elmo.cli.main; "
            "print(os.environ['TF_NUM_INTRAOP_THREADS'], os.environ['TF_NUM_INTEROP_THREADS'], "
            "'tensorflow' in sys.modules)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TF_NUM_")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=300, check=True).stdout.split()
    intra, inter = cpu_threads.default_thread_layout()
    assert out == [str(intra), str(inter), "False"]
