"""Tokens to a vocabulary model's ids: chars from a character vocabulary, words from a word
vocabulary (docs/model.md section 10). Plain Python and numpy: no TensorFlow.

A vocabulary model (an ELMoForManyLangs model, `BiLM.from_efml`) spells a token with rows of
its character vocabulary instead of bytes. One token, before the +1 shift:

1. cut to its first `max_characters_per_token - 2` characters (code points, not bytes),
   before both lookups;
2. char ids `[begin_word, c_1, ..., c_n, end_word, padding, ...]`, `max_characters_per_token`
   long, `c_i` the character's id or `unknown_char`; the literal tokens
   `begin_sentence_token` and `end_sentence_token` get their boundary char instead,
   `[begin_word, begin_sentence, end_word, padding, ...]`, as the model's own boundaries;
3. word id (a model with a word table): the cut token's id, case kept, or `unknown_word`.

Then every id + 1, so that 0 means "no token" in both arrays, as in `batch_to_ids`.

Example:
>>> vocabulary = TokenVocabulary(
...     chars={"a": 6, "b": 7}, unknown_char=0, padding_char=1, begin_word_char=2,
...     end_word_char=3, begin_sentence_char=4, end_sentence_char=5,
...     max_characters_per_token=6, words={"ab": 2}, unknown_word=0)
>>> ids = vocabulary_batch_to_ids(vocabulary, [["ab", "c"], []])
>>> ids["char_ids"][0].tolist(), ids["word_ids"].tolist()
([[3, 7, 8, 4, 2, 2], [3, 1, 4, 2, 2, 2]], [[3, 1], [0, 0]])
"""

import dataclasses
import re

import numpy as np

from keras_elmo import constants

#: Characters of a row that are not the token's own: begin-of-word and end-of-word.
_MARKERS = constants.NUM_WORD_MARKERS
#: Lone surrogates: what `bytes.decode("utf-8", "surrogateescape")` makes of invalid bytes.
_SURROGATES = re.compile("[\ud800-\udfff]")


@dataclasses.dataclass(frozen=True)
class TokenVocabulary:
    """What turns tokens into a vocabulary model's char ids and word ids.

    All ids are raw (unshifted): rows of the model's char and word tables.

    Attributes:
        chars: dict, character (a one-code-point str) -> id.
        unknown_char: int, the id of a character not in `chars`.
        padding_char: int, fills a token's row after its end-of-word char.
        begin_word_char: int, the first char of every row.
        end_word_char: int, the char after a token's characters.
        begin_sentence_char, end_sentence_char: int, the one char of the boundary tokens.
        max_characters_per_token: int, the row length (50).
        begin_sentence_token, end_sentence_token: str, the literal tokens spelled as the
            boundaries (`"<bos>"`, `"<eos>"`).
        words: dict, token -> id, or None for a model without a word table.
        unknown_word: int, the id of a token not in `words` (with `words`).

    Example:
    >>> vocabulary = TokenVocabulary(
    ...     chars={"a": 6}, unknown_char=0, padding_char=1, begin_word_char=2,
    ...     end_word_char=3, begin_sentence_char=4, end_sentence_char=5)
    >>> vocabulary.has_words, len(token_char_ids(vocabulary, "a"))
    (False, 50)
    """

    chars: dict
    unknown_char: int
    padding_char: int
    begin_word_char: int
    end_word_char: int
    begin_sentence_char: int
    end_sentence_char: int
    max_characters_per_token: int = constants.MAX_CHARACTERS_PER_TOKEN
    begin_sentence_token: str = "<bos>"
    end_sentence_token: str = "<eos>"
    words: dict = None
    unknown_word: int = None

    def __post_init__(self):
        names = ["unknown_char", "padding_char", "begin_word_char", "end_word_char",
                 "begin_sentence_char", "end_sentence_char"]
        if self.words is not None:
            names.append("unknown_word")
        for name in names:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"TokenVocabulary.{name} must be an id >= 0; received "
                                 f"{value!r}.")
        if self.max_characters_per_token < _MARKERS + 1:
            raise ValueError(f"max_characters_per_token must be >= {_MARKERS + 1}; received "
                             f"{self.max_characters_per_token}.")

    @property
    def has_words(self):
        """Whether tokens also get word ids."""
        return self.words is not None

    def get_config(self):
        """A JSON-able dict; `TokenVocabulary.from_config` rebuilds the vocabulary."""
        return dataclasses.asdict(self)

    @classmethod
    def from_config(cls, config):
        """The vocabulary of `get_config()` (a `TokenVocabulary` is returned as it is)."""
        if isinstance(config, cls):
            return config
        if not isinstance(config, dict):
            raise ValueError("A token vocabulary must be a TokenVocabulary or its get_config() "
                             f"dict; received {type(config).__name__}.")
        return cls(**config)

    def check_fits(self, options):
        """Refuses a vocabulary whose ids are not the model's (`BiLMOptions` `options`).

        Raises:
            ValueError: naming the first id or size that differs and what the options say.
        """
        if not options.char_vocabulary:
            raise ValueError("A token vocabulary belongs to a vocabulary model "
                             "(char_vocabulary); received the options of a byte model.")
        for name in ("begin_word_char", "end_word_char", "padding_char",
                     "begin_sentence_char", "end_sentence_char", "max_characters_per_token"):
            if getattr(self, name) != getattr(options, name):
                raise ValueError(f"the token vocabulary's {name} is {getattr(self, name)}, the "
                                 f"model's {getattr(options, name)}; expected the same.")
        rows = options.num_characters - constants.CHAR_ID_SHIFT
        _check_ids("char", {**self.chars, "<unknown>": self.unknown_char}, rows)
        if self.has_words != options.has_word_embedding:
            raise ValueError(f"the token vocabulary {'has' if self.has_words else 'has no'} "
                             f"words and the model {'has' if options.has_word_embedding else 'has no'}"
                             " word embedding; expected both or neither.")
        if self.has_words:
            _check_ids("word", {**self.words, "<unknown>": self.unknown_word},
                       options.word_vocabulary_size)


