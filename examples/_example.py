"""What the example scripts share: the repository on `sys.path`, quiet TensorFlow logs, and
an argument parser built from the script's docstring.

A script starts with `import _example` (Python puts `examples/` on `sys.path` when it runs
`python examples/<script>.py`; the tests add it themselves), then
`parser = _example.parser(__doc__)`: the docstring's first line is the description and its
`Example:` section the epilog of `--help`.
"""

import argparse
import os
import sys

#: The repository root (holds `keras_elmo/`, `applications/`, `training/`, ...).
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def parser(doc):
    """An `ArgumentParser` described by `doc` (a script's module docstring)."""
    return argparse.ArgumentParser(
        description=doc.split("\n")[0], epilog="Example:" + doc.split("Example:")[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
