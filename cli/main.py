"""`keras-elmo`: command-line entry point.

Every subcommand lives in its own module `cli/<name>.py`, which defines
`add_parser(subparsers)` (cheap: no TensorFlow import) and `run(args)` (checks its
arguments, then imports TensorFlow through `keras_elmo.cli.quiet.import_tensorflow` if it
needs it, then does the work). User errors (`ValueError`, `FileNotFoundError`, `OSError`) become one
line on stderr and exit code 2, never a traceback.

Example:
    keras-elmo --help
    keras-elmo data people-daily --out data/people_daily
"""

import argparse
import importlib
import os
import signal
import sys
import threading

from keras_elmo.process.cpu_setup import set_cpu_defaults

# Before anything imports TensorFlow (subcommand modules may, through keras_elmo).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
set_cpu_defaults()  # thread layout and oneDNN for this CPU (keras_elmo.process.cpu_setup)

#: Subcommands in the order `--help` lists them; each is the module `keras_elmo.cli.<name>`.
COMMANDS = ("data", "vocab", "train", "perplexity", "export", "embed", "neighbors")


def build_parser():
    """The argparse parser with every available subcommand (`parser.subcommands` maps each
    name to its own parser)."""
    parser = argparse.ArgumentParser(
        prog="keras-elmo",
        description="Train, convert, export and use ELMo biLMs (TensorFlow 2 / Keras 3).")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    parser.subcommands = subparsers.choices
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"keras_elmo.cli.{name}")
        except ModuleNotFoundError as error:
            if error.name == f"keras_elmo.cli.{name}":
                continue  # subcommand not part of this build
            raise
        module.add_parser(subparsers)
    return parser


def _terminate(signum, frame):  # noqa: ARG001 - the signal module's signature
    """SIGTERM unwinds like Ctrl-C, so writers remove their temporaries on the way out."""
    raise KeyboardInterrupt("SIGTERM")


def main(argv=None):
    """Runs one subcommand; returns the process exit code.

    SIGTERM (schedulers, `timeout`) stops a command like Ctrl-C: its temporary files are
    removed and it exits 143 (130 for Ctrl-C). `train` handles both itself: it finishes
    the step, writes a checkpoint and weights.hdf5, then exits the same way.
    """
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # reported under the subcommand's own usage line, as argparse would there
        parser.subcommands[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        return int(args.run(args) or 0)
    except (ValueError, FileNotFoundError, OSError) as error:
        print(f"keras-elmo {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as interrupt:
        by_sigterm = str(interrupt) == "SIGTERM"
        print(f"keras-elmo {args.command}: interrupted{' (SIGTERM)' if by_sigterm else ''}",
              file=sys.stderr)
        return 143 if by_sigterm else 130
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
