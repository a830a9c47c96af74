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


def read_sentences(path, tokenizer="whitespace"):
    """Yields the sentences of a one-sentence-per-line file as token lists.

    Lines are tokenised by `tokenizer` (`keras_elmo.tokenizers`; whitespace by default);
    blank lines are skipped. The file is streamed, never held in memory; under jieba the
    segmented copy of `keras_elmo.training.segmented_corpus` is read (segmented once).

    Args:
        path: a UTF-8 text file, one sentence per line.
        tokenizer: a name of `keras_elmo.tokenizers.TOKENIZERS`.

    Yields:
        `list[str]`, the tokens of one sentence (never empty).

    Example:
        >>> list(read_sentences("tiny.txt"))  # file "a b\\n\\nc\\n"
        [['a', 'b'], ['c']]
    """
    if tokenizer != "whitespace":
        from keras_elmo.tokenizers import is_in_graph
        from keras_elmo.training.segmented_corpus import segment_files

        if is_in_graph(tokenizer):
            yield from _tokenized_sentences(path, tokenizer)
            return
        path = segment_files([path], tokenizer)[0]
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            tokens = line.split()
            if tokens:
                yield tokens


def _tokenized_sentences(path, tokenizer, lines_per_call=4096):
    from keras_elmo.tokenizers import tokenize

    with open(path, encoding="utf-8") as handle:
        while True:
            lines = [line for _, line in zip(range(lines_per_call), handle)]
            if not lines:
                return
            yield from (tokens for tokens in tokenize(lines, tokenizer) if tokens)
