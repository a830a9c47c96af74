"""Plain-text corpora: one sentence per line, tokens separated by whitespace.

`expand_corpus` turns a glob (or a list of globs/paths) into a sorted list of files,
and `read_sentences` streams token lists out of one file.

Example:
    >>> for path in expand_corpus("data/people_daily/train.txt"):
    ...     for tokens in read_sentences(path):
    ...         ...
"""

import glob
import os

from keras_elmo.text_files import read_text_lines


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
        path: a UTF-8 text file, one sentence per line (a line that is not UTF-8 is a
            `ValueError` naming file and line, `keras_elmo.text_files`).

    Yields:
        `list[str]`, the tokens of one sentence (never empty).

    Example:
        >>> list(read_sentences("tiny.txt"))  # file "a b\\n\\nc\\n"
        [['a', 'b'], ['c']]
    """
    for _, line in read_text_lines(path):
        tokens = line.split()
        if tokens:
            yield tokens
