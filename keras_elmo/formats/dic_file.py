"""The `.dic` vocabulary files of a vocabulary model: "token<TAB>id" lines.

ELMoForManyLangs writes `char.dic` (one character per line, plus the specials `<oov> <pad>
<bow> <eow> <bos> <eos>`) and `word.dic` (words, plus `<oov> <pad>` and usually `<bos>
<eos>`); a keras-elmo model directory of a vocabulary model keeps the same two files
(`keras_elmo.formats.model_files`). Each id is the token's row of its embedding table.

A line is stripped of surrounding whitespace before it is split, as EFML reads it: the
line of the full-width space U+3000 is left with its id alone, and such a line means U+3000.
So a token that is, starts or ends with any other whitespace cannot be written.

Example:
>>> write_dic("char.dic", {"<oov>": 0, "<pad>": 1, "a": 2})  # doctest: +SKIP
>>> read_dic("char.dic", ("<oov>", "<pad>")).token_ids  # doctest: +SKIP
{'<oov>': 0, '<pad>': 1, 'a': 2}
"""

import dataclasses

from keras_elmo.process.atomic_file import atomic_writer

CHAR_SPECIALS = ("<oov>", "<pad>", "<bow>", "<eow>", "<bos>", "<eos>")
WORD_SPECIALS = ("<oov>", "<pad>")
#: Word specials EFML looks up with `<oov>` as the fallback, as we do.
WORD_OPTIONAL_SPECIALS = ("<bos>", "<eos>")
#: The token of a .dic line holding only an id.
FULL_WIDTH_SPACE = "\u3000"


class DicFileError(ValueError):
    """A .dic file that cannot be read as a vocabulary (the message names the file)."""


@dataclasses.dataclass(frozen=True)
class DicVocabulary:
    """A .dic file: `token_ids` (token -> row of its embedding table) and `special_ids`
    ("<oov>" -> row, ...; for words, a missing "<bos>" or "<eos>" has `<oov>`'s row)."""

    path: str
    token_ids: dict
    special_ids: dict


def read_dic(path, specials, optional_specials=()):
    """`DicVocabulary` of a "token<TAB>id" file.

    Each line is stripped first, as EFML does; a line left with its id alone is U+3000.
    `specials` must be present; each of `optional_specials` missing gets `<oov>`'s id (EFML
    looks words up with that fallback).

    Example:
    >>> chars = read_dic("tests/fixtures/efml/tiny_zip/char.dic", CHAR_SPECIALS)  # doctest: +SKIP
    >>> chars.token_ids["\u3000"], chars.special_ids["<bow>"]  # doctest: +SKIP
    (6, 3)

    Raises:
        FileNotFoundError: no file at `path`.
        DicFileError: not UTF-8, a line that is not "token<TAB>id", a repeated token or id,
            a missing special (one line naming the file and the line).
    """
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError as error:
        raise DicFileError(f"{path}: is not UTF-8 ({error.reason} at byte {error.start}); "
                           "expected 'token<TAB>id' lines.") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline ending the last line
    token_ids, tokens_of_ids = {}, {}
    for number, line in enumerate(lines, 1):
        fields = line.strip().split("\t")
        if len(fields) == 1:
            fields.insert(0, FULL_WIDTH_SPACE)
        if len(fields) != 2 or not fields[1].isascii() or not fields[1].isdigit():
            raise DicFileError(f"{path}: line {number} is {line!r}; expected 'token<TAB>id' "
                               "with a non-negative integer id.")
        token, index = fields[0], int(fields[1])
        if token in token_ids:
            raise DicFileError(f"{path}: line {number} repeats the token {token!r} (first "
                               f"with id {token_ids[token]}); expected each token once.")
        if index in tokens_of_ids:
            raise DicFileError(f"{path}: line {number} gives id {index} to {token!r}, "
                               f"already the id of {tokens_of_ids[index]!r}; expected each "
                               "id once.")
        token_ids[token], tokens_of_ids[index] = index, token
    missing = [name for name in specials if name not in token_ids]
    if missing:
        raise DicFileError(f"{path}: has no line for {', '.join(missing)}; expected the "
                           f"specials {' '.join(specials)}.")
    special_ids = {name: token_ids[name] for name in specials}
    for name in optional_specials:
        special_ids[name] = token_ids.get(name, token_ids["<oov>"])
    return DicVocabulary(path, token_ids, special_ids)


def write_dic(path, token_ids):
    """Writes `token_ids` (token -> id) as a .dic file, in id order, atomically.

    Raises:
        ValueError: a token the format cannot hold (empty, with a tab or a newline, or
            with whitespace at either end other than the lone U+3000).
    """
    lines = []
    for token, index in sorted(token_ids.items(), key=lambda item: item[1]):
        if token == FULL_WIDTH_SPACE:
            lines.append(f"{token}\t{index}\n")  # read back as the id alone: U+3000
            continue
        if not token or "\t" in token or "\n" in token or token != token.strip():
            raise ValueError(f"{path}: the token {token!r} (id {index}) cannot be written to "
                             "a .dic file; expected tokens without tabs, newlines or "
                             "surrounding whitespace.")
        lines.append(f"{token}\t{index}\n")
    text = "".join(lines)
    with atomic_writer(path, what="the vocabulary (.dic)",
                       needed=len(text.encode("utf-8"))) as handle:
        handle.write(text)
