"""Word vocabulary of the biLM softmax: `<S>`, `</S>`, `<UNK>` first, then by frequency.

The file format is bilm-tf's: one token per line, UTF-8, the three special tokens on
lines 1-3 (docs/model.md section 7).

Example:
    >>> vocab = build_vocabulary(["data/train.txt"], min_count=3)
    >>> vocab.save("data/vocab.txt")
    >>> Vocabulary.load("data/vocab.txt").encode(["中国", "没见过的词"])
    [17, 2]
"""

import collections
import os

from keras_elmo.constants import BOS_TOKEN, EOS_TOKEN, UNK_TOKEN
from keras_elmo.process.atomic_file import atomic_writer
from keras_elmo.text.text_files import read_text_lines
from keras_elmo.training.corpus import read_sentences

#: The tokens every vocabulary starts with, in this order (ids 0, 1, 2).
SPECIAL_TOKENS = (BOS_TOKEN, EOS_TOKEN, UNK_TOKEN)


class Vocabulary:
    """An ordered list of distinct tokens with a token -> id map.

    Args:
        tokens: list of `str`; the first three must be `"<S>"`, `"</S>"`, `"<UNK>"`; no
            duplicates, no empty tokens, no whitespace inside a token.

    Example:
        >>> vocab = Vocabulary(["<S>", "</S>", "<UNK>", "的", "中国"])
        >>> len(vocab), vocab.token_to_id("中国"), vocab.token_to_id("火星")
        (5, 4, 2)
    """

    def __init__(self, tokens):
        tokens = list(tokens)
        if tuple(tokens[:len(SPECIAL_TOKENS)]) != SPECIAL_TOKENS:
            raise ValueError(
                f"Expected a vocabulary starting with {list(SPECIAL_TOKENS)}. "
                f"Received first tokens: {tokens[:len(SPECIAL_TOKENS)]}")
        ids = {}
        for index, token in enumerate(tokens):
            _check_token(token, f"token {index}")
            if token in ids:
                raise ValueError(
                    f"Duplicate vocabulary token {token!r} at positions {ids[token]} and "
                    f"{index}; expected each token once.")
            ids[token] = index
        self._tokens = tokens
        self._ids = ids

    # --- file format ------------------------------------------------------------------------
    @classmethod
    def load(cls, path):
        """Reads a vocabulary file (one token per line, specials on lines 1-3).

        Raises:
            FileNotFoundError: no such file.
            ValueError: naming the file and line, for a missing special token, a blank
                line, a token with whitespace, or a duplicate token.
        """
        tokens = []
        seen = {}
        if not os.path.isfile(path):
            raise FileNotFoundError(f"vocabulary file not found: {path} (expected one token "
                                    "per line, <S>, </S>, <UNK> first).")
        for line_number, token in read_text_lines(path):
            where = f"{path}, line {line_number}"
            _check_token(token, where)
            if line_number <= len(SPECIAL_TOKENS):
                expected = SPECIAL_TOKENS[line_number - 1]
                if token != expected:
                    raise ValueError(
                        f"{where}: expected the special token {expected!r} (a vocabulary "
                        f"file starts with {', '.join(SPECIAL_TOKENS)}). Received: {token!r}")
            if token in seen:
                raise ValueError(
                    f"{where}: duplicate token {token!r}, first seen on line "
                    f"{seen[token]}; expected each token once.")
            seen[token] = line_number
            tokens.append(token)
        if len(tokens) < len(SPECIAL_TOKENS):
            raise ValueError(
                f"{path}: expected at least the {len(SPECIAL_TOKENS)} special tokens "
                f"{', '.join(SPECIAL_TOKENS)}. Received {len(tokens)} line(s).")
        return cls(tokens)

    def save(self, path):
        """Writes one token per line (atomically: a killed run leaves no half file; its
        size checked against the free space first)."""
        needed = sum(len(token.encode("utf-8")) + 1 for token in self._tokens)
        with atomic_writer(path, what="the vocabulary", needed=needed) as handle:
            for token in self._tokens:
                handle.write(token + "\n")

    # --- lookups ----------------------------------------------------------------------------
    @property
    def tokens(self):
        """The tokens in id order (a copy)."""
        return list(self._tokens)

    @property
    def bos_id(self):
        return self._ids[BOS_TOKEN]

    @property
    def eos_id(self):
        return self._ids[EOS_TOKEN]

    @property
    def unk_id(self):
        return self._ids[UNK_TOKEN]

    def __len__(self):
        return len(self._tokens)

    def __contains__(self, token):
        return token in self._ids

    def token_to_id(self, token):
        """The id of `token`, or `unk_id` when it is not in the vocabulary."""
        return self._ids.get(token, self._ids[UNK_TOKEN])

    def id_to_token(self, token_id):
        """The token with id `token_id` (0 <= token_id < len(self))."""
        if not 0 <= token_id < len(self._tokens):
            raise ValueError(
                f"Expected a token id in [0, {len(self._tokens)}). Received: {token_id}")
        return self._tokens[token_id]

    def encode(self, tokens):
        """Ids of a token list (`<UNK>` for unknown tokens): list[str] -> list[int]."""
        unk_id = self._ids[UNK_TOKEN]
        return [self._ids.get(token, unk_id) for token in tokens]

    def __repr__(self):
        return f"Vocabulary(size={len(self._tokens)})"


