"""Plain-text corpora: one sentence per line, tokens separated by whitespace.

`expand_corpus` turns a glob (or a list of globs/paths) into a sorted list of files,
and `read_sentences` streams token lists out of one file. A run's corpus is stored in its
options.json (`train_prefix`): `stored_corpus_files` finds it from any working directory,
`same_corpus` tells whether `--train` names it by another path.

Example:
    >>> for path in expand_corpus("data/people_daily/train.txt"):
    ...     for tokens in read_sentences(path):
    ...         ...
"""

import glob
import os

from keras_elmo.text.text_files import read_text_lines


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

    Lines are tokenised by `tokenizer` (`keras_elmo.text.tokenizers`; whitespace by default);
    blank lines are skipped. The file is streamed, never held in memory; under jieba the
    segmented copy of `keras_elmo.training.segmented_corpus` is read (segmented once).

    Args:
        path: a UTF-8 text file, one sentence per line (a line that is not UTF-8 is a
            `ValueError` naming file and line, `keras_elmo.text.text_files`).
        tokenizer: a name of `keras_elmo.text.tokenizers.TOKENIZERS`.

    Yields:
        `list[str]`, the tokens of one sentence (never empty).

    Example:
        >>> list(read_sentences("tiny.txt"))  # file "a b\\n\\nc\\n"
        [['a', 'b'], ['c']]
    """
    if tokenizer != "whitespace":
        from keras_elmo.text.tokenizers import is_in_graph
        from keras_elmo.training.segmented_corpus import segment_files

        if is_in_graph(tokenizer):
            yield from _tokenized_sentences(path, tokenizer)
            return
        path = segment_files([path], tokenizer)[0]
    for _, line in read_text_lines(path):
        tokens = line.split()
        if tokens:
            yield tokens


def _tokenized_sentences(path, tokenizer, lines_per_call=4096):
    from keras_elmo.text.tokenizers import tokenize

    lines = (line for _, line in read_text_lines(path))
    while True:
        chunk = [line for _, line in zip(range(lines_per_call), lines)]
        if not chunk:
            return
        yield from (tokens for tokens in tokenize(chunk, tokenizer) if tokens)


def stored_corpus_files(train_prefix, model_dir):
    """The files of a corpus stored in `model_dir`'s options.json, from any directory.

    Raises:
        ValueError: the stored corpus is not found (naming it and the directory).
    """
    from keras_elmo.training.config import resolve_stored_paths

    try:
        return expand_corpus(resolve_stored_paths(train_prefix, model_dir))
    except ValueError as error:
        raise ValueError(f"{model_dir} was trained on {train_prefix!r}, which is not found "
                         f"({error}); give the corpus with --train.") from None


def absolute_corpus(train_prefix, model_dir):
    """A stored corpus value made absolute (runs before stored it as typed)."""
    from keras_elmo.training.config import resolve_stored_paths

    resolved = resolve_stored_paths(train_prefix, model_dir)
    if resolved is None:
        return None
    if isinstance(resolved, str):
        return os.path.abspath(resolved)
    return [os.path.abspath(path) for path in resolved]


def same_corpus(given, saved_config, model_dir):
    """True when the corpus `given` (globs) is the one `saved_config` was trained on.

    The same files after links and relative paths are resolved; or, when the saved corpus
    is no longer where it was (moved), files with the same token count (`n_train_tokens`).
    """
    files = expand_corpus(given)
    try:
        saved_files = stored_corpus_files(saved_config.train_prefix, model_dir)
    except ValueError:
        from keras_elmo.training.dataset import corpus_size

        return corpus_size(files, saved_config.tokenizer)[1] == saved_config.n_train_tokens
    return {os.path.realpath(f) for f in files} == {os.path.realpath(f) for f in saved_files}
