"""`keras-elmo`: command-line entry point.

Every subcommand lives in its own module `cli/<name>.py`, which defines
`add_parser(subparsers)` (cheap: no TensorFlow or Keras import) and `run(args)` (checks its
arguments, then starts Keras' backend (`keras_elmo.cli.keras_start`: `embed` and `neighbors`
run on TensorFlow, JAX or PyTorch; `train`, `export` and `perplexity` need TensorFlow) if it
needs it, then does the work). User errors (`ValueError`, `FileNotFoundError`, `OSError`, and
`MissingPackageError`: TensorFlow or the backend not installed, the message naming the
extra that installs it) become one line on stderr and exit code 2, never a traceback. An
error that says how to go on once its cause is fixed carries its own exit code: a storage
fault (`StorageError`: full disk, quota, read-only, permission;
`keras_elmo.process.storage_errors`) and a lost worker of a multi-worker run
(`WorkerLostError`) and a model download a rerun may finish (`keras_elmo.pretrained`) exit
75 (`EX_TEMPFAIL`), with nothing half-written left.
A storage fault that no writer named (TensorFlow's or HDF5's own error) is one line and 75
too.

Options may come before, between or after the positionals of every subcommand
(`keras-elmo embed MODEL --top IN OUT` is `keras-elmo embed --top MODEL IN OUT`): each
subcommand's parser is an `AnyOrderParser`, which reads its options first and then its
positionals from what is left (argparse's `parse_known_intermixed_args`). A list option
(`--train`, `--heldout`: nargs "+") takes every word after it up to the next option; a
positional after it needs `--` to end the list (`--heldout h.txt -- MODEL_DIR`).

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

from keras_elmo.process.keras_backend import MissingPackageError
from keras_elmo.process.storage_errors import StorageError, storage_errno
from keras_elmo.cli.tensorflow_start import set_start_defaults

# Before anything imports TensorFlow (subcommand modules may, through keras_elmo): its CPU
# settings and log level, as `import_tensorflow` sets them.
set_start_defaults()


class AnyOrderParser(argparse.ArgumentParser):
    """An `ArgumentParser` whose options may be anywhere among its positionals.

    A parser without subcommands parses intermixed: options first, then the positionals
    from the strings left over, so `MODEL --top IN OUT` fills MODEL, IN and OUT. A parser
    with subcommands (`keras-elmo`, `keras-elmo data`) parses as argparse does and hands
    the rest to the chosen subcommand's parser, which is an `AnyOrderParser` too
    (`add_subparsers` makes its parsers of the parent's class).

    Example:
        parser = AnyOrderParser(prog="keras-elmo")
        commands = parser.add_subparsers(dest="command", required=True)
        embed = commands.add_parser("embed")
        embed.add_argument("input")
        embed.add_argument("--top", action="store_true")
        parser.parse_args(["embed", "--top", "in.txt"]).input  # 'in.txt'
        parser.parse_args(["embed", "in.txt", "--top"]).top    # True
    """

    #: argparse's message for missing arguments, which `error` completes with a hint.
    _MISSING = "the following arguments are required: "

    def __init__(self, *args, **kwargs):
        self._list_options = []  # flags with nargs "+" or "*" (they take every word after them)
        self._intermixed = False  # inside parse_known_intermixed_args (which calls us back)
        self.subcommands = None  # the subparsers action, once add_subparsers is called
        super().__init__(*args, **kwargs)  # adds -h through add_argument

    def add_subparsers(self, **kwargs):
        """argparse's `add_subparsers`; remembers the action (`self.subcommands`)."""
        self.subcommands = super().add_subparsers(**kwargs)
        return self.subcommands

    def add_argument(self, *args, **kwargs):
        """argparse's `add_argument`; remembers the list options for the hint of `error`."""
        action = super().add_argument(*args, **kwargs)
        if action.option_strings and action.nargs in ("+", "*"):
            self._list_options.append(action.option_strings[0])
        return action

    def parse_known_args(self, args=None, namespace=None):
        """Options and positionals in any order (see the class docstring)."""
        if self.subcommands is not None:
            return super().parse_known_args(self._subcommand_first(args), namespace)
        if self._intermixed:
            return super().parse_known_args(args, namespace)
        self._intermixed = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixed = False

    def _subcommand_first(self, args):
        """`args` with the first subcommand name moved to the front, so the subcommand's
        options may come before it too (`data --out DIR people-daily`); this parser's own
        `-h` before the name keeps its place (it asks for this parser's help)."""
        args = list(sys.argv[1:] if args is None else args)
        first = _command_index(args, self.subcommands.choices)
        if not first or any(arg in ("-h", "--help") for arg in args[:first]):
            return args
        return [args[first]] + args[:first] + args[first + 1:]

    def error(self, message):
        """argparse's error; a positional missing after a list option gets a hint."""
        missing = message[len(self._MISSING):].split(", ") if message.startswith(
            self._MISSING) else []
        if self._list_options and any(not name.startswith("-") for name in missing):
            message += (f" (a list option, {' '.join(self._list_options)}, takes every word "
                        "after it up to the next option: put the positionals before it, or "
                        "end the list with --)")
        super().error(message)


#: Subcommands in the order `--help` lists them; each is the module `keras_elmo.cli.<name>`.
COMMANDS = ("data", "vocab", "train", "perplexity", "export", "embed", "neighbors",
            "models")


def build_parser():
    """The argparse parser with every available subcommand (`parser.subcommands.choices`
    maps each name to its own parser); options go anywhere in a subcommand
    (`AnyOrderParser`)."""
    parser = AnyOrderParser(
        prog="keras-elmo",
        description="Train, convert, export and use ELMo biLMs (Keras 3: embed and neighbors "
                    "on TensorFlow, JAX or PyTorch; train, perplexity and export on "
                    "TensorFlow).")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
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
    passes_unknown = getattr(args, "passes_unknown", None)  # `embed --runner`: Beam's options
    args.unknown = unknown
    if unknown and not (passes_unknown and passes_unknown(args)):
        # reported under the subcommand's own usage line, as argparse would there
        parser.subcommands.choices[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        return int(args.run(args) or 0)
    except (ValueError, FileNotFoundError, OSError, MissingPackageError) as error:
        print(f"keras-elmo {args.command}: error: {error}", file=sys.stderr)
        return getattr(error, "exit_code", 2)
    except Exception as error:  # noqa: BLE001 - only storage faults, the rest re-raised
        code = storage_errno(error)
        if code is None:
            raise
        first = next((line for line in str(error).splitlines() if line.strip()), "")
        print(f"keras-elmo {args.command}: error: {os.strerror(code).lower()} "
              f"({type(error).__name__}: {first.strip()[:300]})", file=sys.stderr)
        return StorageError.exit_code
    except KeyboardInterrupt as interrupt:
        by_sigterm = str(interrupt) == "SIGTERM"
        print(f"keras-elmo {args.command}: interrupted{' (SIGTERM)' if by_sigterm else ''}",
              file=sys.stderr)
        return 143 if by_sigterm else 130
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def console_main(argv=None):
    """The `keras-elmo` program (and `python -m keras_elmo.cli`): `main`'s exit code."""
    return main(argv)


def _command_index(args, names):
    """Where the subcommand is in `args`: the first word that is one of `names` (None if
    none is); the rule `AnyOrderParser` parses by."""
    return next((i for i, arg in enumerate(args) if arg in names), None)


if __name__ == "__main__":
    sys.exit(console_main())