def token_char_ids(vocabulary, token):
    """Char ids of one token, shifted by +1: a list of `max_characters_per_token` ints.

    Example:
    >>> vocabulary = TokenVocabulary(
    ...     chars={}, unknown_char=0, padding_char=1, begin_word_char=2, end_word_char=3,
    ...     begin_sentence_char=4, end_sentence_char=5)
    >>> token_char_ids(vocabulary, "<bos>")[:5]  # [begin_word, begin_sentence, end_word, pad..]
    [3, 5, 4, 2, 2]
    """
    v = vocabulary
    token = _cut(v, token)
    if token in (v.begin_sentence_token, v.end_sentence_token):
        body = [v.begin_sentence_char if token == v.begin_sentence_token
                else v.end_sentence_char]
    else:
        body = [v.chars.get(c, v.unknown_char) for c in token]
    raw = [v.begin_word_char] + body + [v.end_word_char]
    raw += [v.padding_char] * (v.max_characters_per_token - len(raw))
    return [c + constants.CHAR_ID_SHIFT for c in raw]


def token_word_id(vocabulary, token):
    """The word id of one token, shifted by +1 (the vocabulary must have words)."""
    if not vocabulary.has_words:
        raise ValueError("token_word_id needs a TokenVocabulary with words; received one "
                         "without (words=None).")
    return vocabulary.words.get(_cut(vocabulary, token),
                                vocabulary.unknown_word) + constants.WORD_ID_SHIFT


def vocabulary_batch_to_ids(vocabulary, sentences):
    """A vocabulary model's inputs for a batch of tokenised sentences.

    Args:
        vocabulary: `TokenVocabulary`.
        sentences: list of sentences, each a list of `str` tokens (may be empty).

    Returns:
        dict: `"char_ids"` int32 `(batch, max_len, max_characters_per_token)` and, when the
        vocabulary has words, `"word_ids"` int32 `(batch, max_len)`; positions past a
        sentence's end, and those of empty string tokens (no token), are 0 in both. What `BiLM` takes (`{"char_ids": ...}` alone for a
        model without words).

    Example:
    >>> vocabulary = TokenVocabulary(
    ...     chars={"a": 6}, unknown_char=0, padding_char=1, begin_word_char=2,
    ...     end_word_char=3, begin_sentence_char=4, end_sentence_char=5,
    ...     words={"a": 2}, unknown_word=0)
    >>> ids = vocabulary_batch_to_ids(vocabulary, [["a", "b"], ["a"]])
    >>> ids["char_ids"].shape, ids["word_ids"].tolist()
    ((2, 2, 50), [[3, 1], [3, 0]])
    """
    if isinstance(sentences, (str, bytes)):
        raise ValueError("vocabulary_batch_to_ids expects a list of sentences, each a list of "
                         "tokens; received a single string.")
    sentences = [list(s) if not isinstance(s, (str, bytes)) else _refuse_string(i)
                 for i, s in enumerate(sentences)]
    max_len = max((len(s) for s in sentences), default=0)
    length = vocabulary.max_characters_per_token
    char_ids = np.zeros((len(sentences), max_len, length), np.int32)
    word_ids = np.zeros((len(sentences), max_len), np.int32)
    rows = {}  # token -> (char row, word id): text repeats its tokens
    for i, sentence in enumerate(sentences):
        for k, token in enumerate(sentence):
            if token == "" or token == b"":  # no token: zeros
                continue
            if token not in rows:
                rows[token] = (token_char_ids(vocabulary, _text(token)),
                               token_word_id(vocabulary, _text(token))
                               if vocabulary.has_words else 0)
            char_ids[i, k], word_ids[i, k] = rows[token]
    result = {"char_ids": char_ids}
    if vocabulary.has_words:
        result["word_ids"] = word_ids
    return result


def _check_ids(what, ids, rows):
    """Refuses an id beyond the model's `rows` rows of the `what` table."""
    largest = max(ids.items(), key=lambda item: item[1])
    if largest[1] >= rows:
        raise ValueError(f"the token vocabulary's {what} {largest[0]!r} has id {largest[1]}; "
                         f"expected ids below the model's {rows} {what} rows.")


def _cut(vocabulary, token):
    """The token's first `max_characters_per_token - 2` characters."""
    return _text(token)[:vocabulary.max_characters_per_token - _MARKERS]


def _text(token):
    """A token's characters; invalid UTF-8 is dropped inside the token (bytes: the invalid
    bytes; str: the lone surrogates that `surrogateescape` made of them), as a byte model
    drops invalid bytes (docs/model.md section 1)."""
    if isinstance(token, bytes):
        return token.decode("utf-8", errors="ignore")
    if not isinstance(token, str):
        raise ValueError(f"A token must be str or bytes; received {type(token).__name__}.")
    if _SURROGATES.search(token):
        return _SURROGATES.sub("", token)
    return token


def _refuse_string(index):
    raise ValueError(f"Sentence {index} is a string; expected a list of tokens (split it "
                     "first, e.g. sentence.split()).")
