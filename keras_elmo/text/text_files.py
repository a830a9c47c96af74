"""Text input of every command: UTF-8 lines, one policy.

Policy (README "Input text"): every text file keras-elmo reads (corpora, held-out files,
sentences to embed, vocabularies) must be UTF-8. A line that is not is an error naming the
file and the 1-based line number, in every command (`vocab`, `train`, `perplexity`,
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

#: Bytes read per block by `check_utf8`.
_BLOCK_BYTES = 1 << 20


def _not_utf8(path, line_number, error):
    return ValueError(f"{path}, line {line_number}: not UTF-8 ({error.reason} at byte "
                      f"{error.start} of the line); expected UTF-8 text, one sentence per line.")


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
                raise _not_utf8(path, line_number, error) from None
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
