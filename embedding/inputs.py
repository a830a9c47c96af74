"""Checks and readers of user input that import no TensorFlow (the CLI runs them first, so
that a bad path or argument costs one clear line and no model loading).

Example:
>>> check_paths("sentences.txt", "out/elmo.hdf5")  # doctest: +SKIP
>>> for index, text in read_lines("sentences.txt"): ...  # doctest: +SKIP
>>> list(tokenized_lines([(0, "a b"), (1, "")], "whitespace"))
[(0, 'a b', ['a', 'b']), (1, '', [])]
>>> find_word(["他", "会", "说"], "会")
1
"""

import itertools
import os

from keras_elmo.text.text_files import read_text_lines
from keras_elmo.text.tokenizers import tokenize
from keras_elmo.validation import check_int


def count_lines_and_words(path):
    """`(lines, words)` of a file, streaming: a last line without a newline counts; words
    are what ASCII whitespace separates, which every tokeniser splits at least as finely
    (`keras_elmo.text.tokenizers`): never more than the tokens the file will give.

    Example:
    >>> count_lines_and_words("sentences.txt")  # doctest: +SKIP
    (2, 9)
    """
    lines = words = 0
    rest = b""
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            block = rest + block
            end = block.rfind(b"\n") + 1  # whole lines only: no word counted twice
            lines += block.count(b"\n", 0, end)
            words += len(block[:end].split())
            rest = block[end:]
    return lines + bool(rest), words + len(rest.split())


def read_lines(path):
    """Yields `(index, text)` per line (0-based index: the sentence's dataset key), UTF-8,
    newline removed: `keras_elmo.text.text_files.read_text_lines` counted from 0.

    Raises:
        ValueError: a line is not UTF-8 (the one policy and message of every command: files
            are refused, never repaired, naming the 1-based line and the token).
    """
    for line_number, text in read_text_lines(path):
        yield line_number - 1, text


def tokenized_lines(lines, tokenizer="whitespace", lines_per_call=256):
    """Yields `(index, text, tokens)` for `(index, text)` pairs, tokenised by `tokenizer`
    (`keras_elmo.text.tokenizers`: whitespace, unicode-script or jieba), a batch at a time."""
    lines = iter(lines)
    while True:
        batch = list(itertools.islice(lines, lines_per_call))
        if not batch:
            return
        for (index, text), tokens in zip(batch, tokenize([t for _, t in batch], tokenizer)):
            yield index, text, tokens


def check_paths(input_path, output_path):
    """Refuses a missing input, an output that is a directory or in a missing directory."""
    input_path, output_path = os.fspath(input_path), os.fspath(output_path)
    if not os.path.isfile(input_path):
        what = "is a directory" if os.path.isdir(input_path) else "does not exist"
        raise FileNotFoundError(f"input file {input_path} {what}; expected a UTF-8 text "
                                "file, one tokenised sentence per line.")
    if os.path.isdir(output_path):
        raise ValueError(f"output {output_path} is a directory; expected an .hdf5 file path.")
    directory = os.path.dirname(os.path.abspath(output_path))
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"output directory {directory} does not exist (create it "
                                f"first); received output path {output_path}.")
    if os.path.abspath(input_path) == os.path.abspath(output_path):
        raise ValueError(f"output {output_path} is the input file; expected another path.")


def find_word(tokens, word, occurrence=1):
    """0-based position of the `occurrence`-th (1-based) `word` in `tokens`.

    Raises:
        ValueError: naming the word, the occurrence asked for and the sentence's tokens.
    """
    positions = [i for i, token in enumerate(tokens) if token == word]
    check_int("occurrence", occurrence)
    if len(positions) < occurrence:
        found = f"occurs {len(positions)} time(s)" if positions else "does not occur"
        raise ValueError(f"the word {word!r} {found} in the sentence (occurrence "
                         f"{occurrence} asked for); its tokens are {tokens}. The sentence "
                         "must be tokenised like the corpus (see --tokenizer).")
    return positions[occurrence - 1]
