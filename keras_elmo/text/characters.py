"""Tokens to ELMo character ids in Python/numpy, and the token mask of char ids.

A token is its UTF-8 bytes (invalid code points dropped), cut to `max_characters_per_token - 2`
bytes, framed by begin-of-word / end-of-word and padded:
`[258, b1, ..., bn, 259, 260, ...]`; the literal tokens `<S>` and `</S>` get the sentence
boundary ids 256 / 257 instead of their bytes. Every id is then shifted by +1 so that an
all-zero row means "no token here" (docs/model.md section 1). In a sentence, an empty
string token is no token: its row is all zeros wherever it stands, and the biLM reads the
sentence as if it were not there (`keras_elmo.layers.token_compaction`).

No TensorFlow here: it runs under every Keras backend. The same ids from string tensors
inside a TensorFlow graph: `keras_elmo.text.string_char_ids`.

Example:
>>> batch_to_ids([["Hello", "world"], ["你好"]]).shape
(2, 2, 50)
>>> token_to_char_ids("a")[:4]
[259, 98, 260, 261]
"""

import functools

import numpy as np
from keras import ops

from keras_elmo import constants

_SPECIAL_TOKENS = {
    constants.BOS_TOKEN: constants.BEGIN_SENTENCE_CHAR,
    constants.EOS_TOKEN: constants.END_SENTENCE_CHAR,
}


def token_mask(char_ids):
    """`(batch, T, chars)` char ids -> bool `(batch, T)`: True where a token is (a row that is
    not all zeros). Works on tensors, numpy arrays and symbolic Keras tensors."""
    return ops.any(ops.not_equal(char_ids, 0), axis=-1)


def check_max_characters(max_characters_per_token):
    """`max_characters_per_token` as an int, checked: room for the two word markers and a
    character at least (`ValueError` otherwise)."""
    minimum = constants.NUM_WORD_MARKERS + 1
    if int(max_characters_per_token) < minimum:
        raise ValueError(f"max_characters_per_token must be >= {minimum}; "
                         f"received {max_characters_per_token}.")
    return int(max_characters_per_token)


def token_bytes(token):
    """UTF-8 bytes of a `str` or `bytes` token, invalid code points dropped."""
    if isinstance(token, bytes):
        token = token.decode("utf-8", errors="ignore")
    if not isinstance(token, str):
        raise ValueError(f"A token must be str or bytes; received {type(token).__name__}.")
    return token.encode("utf-8", errors="ignore")


def token_to_char_ids(token, max_characters_per_token=constants.MAX_CHARACTERS_PER_TOKEN):
    """Char ids of one token, shifted by +1: a list of `max_characters_per_token` ints.

    The empty token `""` encodes as `[BOW, EOW, PAD, ...]` shifted; in a sentence
    (`batch_to_ids`, the graph converters of
    `keras_elmo.text.string_char_ids`) it is no token and gets an all-zero row.

    Example:
    >>> ids = token_to_char_ids("ab")  # BOW, a, b, EOW, then padding; every id + 1
    >>> ids[:5], len(ids)
    ([259, 98, 99, 260, 261], 50)
    """
    length = check_max_characters(max_characters_per_token)
    if isinstance(token, bytes):
        token = token.decode("utf-8", errors="ignore")
    raw = [constants.PADDING_CHAR] * length
    raw[0] = constants.BEGIN_WORD_CHAR
    if token in _SPECIAL_TOKENS:
        body = [_SPECIAL_TOKENS[token]]
    else:
        body = list(token_bytes(token)[: length - constants.NUM_WORD_MARKERS])
    raw[1:1 + len(body)] = body
    raw[1 + len(body)] = constants.END_WORD_CHAR
    return [c + constants.CHAR_ID_SHIFT for c in raw]


def batch_to_ids(sentences, max_characters_per_token=constants.MAX_CHARACTERS_PER_TOKEN):
    """Char ids for a batch of tokenised sentences.

    Args:
        sentences: list of sentences, each a list of `str` tokens (may be empty).
        max_characters_per_token: int, chars per token (50 in the published models).

    Returns:
        int32 array `(batch, max_len, max_characters_per_token)`; rows past a sentence's
        end, and the rows of empty string tokens (no token), are all zero. `max_len` is the
        longest sentence (0 for a batch of empty ones).

    Example:
    >>> batch_to_ids([["a", "b", "c"], []])[1].sum()
    0
    >>> batch_to_ids([["a", "", "b"]])[0, 1].sum()  # "a  b".split(" "): no token there
    0
    """
    length = check_max_characters(max_characters_per_token)
    if isinstance(sentences, (str, bytes)):
        raise ValueError("batch_to_ids expects a list of sentences, each a list of tokens; "
                         "received a single string.")
    sentences = list(sentences)
    for index, sentence in enumerate(sentences):
        if isinstance(sentence, (str, bytes)):
            raise ValueError(f"Sentence {index} is a string; expected a list of tokens "
                             "(split it first, e.g. sentence.split()).")
    max_len = max((len(s) for s in sentences), default=0)
    ids = np.zeros((len(sentences), max_len, length), dtype=np.int32)
    for i, sentence in enumerate(sentences):
        for k, token in enumerate(sentence):
            if token == "" or token == b"":  # no token: the row stays zero
                continue
            ids[i, k] = (_cached_char_ids(token, length) if isinstance(token, str)
                         else token_to_char_ids(token, length))
    return ids


@functools.lru_cache(maxsize=1 << 16)
def _cached_char_ids(token, length):
    """`token_to_char_ids` of a str token as a read-only int32 array, remembered: text
    repeats its frequent words, which then cost a lookup (a few MB for 65,536 tokens)."""
    row = np.asarray(token_to_char_ids(token, length), np.int32)
    row.flags.writeable = False
    return row
