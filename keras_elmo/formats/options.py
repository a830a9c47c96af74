"""`BiLMOptions`: the architecture of a biLM, read from and written to `options.json`.

The JSON shape is that of the published weight files (docs/model.md section 6); this class
is the only place that knows its key names. Unknown keys (training hyper-parameters such as
`n_tokens_vocab`) are kept in `extra` and written back unchanged.

A vocabulary model (docs/model.md section 10, ELMoForManyLangs' models) adds keys of our own,
written only when they differ from a byte model's, so a byte model's options.json is the
published one:

    "char_cnn": {..., "n_characters": 89,
                 "char_vocabulary": {"begin_word": 2, "end_word": 3, "padding": 1,
                                     "begin_sentence": 4, "end_sentence": 5}},
    "word_embedding": {"dim": 12, "n_words": 24, "begin_sentence": 2, "end_sentence": 3},
    "lstm": {..., "forget_bias": 0.0}
"""

import dataclasses
import json
import math
import os

from keras_elmo import constants
from keras_elmo.formats.json_fields import (check_id, json_bool, json_filters, json_int,
                                            json_key, json_number, json_object,
                                            json_optional_number, json_str, read_json)
from keras_elmo.process.atomic_file import atomic_writer
from keras_elmo.validation import check_int

_ACTIVATIONS = ("relu", "tanh")
#: The special chars of a token's row, by their options.json names (`<name>_char` fields).
_SPECIAL_CHARS = ("begin_word", "end_word", "padding", "begin_sentence", "end_sentence")
#: A byte model's special chars (raw ids, docs/model.md section 1).
_BYTE_SPECIAL_CHARS = {
    "begin_word": constants.BEGIN_WORD_CHAR, "end_word": constants.END_WORD_CHAR,
    "padding": constants.PADDING_CHAR, "begin_sentence": constants.BEGIN_SENTENCE_CHAR,
    "end_sentence": constants.END_SENTENCE_CHAR}


