"""The files a subcommand is given, checked before TensorFlow starts.

Every `run(args)` of the command line checks its numbers, then its paths, then imports
TensorFlow (`keras_elmo.cli.tensorflow_start.import_tensorflow`) and loads weights: a bad
path costs one line within a second, not the seconds TensorFlow and the model take to load,
nor a training run's minutes. Each check here reads as little as it must and imports no
TensorFlow:

- `check_text_inputs`: text files to read are files, readable and UTF-8 throughout, with
  text in them where the command needs some (`keras_elmo.text.text_files.check_text_files`:
  one pass over each file, a fault named by its 1-based line);
- `check_json_input`: a JSON file (mix weights, a `--config`) exists and parses;
- `check_writable`: where an output will go, no file stands in the way of its folders and
  the nearest existing folder takes writes. A read-only filesystem or a folder without
  write permission is the `StorageError` the writer would raise later (the same line, exit
  75: `keras_elmo.process.storage_errors`), raised before any work. A full disk is left to
  the writers, which know how much they need.

Example:
    check_text_inputs([args.corpus], "corpus file", no_text=f"corpus {args.corpus} has no ...")
    check_writable(args.out, "the vocabulary")
"""

import errno
import os

from keras_elmo.process.storage_errors import StorageError, check_free_space
from keras_elmo.text.text_files import SENTENCES, check_text_files

#: How the errors name a `--mix-weights` file and say what it holds
#: (`keras_elmo.export.mix_weights`, whose own errors read the same).
MIX_WEIGHTS = ("mix weights file", 'a JSON file {"scalar_parameters": [...], "gamma": ...}')
#: What a token-per-line file (`--vocab`) holds, for its errors.
TOKENS = "a UTF-8 text file, one token per line"


def check_text_inputs(paths, what, no_text=None, expected=SENTENCES):
    """Checks text files before any work; returns those that hold no text.

    Args:
        paths: the files (a glob already expanded).
        what: what they are, for the error (`"corpus file"`, `"held-out file"`).
        no_text: the message of the `ValueError` raised when no file of `paths` holds
            text (only whitespace, or nothing); None: the caller decides.
        expected: what the files should hold, for the errors.

    Returns:
        the paths that hold no text.

    Raises:
        FileNotFoundError / PermissionError / ValueError: one line naming the file (and, for
            a line that is not UTF-8, the line and the `iconv` command that converts it).
    """
    paths = [os.fspath(path) for path in paths]
    empty = check_text_files(paths, what, expected)
    if no_text is not None and paths and len(empty) == len(paths):
        raise ValueError(no_text)
    return empty


def check_json_input(path, what, expected):
    """The parsed JSON of `path` (`keras_elmo.formats.json_fields.read_json`: a missing file
    or bad JSON is one line naming it, `what` and `expected`)."""
    from keras_elmo.formats.json_fields import read_json

    return read_json(path, what, expected)


def check_writable(path, what):
    """Checks that `path` (a file or folder to write, made with its missing folders) can be
    written, before any work.

    Args:
        path: the output's path.
        what: what is written there, as the writer's `StorageError` names it
            (`"the SavedModel"`, `"the vocabulary"`).

    Raises:
        ValueError: a file stands where a folder of `path` must be.
        StorageError: the nearest existing folder is on a read-only filesystem or takes no
            writes from this user (exit 75, as when the writer meets it).
    """
    path = os.fspath(path)
    folder = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
    while not os.path.exists(folder) and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
    if not os.path.isdir(folder):
        raise ValueError(f"cannot write {what} ({path}): {_shown(folder, path)} is a file, not "
                         "a directory; expected a path whose folders are folders (or can be "
                         "made).")
    check_free_space(path, 0, what)  # a read-only filesystem: the writer's line
    if not os.access(folder, os.W_OK | os.X_OK):
        raise StorageError(errno.EACCES, path, what, intact="nothing was written")


def _shown(folder, path):
    """`folder` as the user wrote it, when it is a part of `path` (else absolute)."""
    relative = path
    while relative and os.path.abspath(relative) != folder:
        parent = os.path.dirname(relative)
        if parent == relative:
            return folder
        relative = parent
    return relative or folder
