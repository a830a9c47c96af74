"""What the example scripts share: TensorFlow started as the `keras-elmo` command starts it,
and an argument parser built from the script's docstring. The scripts use the installed
`keras_elmo` (`pip install -e .`) and the example-only code in `examples/tasks/` (data
readers, task models, stored biLM layers).

A script starts with `import _example` (Python puts `examples/` on `sys.path` when it runs
`python examples/<script>.py`; pytest's `pythonpath` setting does it for the tests), then
`parser = _example.parser(__doc__)`: the docstring's first line is the description and its
`Example:` section the epilog of `--help`. Importing `_example` sets the command's CPU
settings and log level (`keras_elmo.cli.tensorflow_start.set_start_defaults`); a script
that uses TensorFlow calls `_example.import_tensorflow()` before anything imports it, so that
TensorFlow's native start-up lines stay out of its output as they stay out of the command's.
"""

import argparse

from keras_elmo.cli.tensorflow_start import import_tensorflow, set_start_defaults

set_start_defaults()

__all__ = ["add_task_arguments", "import_tensorflow", "parser"]


def parser(doc):
    """An `ArgumentParser` described by `doc` (a script's module docstring)."""
    return argparse.ArgumentParser(
        description=doc.split("\n")[0], epilog="Example:" + doc.split("Example:")[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)


def add_task_arguments(parser, batch_size):
    """The options both downstream scripts (pos_tagger.py, sentiment.py) share: the biLM,
    the output, the two-arm task model and the stored biLM layers."""
    parser.add_argument("--model", required=True, help="biLM MODEL_DIR")
    parser.add_argument("--out", required=True, help="directory for results (created)")
    parser.add_argument("--patience", type=int, default=2)
    parser.add_argument("--dev-sentences", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=batch_size)
    parser.add_argument("--word-dim", type=int, default=64)
    parser.add_argument("--lstm-units", type=int, default=128)
    parser.add_argument("--elmo-dropout", type=float, default=0.5)
    parser.add_argument("--layer-norm", action="store_true",
                        help="normalise each biLM layer in the mix (ScalarMix do_layer_norm)")
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--layers-dir", default=None,
                        help="where the stored biLM layers go (float16, ~1.6 GB for all of "
                             "People's Daily train; default OUT)")
    parser.add_argument("--keep-layers", action="store_true",
                        help="keep the stored biLM layers in OUT and reuse them next time "
                             "(same model and sentences); default: deleted at the end")
    parser.add_argument("--no-text-check", action="store_true",
                        help="skip the end-to-end ElmoLayer check on raw strings")
