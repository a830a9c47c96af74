"""Plain-text corpora: one sentence per line, tokens separated by whitespace.

`expand_corpus` turns a glob (or a list of globs/paths) into a sorted list of files,
`read_sentences` streams token lists out of one file, and `atomic_writer` writes a file so
that a killed run never leaves a half-written file under the final name.

Example:
    >>> for path in expand_corpus("data/people_daily/train.txt"):
    ...     for tokens in read_sentences(path):
    ...         ...
"""

import contextlib
import glob
import os
import tempfile


def expand_corpus(pattern_or_paths):
    """Sorted list of the files matched by a glob, a path, or a list of either.

    Args:
        pattern_or_paths: a `str` (glob pattern or plain path; `~` is expanded) or a
            list/tuple of such strings.

    Returns:
        Sorted list of distinct file paths (directories are ignored).

    Raises:
        ValueError: when the input is empty or some pattern matches no file.

    Example:
        >>> expand_corpus("data/*.txt")
        ['data/a.txt', 'data/b.txt']
    """
    if isinstance(pattern_or_paths, (str, os.PathLike)):
        patterns = [pattern_or_paths]
    else:
        patterns = list(pattern_or_paths)
    if not patterns:
        raise ValueError("Expected at least one corpus file or glob pattern. Received: []")
    files = set()
    for pattern in patterns:
        pattern = os.path.expanduser(os.fspath(pattern))
        matches = [path for path in glob.glob(pattern) if os.path.isfile(path)]
        if not matches:
            raise ValueError(
                f"No corpus file matches {pattern!r}: expected a file path or a glob "
                "pattern such as 'data/train*.txt'.")
        files.update(matches)
    return sorted(files)


def read_sentences(path):
    """Yields the sentences of a one-sentence-per-line file as token lists.

    Lines are split on whitespace; blank lines are skipped. The file is streamed, never
    held in memory.

    Args:
        path: a UTF-8 text file, one sentence per line.

    Yields:
        `list[str]`, the tokens of one sentence (never empty).

    Example:
        >>> list(read_sentences("tiny.txt"))  # file "a b\\n\\nc\\n"
        [['a', 'b'], ['c']]
    """
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            tokens = line.split()
            if tokens:
                yield tokens


#: Permissions of a file made by `open(path, "w")` before the umask (mkstemp uses 0o600).
_DEFAULT_FILE_MODE = 0o666


def _current_umask():
    umask = os.umask(0)
    os.umask(umask)
    return umask


@contextlib.contextmanager
def atomic_writer(path, mode="w", encoding="utf-8"):
    """Opens a temporary file beside `path`; renames it onto `path` only on success.

    If the body raises (or the process is killed), `path` is untouched: either the old
    file or no file, never a half-written one. The temporary file is removed on errors.

    Args:
        path: the final file name; its directory must exist.
        mode: "w" (text, `encoding` used) or "wb" (bytes).

    Example:
        >>> with atomic_writer("out/train.txt") as handle:
        ...     handle.write("a b c\\n")
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"Expected mode 'w' or 'wb'. Received: mode={mode!r}")
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp_path = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp",
                                    dir=directory)
    try:
        if mode == "wb":
            handle = os.fdopen(fd, "wb")
        else:
            handle = os.fdopen(fd, "w", encoding=encoding, newline="\n")
        with handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp_path, _DEFAULT_FILE_MODE & ~_current_umask())
        os.replace(tmp_path, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp_path)
        raise
