"""Text input of every command: UTF-8 lines, one policy.

Policy (README "Input text"): every text file keras-elmo reads (corpora, held-out files,
sentences to embed, vocabularies) must be UTF-8. A line that is not is one error naming the
file, the 1-based line number, the token and the sentence's index, in every command (`vocab`, `train`, `perplexity`,
`embed`, `neighbors`); no byte is dropped or replaced silently. Lines end at `\\n`; a
trailing `\\r` is removed with it.

`read_text_lines` is the reader of the Python commands; `check_utf8` is the same check for
files that TensorFlow reads in-graph (`train`, `perplexity`), run once before the first step.
Imports only the standard library (the CLI runs it before TensorFlow loads).

Example:
>>> for number, text in read_text_lines("sentences.txt"): ...  # doctest: +SKIP
>>> check_utf8(["train.txt", "heldout.txt"])  # doctest: +SKIP
"""

import codecs
import re

#: Bytes read per block by `check_utf8`.
_BLOCK_BYTES = 1 << 20
#: The ASCII bytes `str.split()` splits on: where a token of a line's raw bytes ends.
_ASCII_SPACE = re.compile(rb"[\t\n\v\f\r\x1c-\x1f ]")


def not_utf8_error(path, line_number, raw, error):
    """The one-line `ValueError` of every command for line `line_number` (1-based) whose
    bytes `raw` are not UTF-8: it names the file, the line, the token holding the fault and
    the sentence's 0-based index (the key `keras-elmo embed` would have given it).

    Example:
    >>> raw = b"ok caf\\xe9 x"
    >>> try:
    ...     raw.decode("utf-8")
    ... except UnicodeDecodeError as error:
    ...     print(not_utf8_error("in.txt", 2, raw, error))
    in.txt, line 2: not UTF-8 (invalid continuation byte at byte 3 of token b'caf\\xe9', sentence 1)...
    """
    starts = [match.end() for match in _ASCII_SPACE.finditer(raw, 0, error.start)]
    start = starts[-1] if starts else 0
    after = _ASCII_SPACE.search(raw, error.start)
    token = raw[start:after.start() if after else len(raw)]
    return ValueError(f"{path}, line {line_number}: not UTF-8 ({error.reason} at byte "
                      f"{error.start - start} of token {token!r}, sentence {line_number - 1}); "
                      "expected UTF-8 text, one sentence per line (a file's invalid bytes are "
                      "refused, never dropped).")


def read_text_lines(path):
    """Yields `(line_number, text)` per line (1-based), newline removed, streaming.

    Raises:
        ValueError: a line is not UTF-8 (naming the file and the line).
    """
    with open(path, "rb") as handle:
        for line_number, raw in enumerate(handle, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise not_utf8_error(path, line_number, raw, error) from None
            yield line_number, text.rstrip("\r\n")


def check_utf8(paths):
    """Checks that every file is UTF-8 (blocks of 1 MB; line by line only to name a fault).

    Args:
        paths: file paths.

    Raises:
        ValueError: naming the first file and line that is not UTF-8.
    """
    for path in paths:
        decoder = codecs.getincrementaldecoder("utf-8")("strict")
        try:
            with open(path, "rb") as handle:
                for block in iter(lambda: handle.read(_BLOCK_BYTES), b""):
                    decoder.decode(block)
                decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            for _ in read_text_lines(path):  # raises, naming the line
                pass