@dataclasses.dataclass(frozen=True)
class BiLMOptions:
    """Architecture of a biLM: character CNN, highway layers, projection and biLSTM.

    Args:
        char_embedding_dim: int. Size of each character embedding (`char_cnn.embedding.dim`).
        filters: tuple of `(width, num_filters)` pairs, one convolution per pair.
        num_highway: int. Highway layers after the convolutions (may be 0).
        activation: `"relu"` or `"tanh"`, applied after the max over char positions.
        max_characters_per_token: int. Char ids per token, markers and padding included.
        num_characters: int. Rows of the model's char table (262: ids shifted, row 0 =
            padding). bilm-tf's training value 261 (same table without row 0) is accepted
            by `from_dict` and normalised to 262.
        lstm_units: int. Memory cell size of each LSTM (`lstm.dim`).
        projection_dim: int. Output size of each LSTM and of the token encoder.
        num_layers: int. biLSTM layers per direction.
        cell_clip: float or None. Clip value of the memory cell.
        proj_clip: float or None. Clip value of the projected output.
        use_skip_connections: bool. Residual connection on every layer after the first.
        char_vocabulary: bool. False (a byte model): char ids are UTF-8 bytes and the five
            special chars below are bilm-tf's fixed ids. True (a vocabulary model): char ids
            are rows of a character vocabulary of `num_characters - 1` entries, the special
            chars are rows of it (`keras_elmo.text.token_vocabulary` makes the ids).
        begin_word_char, end_word_char, padding_char: int. Raw (unshifted) ids of the char
            before a token's chars, after them, and filling the rest of its row.
        begin_sentence_char, end_sentence_char: int. Raw ids of the one char of the sentence
            boundary tokens; their rows are `boundary_char_ids`.
        word_vocabulary_size: int. Rows of the word table (0: no word embedding).
        word_embedding_dim: int. Size of each word vector (0: no word embedding). A word
            model adds `words W_word` (no bias) to the char encoder's projected output.
            Needs a vocabulary model.
        begin_sentence_word, end_sentence_word: int. Raw word ids of the boundary tokens.
        forget_bias: float. Constant added to the LSTM forget gate, not stored in the bias:
            bilm-tf's 1.0; 0.0 for a model whose stored bias holds it (ELMoForManyLangs).
        extra: dict. Any further options.json keys, kept as they were read.

    Example:
    >>> options = BiLMOptions.tiny()
    >>> options.output_dim
    16
    >>> BiLMOptions.from_dict(options.to_dict()) == options
    True
    """

    char_embedding_dim: int = 16
    filters: tuple = ((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024))
    num_highway: int = 2
    activation: str = "relu"
    max_characters_per_token: int = constants.MAX_CHARACTERS_PER_TOKEN
    num_characters: int = constants.NUM_CHARACTERS
    lstm_units: int = 4096
    projection_dim: int = 512
    num_layers: int = 2
    cell_clip: float = 3.0
    proj_clip: float = 3.0
    use_skip_connections: bool = True
    char_vocabulary: bool = False
    begin_word_char: int = constants.BEGIN_WORD_CHAR
    end_word_char: int = constants.END_WORD_CHAR
    padding_char: int = constants.PADDING_CHAR
    begin_sentence_char: int = constants.BEGIN_SENTENCE_CHAR
    end_sentence_char: int = constants.END_SENTENCE_CHAR
    word_vocabulary_size: int = 0
    word_embedding_dim: int = 0
    begin_sentence_word: int = 0
    end_sentence_word: int = 0
    forget_bias: float = constants.FORGET_BIAS
    extra: dict = dataclasses.field(default_factory=dict, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "filters", tuple((int(w), int(n)) for w, n in self.filters))
        check_int("char_cnn.embedding.dim", self.char_embedding_dim)
        check_int("lstm.dim", self.lstm_units)
        check_int("lstm.projection_dim", self.projection_dim)
        check_int("lstm.n_layers", self.num_layers)
        if not self.filters:
            raise ValueError("char_cnn.filters must list at least one [width, n_filters] pair; "
                             "received an empty list.")
        for width, count in self.filters:
            if width < 1 or count < 1:
                raise ValueError("Every char_cnn.filters entry must be [width >= 1, n_filters >= 1]; "
                                 f"received [{width}, {count}].")
        if self.num_highway < 0:
            raise ValueError(f"char_cnn.n_highway must be >= 0; received {self.num_highway}.")
        if self.activation not in _ACTIVATIONS:
            raise ValueError(f"char_cnn.activation must be one of {_ACTIVATIONS}; "
                             f"received {self.activation!r}.")
        min_chars = constants.NUM_WORD_MARKERS + 1
        if self.max_characters_per_token < max(min_chars, max(w for w, _ in self.filters)):
            raise ValueError(
                "char_cnn.max_characters_per_token must be >= 3 and >= the widest filter "
                f"({max(w for w, _ in self.filters)}); received {self.max_characters_per_token}.")
        self._check_input_side()
        if self.projection_dim >= self.lstm_units:
            raise ValueError(
                "lstm.projection_dim must be smaller than lstm.dim (bilm-tf drops the projection "
                "otherwise, a variant keras-elmo does not support); received projection_dim="
                f"{self.projection_dim}, dim={self.lstm_units}.")

    def _check_input_side(self):
        """The char table, the special chars, the word table and the forget bias."""
        if isinstance(self.forget_bias, bool) or not isinstance(
                self.forget_bias, (int, float)) or not math.isfinite(self.forget_bias):
            raise ValueError(f"lstm.forget_bias must be a finite number; received "
                             f"{self.forget_bias!r}.")
        object.__setattr__(self, "forget_bias", float(self.forget_bias))
        specials = {name: getattr(self, f"{name}_char") for name in _SPECIAL_CHARS}
        if not self.char_vocabulary:
            if self.num_characters != constants.NUM_CHARACTERS:
                raise ValueError(
                    f"char_cnn.n_characters must be {constants.NUM_CHARACTERS} (or "
                    f"{constants.NUM_FILE_CHARACTERS} in bilm-tf training options); "
                    f"received {self.num_characters}.")
            if specials != _BYTE_SPECIAL_CHARS:
                raise ValueError("A byte model's special chars are fixed "
                                 f"{_BYTE_SPECIAL_CHARS}; received {specials} (set "
                                 "char_vocabulary=True for a vocabulary model).")
            if self.word_vocabulary_size or self.word_embedding_dim:
                raise ValueError("A word embedding needs a vocabulary model (char_vocabulary="
                                 f"True); received word_vocabulary_size="
                                 f"{self.word_vocabulary_size}, word_embedding_dim="
                                 f"{self.word_embedding_dim} with char_vocabulary=False.")
        else:
            check_int("char_cnn.n_characters", self.num_characters, minimum=2,
                      hint="(the vocabulary's chars + 1: row 0 means no token)")
            for name, value in specials.items():
                check_id(f"char_cnn.char_vocabulary.{name}", value,
                          self.num_characters - constants.CHAR_ID_SHIFT)
        check_int("word_embedding.n_words", self.word_vocabulary_size, minimum=0)
        check_int("word_embedding.dim", self.word_embedding_dim, minimum=0)
        if (self.word_vocabulary_size == 0) != (self.word_embedding_dim == 0):
            raise ValueError("word_embedding.n_words and word_embedding.dim are both 0 (no word "
                             f"embedding) or both > 0; received {self.word_vocabulary_size} "
                             f"and {self.word_embedding_dim}.")
        if self.word_embedding_dim:
            for name in ("begin_sentence", "end_sentence"):
                check_id(f"word_embedding.{name}", getattr(self, f"{name}_word"),
                          self.word_vocabulary_size)

    # --- the input side -------------------------------------------------------------------
    @property
    def has_word_embedding(self):
        """Whether the token encoder adds a word embedding (its model takes word ids)."""
        return self.word_embedding_dim > 0

    @property
    def use_char_projection(self):
        """Whether the char CNN has its projection: always in a vocabulary model (as in
        ELMoForManyLangs), else only when the filters do not total `projection_dim` (as in
        bilm-tf)."""
        return self.char_vocabulary or self.num_filters != self.projection_dim

    @property
    def boundary_char_ids(self):
        """`(begin, end)`: the model char ids (shifted) of the sentence boundary tokens,
        `[begin_word, boundary, end_word, padding, ...]` + 1, `max_characters_per_token` each.

        Example:
        >>> BiLMOptions().boundary_char_ids[0][:4]  # <S> of a byte model
        [259, 257, 260, 261]
        """
        def row(boundary):
            raw = [self.begin_word_char, boundary, self.end_word_char]
            raw += [self.padding_char] * (self.max_characters_per_token - len(raw))
            return [c + constants.CHAR_ID_SHIFT for c in raw]

        return row(self.begin_sentence_char), row(self.end_sentence_char)

    @property
    def boundary_word_ids(self):
        """`(begin, end)`: the model word ids (shifted) of the boundary tokens; None without
        a word embedding."""
        if not self.has_word_embedding:
            return None
        return (self.begin_sentence_word + constants.WORD_ID_SHIFT,
                self.end_sentence_word + constants.WORD_ID_SHIFT)

    # --- derived sizes ---------------------------------------------------------------------
    @property
    def num_filters(self):
        """Total convolution filters, the width of the highway layers."""
        return sum(count for _, count in self.filters)

    @property
    def output_dim(self):
        """Size of every biLM representation: `2 * projection_dim`."""
        return 2 * self.projection_dim

    # --- presets -----------------------------------------------------------------------------
    @classmethod
    def published(cls):
        """The published 2x4096_512_2048cnn_2xhighway configuration."""
        return cls()

    @classmethod
    def tiny(cls, **overrides):
        """A few-thousand-parameter model for tests; keyword arguments override fields."""
        fields = dict(char_embedding_dim=4, filters=((1, 4), (2, 8), (3, 8)), num_highway=1,
                      lstm_units=12, projection_dim=8, num_layers=2)
        fields.update(overrides)
        return cls(**fields)

    @classmethod
    def small(cls, **overrides):
        """The README's small model: trains on 2 CPU cores in minutes."""
        fields = dict(char_embedding_dim=16, filters=((1, 32), (2, 32), (3, 64), (4, 128)),
                      num_highway=1, lstm_units=512, projection_dim=128, num_layers=2)
        fields.update(overrides)
        return cls(**fields)

    # --- options.json ------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, options):
        """Reads the options.json structure (`{"lstm": {...}, "char_cnn": {...}, ...}`)."""
        if not isinstance(options, dict):
            raise ValueError(f"options must be a JSON object; received {type(options).__name__}.")
        for section in ("lstm", "char_cnn"):
            if not isinstance(options.get(section), dict):
                raise ValueError(f"options.json needs an object under {section!r}; "
                                 f"found keys {sorted(options)}.")
        lstm, cnn = dict(options["lstm"]), dict(options["char_cnn"])
        try:
            embedding = cnn.pop("embedding")
            if not isinstance(embedding, dict):
                raise ValueError("options.json key 'char_cnn.embedding' must be an object "
                                 f"{{\"dim\": ...}}; received {embedding!r}.")
            vocabulary = json_object("char_cnn.char_vocabulary", cnn.pop("char_vocabulary", None))
            words = json_object("word_embedding", options.get("word_embedding"))
            num_characters = json_int("char_cnn.n_characters",
                                  cnn.pop("n_characters", constants.NUM_CHARACTERS))
            if num_characters == constants.NUM_FILE_CHARACTERS and vocabulary is None:
                num_characters = constants.NUM_CHARACTERS
            input_side = {}
            if vocabulary is not None:
                input_side["char_vocabulary"] = True
                for name in _SPECIAL_CHARS:
                    input_side[f"{name}_char"] = json_int(
                        f"char_cnn.char_vocabulary.{name}",
                        json_key(vocabulary, "char_cnn.char_vocabulary", name))
            if words is not None:
                input_side.update(
                    (field, json_int(f"word_embedding.{key}", json_key(words, "word_embedding", key)))
                    for field, key in (("word_embedding_dim", "dim"),
                                       ("word_vocabulary_size", "n_words"),
                                       ("begin_sentence_word", "begin_sentence"),
                                       ("end_sentence_word", "end_sentence")))
            if "forget_bias" in lstm:
                input_side["forget_bias"] = json_number("lstm.forget_bias", lstm.pop("forget_bias"))
            fields = dict(
                char_embedding_dim=json_int("char_cnn.embedding.dim", embedding["dim"]),
                filters=json_filters(cnn.pop("filters")),
                num_highway=json_int("char_cnn.n_highway", cnn.pop("n_highway", 0)),
                activation=json_str("char_cnn.activation", cnn.pop("activation", "relu")),
                max_characters_per_token=json_int(
                    "char_cnn.max_characters_per_token",
                    cnn.pop("max_characters_per_token", constants.MAX_CHARACTERS_PER_TOKEN)),
                num_characters=num_characters,
                lstm_units=json_int("lstm.dim", lstm.pop("dim")),
                projection_dim=json_int("lstm.projection_dim", lstm.pop("projection_dim")),
                num_layers=json_int("lstm.n_layers", lstm.pop("n_layers")),
                cell_clip=json_optional_number("lstm.cell_clip", lstm.pop("cell_clip", None)),
                proj_clip=json_optional_number("lstm.proj_clip", lstm.pop("proj_clip", None)),
                use_skip_connections=json_bool("lstm.use_skip_connections",
                                           lstm.pop("use_skip_connections", False)),
                **input_side,
            )
        except KeyError as error:
            raise ValueError(f"options.json is missing the key {error.args[0]!r} "
                             "(see docs/model.md section 6 for the expected shape).") from None
        extra = {k: v for k, v in options.items()
                 if k not in ("lstm", "char_cnn", "word_embedding")}
        extra.update({f"lstm.{k}": v for k, v in lstm.items()})
        extra.update({f"char_cnn.{k}": v for k, v in cnn.items()})
        return cls(**fields, extra=extra)

    def to_dict(self):
        """The options.json structure, extra keys included, `n_characters` written as 262
        for a byte model; a vocabulary model's keys only where they are needed (module
        docstring)."""
        lstm = {"dim": self.lstm_units, "projection_dim": self.projection_dim,
                "n_layers": self.num_layers, "cell_clip": self.cell_clip,
                "proj_clip": self.proj_clip, "use_skip_connections": self.use_skip_connections}
        if self.forget_bias != constants.FORGET_BIAS:
            lstm["forget_bias"] = self.forget_bias
        cnn = {"activation": self.activation, "n_highway": self.num_highway,
               "embedding": {"dim": self.char_embedding_dim},
               "filters": [list(f) for f in self.filters],
               "n_characters": self.num_characters,
               "max_characters_per_token": self.max_characters_per_token}
        if self.char_vocabulary:
            cnn["char_vocabulary"] = {name: getattr(self, f"{name}_char")
                                      for name in _SPECIAL_CHARS}
        result = {}
        for key, value in self.extra.items():
            section, _, name = key.partition(".")
            if section == "lstm" and name:
                lstm.setdefault(name, value)
            elif section == "char_cnn" and name:
                cnn.setdefault(name, value)
            else:
                result[key] = value
        result.update({"lstm": lstm, "char_cnn": cnn})
        if self.has_word_embedding:
            result["word_embedding"] = {
                "dim": self.word_embedding_dim, "n_words": self.word_vocabulary_size,
                "begin_sentence": self.begin_sentence_word,
                "end_sentence": self.end_sentence_word}
        return result

    @classmethod
    def from_file(cls, path):
        """Reads an options.json file; one clear error for a missing file or bad JSON."""
        data = read_json(path, "options file", "an options.json as written by bilm-tf or "
                                               "keras-elmo")
        try:
            return cls.from_dict(data)
        except ValueError as error:
            raise ValueError(f"options file {os.fspath(path)}: {error}") from None

    def save(self, path):
        """Writes options.json (indent 2, UTF-8; atomically: a storage fault is one
        `StorageError` line and leaves an earlier file untouched)."""
        with atomic_writer(path, what="the biLM options") as f:
            json.dump(self.to_dict(), f, indent=2, ensure_ascii=False)
            f.write("\n")


def as_options(options):
    """`BiLMOptions` from a `BiLMOptions`, an options.json dict or a path to options.json."""
    if isinstance(options, BiLMOptions):
        return options
    if isinstance(options, dict):
        return BiLMOptions.from_dict(options)
    if isinstance(options, (str, os.PathLike)):
        return BiLMOptions.from_file(options)
    raise ValueError("options must be a BiLMOptions, an options.json dict or a path; "
                     f"received {type(options).__name__}.")
