"""Text input of every command: UTF-8 lines, one policy.

Policy (README "Input text"): every text file keras-elmo reads (corpora, held-out files,
sentences to embed, vocabularies) must be UTF-8. A line that is not is one error naming the
file, the line (1-based, the only numbering of the message), the token and the command that
converts the file (`iconv`), in every command (`vocab`, `train`, `perplexity`, `embed`,
`neighbors`); no byte is dropped or replaced silently. Lines end at `\\n`; a trailing `\\r`
is removed with it.

`read_text_lines` is the reader of the Python commands; `check_utf8` is the same check for
files that TensorFlow reads in-graph (`train`, `perplexity`), run once before the first step;
`check_text_files` adds what the command line checks of an input before TensorFlow starts
(a readable file; whether it holds any text). Imports only the standard library (the CLI
runs it before TensorFlow loads).

Example:
>>> for number, text in read_text_lines("sentences.txt"): ...  # doctest: +SKIP
>>> check_utf8(["train.txt", "heldout.txt"])  # doctest: +SKIP
>>> check_text_files(["empty.txt", "train.txt"], "corpus file")  # doctest: +SKIP
['empty.txt']
"""

import codecs
import os
import re
import shlex

#: Bytes read per block by `check_utf8`.
_BLOCK_BYTES = 1 << 20
#: The ASCII bytes `str.split()` splits on: where a token of a line's raw bytes ends.
_ASCII_SPACE = re.compile(rb"[\t\n\v\f\r\x1c-\x1f ]")
#: How a file that starts with one of these marks is encoded (the `iconv` name).
#: What a text input holds, as the errors of `check_text_files` say by default.
SENTENCES = "a UTF-8 text file, one sentence per line"
_BYTE_ORDER_MARKS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),
                     (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16"))


def not_utf8_error(path, line_number, raw, error):
    """The one-line `ValueError` of every command for line `line_number` (1-based) whose
    bytes `raw` are not UTF-8: it names the file, the line, the token holding the fault and
    the `iconv` command that converts the file (`conversion_hint`).

    Example:
    >>> raw = b"ok caf\\xe9 x"
    >>> try:
    ...     raw.decode("utf-8")
    ... except UnicodeDecodeError as error:
    ...     print(not_utf8_error("in.txt", 2, raw, error))
    in.txt, line 2: not UTF-8 (invalid continuation byte at byte 3 of token b'caf\\xe9'); ...
    """
    starts = [match.end() for match in _ASCII_SPACE.finditer(raw, 0, error.start)]
    start = starts[-1] if starts else 0
    after = _ASCII_SPACE.search(raw, error.start)
    token = raw[start:after.start() if after else len(raw)]
    return ValueError(f"{path}, line {line_number}: not UTF-8 ({error.reason} at byte "
                      f"{error.start - start} of token {token!r}); expected UTF-8 text, one "
                      "sentence per line (invalid bytes are refused, never dropped); "
                      f"{conversion_hint(path, line_number, raw)}")


def conversion_hint(path, line_number, raw):
    """How to convert the file whose line `line_number` has the bytes `raw` (not UTF-8):
    an `iconv` command for the encoding that the bytes suggest, to copy and run.

    A byte order mark on line 1 names UTF-16 or UTF-32. Bytes that GB18030 (the superset of
    GBK and GB2312, the encodings of most Chinese text that is not UTF-8) reads get its
    command, said as a condition: other encodings' bytes may read as GB18030 too. Others get
    the command with the encoding to fill in.

    Example:
    >>> conversion_hint("新闻.txt", 1, "人民".encode("gbk"))
    "if it is GBK/GB18030 (Chinese), convert it: iconv -f GB18030 -t UTF-8 '新闻.txt' > '新闻.txt.utf8'"
    >>> conversion_hint("a.txt", 3, b"caf\\xe9 au lait")
    'convert it from its encoding: iconv -f ENCODING -t UTF-8 a.txt > a.txt.utf8 (iconv -l lists the names)'
    """
    command = "iconv -f {} -t UTF-8 " + f"{shlex.quote(path)} > {shlex.quote(path + '.utf8')}"
    if line_number == 1:
        for mark, encoding in _BYTE_ORDER_MARKS:
            if raw.startswith(mark):
                return (f"it starts with a {encoding} byte order mark: "
                        f"{command.format(encoding)}")
    try:
        raw.decode("gb18030")
    except UnicodeDecodeError:
        return (f"convert it from its encoding: {command.format('ENCODING')} (iconv -l lists "
                "the names)")
    return f"if it is GBK/GB18030 (Chinese), convert it: {command.format('GB18030')}"


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
        _scan(path)


def check_text_files(paths, what="input file", expected=SENTENCES):
    """Checks text files before any work: each a readable file, UTF-8 throughout (one pass,
    as `check_utf8`); returns the ones that hold no text (nothing, or whitespace only).

    Args:
        paths: file paths.
        what: what the files are, for the errors (`"corpus file"`).
        expected: what they should hold, for the errors.

    Returns:
        list of the paths without text, for the caller to refuse or to mention.

    Raises:
        FileNotFoundError: a path that does not exist or is no regular file.
        PermissionError: a file this user may not read.
        ValueError: naming the first file and line that is not UTF-8.
    """
    empty = []
    for path in paths:
        path = os.fspath(path)
        if not os.path.isfile(path):
            found = ("is a directory" if os.path.isdir(path) else "is not a regular file"
                     if os.path.exists(path) else "does not exist")
            raise FileNotFoundError(f"{what} {path} {found}; expected {expected}.")
        try:
            holds_text = _scan(path)
        except PermissionError:
            raise PermissionError(f"{what} {path} cannot be read (permission denied); "
                                  f"expected {expected} that this user may read.") from None
        if not holds_text:
            empty.append(path)
    return empty


def _scan(path):
    """Reads `path` once: raises for a line that is not UTF-8; returns whether any character
    is not whitespace (what `str.split()` splits on)."""
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    holds_text = False
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(_BLOCK_BYTES), b""):
                text = decoder.decode(block)
                holds_text = holds_text or (bool(text) and not text.isspace())
            decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        for _ in read_text_lines(path):  # raises, naming the line
            pass
    return holds_text