def _check_token(token, where):
    if not isinstance(token, str) or not token or token != token.strip() or len(token.split()) != 1:
        raise ValueError(
            f"{where}: expected a non-empty token without whitespace. Received: {token!r}")


def token_counts(paths, tokenizer="whitespace"):
    """Counts the tokens of one-sentence-per-line files, streaming.

    Lines are tokenised by `tokenizer` (`keras_elmo.text.tokenizers`, whitespace by default), as
    training will. The special tokens are not counted. Returns a `collections.Counter`.
    """
    counts = collections.Counter()
    for path in paths:
        for tokens in read_sentences(path, tokenizer):
            counts.update(tokens)
    for token in SPECIAL_TOKENS:
        counts.pop(token, None)
    return counts


def vocabulary_from_counts(counts, min_count=1, max_size=None):
    """The specials, then tokens with count >= `min_count` by count desc, ties by token.

    Args:
        counts: mapping token -> count.
        min_count: int >= 1, drop rarer tokens.
        max_size: None or int >= 3: the total size, specials included; the least frequent
            tokens are cut.
    """
    if isinstance(min_count, bool) or not isinstance(min_count, int) or min_count < 1:
        raise ValueError(
            f"Expected min_count to be an integer >= 1. Received: min_count={min_count!r}")
    if max_size is not None and (isinstance(max_size, bool) or not isinstance(max_size, int)
                                 or max_size < len(SPECIAL_TOKENS)):
        raise ValueError(
            f"Expected max_size to be None or an integer >= {len(SPECIAL_TOKENS)} (the special "
            f"tokens count). Received: max_size={max_size!r}")
    kept = sorted(((token, count) for token, count in counts.items()
                   if count >= min_count and token not in SPECIAL_TOKENS),
                  key=lambda item: (-item[1], item[0]))
    tokens = list(SPECIAL_TOKENS) + [token for token, _ in kept]
    if max_size is not None:
        tokens = tokens[:max_size]
    return Vocabulary(tokens)


def build_vocabulary(paths, min_count=1, max_size=None):
    """Builds a `Vocabulary` from one-sentence-per-line files (see `vocabulary_from_counts`).

    Args:
        paths: list of file paths (see `keras_elmo.training.corpus.expand_corpus` for globs).
        min_count: int >= 1.
        max_size: None or the total size, specials included.

    Example:
        >>> build_vocabulary(["train.txt"], min_count=2, max_size=50000)
        Vocabulary(size=...)
    """
    if isinstance(paths, str):
        paths = [paths]
    vocabulary_from_counts({}, min_count, max_size)  # check the arguments before reading
    return vocabulary_from_counts(token_counts(paths), min_count, max_size)
