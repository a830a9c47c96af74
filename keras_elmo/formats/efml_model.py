"""ELMoForManyLangs model directories (HIT-SCIR's ELMo for 44 languages), read without torch.

The layout read, as EFML's own loader (elmoformanylangs 0.0.4) finds it:

    config.json           the training arguments; "config_path" names the model configuration
    the configuration     found at config_path (relative to the directory), else by its base
                          name in the directory, else, for the two names EFML ships
                          (cnn_50_100_512_4096_sample.json, cnn_0_100_512_4096_sample.json),
                          the values that both hold (`PACKAGED_CONFIG`)
    char.dic, word.dic    "token<TAB>id" lines; lines are stripped of surrounding whitespace,
                          so the full-width space U+3000 leaves a line of its id alone, which
                          means U+3000. word.dic exists only when word_dim > 0.
    token_embedder.pkl    torch state dicts (`torch_state.read_torch_state_dict`); any other
    encoder.pkl           file (classifier.pkl, the training softmax) is not read

token_embedder.pkl, every matrix in torch's Linear/Conv1d layout (out first), with C =
char_dim, W = word_dim, F = the filters' counts summed, P = encoder.projection_dim:
    word_emb_layer.embedding.weight   (num_words, W)          only when W > 0
    char_emb_layer.embedding.weight   (num_chars, C)
    convolutions.{i}.weight           (count_i, C, width_i)   one per filter, in order
    convolutions.{i}.bias             (count_i,)
    highways._layers.{k}.weight       (2F, F)                 k < n_highway
    highways._layers.{k}.bias         (2F,)
    projection.weight                 (P, W + F)
    projection.bias                   (P,)
encoder.pkl, with U = encoder.dim (the LSTM cell size), for k < n_layers and d in
forward, backward:
    {d}_layer_{k}.input_linearity.weight    (4U, P)   no bias
    {d}_layer_{k}.state_linearity.weight    (4U, P)
    {d}_layer_{k}.state_linearity.bias      (4U,)
    {d}_layer_{k}.state_projection.weight   (P, U)    no bias

The specials keep their names here, though EFML uses two of them swapped: a token's char row
starts with `<eow>`'s id and ends with `<bow>`'s (its batching code looks the two names up
in the opposite order, in training as in use).

Example:
>>> model = read_efml_model("tests/fixtures/efml/tiny_zip")  # doctest: +SKIP
>>> model.config.lstm_units, model.chars.special_ids["<eow>"]  # doctest: +SKIP
(32, 2)
"""

import dataclasses
import os

from keras_elmo.formats.dic_file import (CHAR_SPECIALS, WORD_OPTIONAL_SPECIALS, WORD_SPECIALS,
                                         DicVocabulary, read_dic)
from keras_elmo.formats.json_fields import read_json
from keras_elmo.formats.torch_state import read_torch_state_dict

CONFIG_FILE, CHAR_DIC, WORD_DIC = "config.json", "char.dic", "word.dic"
TOKEN_EMBEDDER_FILE, ENCODER_FILE = "token_embedder.pkl", "encoder.pkl"
#: What `is_efml_model_dir` looks for (char.dic is checked by the reader, with a message).
_MARKER_FILES = (CONFIG_FILE, TOKEN_EMBEDDER_FILE, ENCODER_FILE)
PACKAGED_CONFIG = {
    "token_embedder": {"name": "cnn", "activation": "relu", "n_highway": 2, "word_dim": 100,
                       "char_dim": 50, "max_characters_per_token": 50,
                       "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512],
                                   [7, 1024]]},
    "encoder": {"name": "elmo", "projection_dim": 512, "cell_clip": 3, "proj_clip": 3,
                "dim": 4096, "n_layers": 2},
}
_PACKAGED_CONFIGS = ("cnn_50_100_512_4096_sample.json", "cnn_0_100_512_4096_sample.json")
#: A boundary token fills three slots: begin-of-word, <bos> or <eos>, end-of-word.
_MIN_CHARACTERS_PER_TOKEN = 3


class EFMLModelError(ValueError):
    """An EFML model directory that cannot be read; the message is one line naming the file."""


@dataclasses.dataclass(frozen=True)
class EFMLConfig:
    """The model configuration (the JSON keys in brackets).

    Attributes:
        token_embedder: "cnn" (`token_embedder.name`).
        char_embedding_dim: int (`token_embedder.char_dim`).
        word_embedding_dim: int, 0 for no word table (`token_embedder.word_dim`).
        filters: tuple of `(width, count)` (`token_embedder.filters`).
        num_highway: int (`token_embedder.n_highway`).
        activation: "relu" or "tanh", of the convolutions (`token_embedder.activation`).
        max_characters_per_token: int (`token_embedder.max_characters_per_token`).
        encoder: "elmo" (`encoder.name`).
        num_layers: int (`encoder.n_layers`).
        lstm_units: int, the LSTM cell size (`encoder.dim`).
        projection_dim: int, the token embedder's output and each LSTM's
            (`encoder.projection_dim`).
        cell_clip, proj_clip: float, or None for no clipping (EFML clips only when the value
            is truthy, so 0 means None too).
    """

    token_embedder: str
    char_embedding_dim: int
    word_embedding_dim: int
    filters: tuple
    num_highway: int
    activation: str
    max_characters_per_token: int
    encoder: str
    num_layers: int
    lstm_units: int
    projection_dim: int
    cell_clip: float = None
    proj_clip: float = None

    @property
    def num_filters(self):
        """F, the char CNN's output size: the filters' counts summed."""
        return sum(count for _, count in self.filters)


@dataclasses.dataclass(frozen=True)
class EFMLModel:
    """Everything of an EFML model directory, as numpy and plain Python.

    Attributes:
        directory: the directory read.
        config_file: the configuration file used (or the packaged name it stood for).
        config: `EFMLConfig`.
        chars: `keras_elmo.formats.dic_file.DicVocabulary` of char.dic.
        words: `DicVocabulary` of word.dic, or None when `word_embedding_dim` is 0.
        token_embedder_weights, encoder_weights: name -> `numpy.ndarray`, the state dicts in
            stored order (the module docstring lists names and shapes).
    """

    directory: str
    config_file: str
    config: EFMLConfig
    chars: DicVocabulary
    words: DicVocabulary
    token_embedder_weights: dict
    encoder_weights: dict


def is_efml_model_dir(path):
    """Whether `path` is a directory with EFML's config.json and two .pkl state dicts.

    Example:
    >>> is_efml_model_dir("tests/fixtures/efml/tiny_zip")  # doctest: +SKIP
    True
    """
    path = os.fspath(path)
    return os.path.isdir(path) and all(os.path.isfile(os.path.join(path, name))
                                       for name in _MARKER_FILES)


def read_efml_model(directory):
    """Reads and checks a whole EFML model directory; nothing of it is returned half-read.

    Args:
        directory: the model directory (`str` or path-like).

    Returns:
        `EFMLModel`.

    Raises:
        FileNotFoundError: the directory or one of its files is missing.
        EFMLModelError: a file does not fit (one line naming it, what was found and what was
            expected): the LSTM char encoder, an unknown name, a missing key, a repeated
            token or id, an id beyond its table, a tensor shape or state-dict key that does
            not fit the configuration.
        TorchStateDictError: a .pkl that is not a readable state dict of tensors.

    Example:
    >>> model = read_efml_model("tests/fixtures/efml/tiny_zip")  # doctest: +SKIP
    >>> model.token_embedder_weights["projection.weight"].shape  # (P, W + F)  # doctest: +SKIP
    (16, 60)
    """
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"EFML model directory not found: {directory}; expected a "
                                f"directory with {', '.join(_MARKER_FILES + (CHAR_DIC,))}.")
    for name in _MARKER_FILES + (CHAR_DIC,):
        _require_file(directory, name)
    config_file, config = read_efml_config(directory)
    chars = read_dic(os.path.join(directory, CHAR_DIC), CHAR_SPECIALS)
    words = None
    if config.word_embedding_dim > 0:
        words = read_dic(_require_file(directory, WORD_DIC), WORD_SPECIALS,
                         WORD_OPTIONAL_SPECIALS)
    embedder_file = os.path.join(directory, TOKEN_EMBEDDER_FILE)
    embedder = read_torch_state_dict(embedder_file)
    _check_shapes(embedder_file, embedder, token_embedder_shapes(config), config_file)
    _check_rows(chars, embedder_file, embedder, "char_emb_layer.embedding.weight")
    if words is not None:
        _check_rows(words, embedder_file, embedder, "word_emb_layer.embedding.weight")
    encoder_file = os.path.join(directory, ENCODER_FILE)
    encoder = read_torch_state_dict(encoder_file)
    _check_shapes(encoder_file, encoder, encoder_shapes(config), config_file)
    return EFMLModel(directory, config_file, config, chars, words, embedder, encoder)


def _require_file(directory, name):
    path = os.path.join(directory, name)
    if not os.path.isfile(path):
        present = sorted(os.listdir(directory))[:10]
        raise FileNotFoundError(f"{directory} has no {name} (it holds {present}); expected "
                                "an ELMoForManyLangs model directory.")
    return path


# --- the configuration -----------------------------------------------------------------------
def read_efml_config(directory):
    """`(config_file, EFMLConfig)`: config.json's `config_path`, found as EFML finds it.

    In order: `config_path` joined to the directory (an absolute path stays as it is), its
    base name in the directory, the values EFML ships under that base name.

    Example:
    >>> read_efml_config("zh.model")[1].filters[-1]  # doctest: +SKIP
    (7, 1024)
    """
    arguments_file = os.path.join(directory, CONFIG_FILE)
    arguments = read_json(arguments_file, "EFML config.json", "EFML's training arguments")
    named = arguments.get("config_path") if isinstance(arguments, dict) else None
    if not isinstance(named, str) or not named:
        raise EFMLModelError(f"{arguments_file}: has no 'config_path' string; expected the "
                             "training arguments naming the model configuration.")
    base = os.path.basename(named.replace("\\", "/"))
    for candidate in (os.path.join(directory, named), os.path.join(directory, base)):
        if os.path.isfile(candidate):
            data = read_json(candidate, "EFML model configuration", "a JSON object")
            return candidate, _parse_config(candidate, data)
    if base in _PACKAGED_CONFIGS:
        return f"{base} (the values elmoformanylangs ships)", _parse_config(base,
                                                                           PACKAGED_CONFIG)
    raise FileNotFoundError(f"{arguments_file}: names the model configuration {named!r}, "
                            f"which is neither there nor in {directory} as {base}; expected "
                            "that file beside config.json.")


def _parse_config(path, data):
    def section(name):
        value = data.get(name) if isinstance(data, dict) else None
        if not isinstance(value, dict):
            raise EFMLModelError(f"{path}: has no {name!r} object; expected the "
                                 "'token_embedder' and 'encoder' sections of an EFML model.")
        return value

    def get(sect, key, minimum=None):
        values = section(sect)
        if key not in values:
            raise EFMLModelError(f"{path}: has no {sect}.{key}; expected it among "
                                 f"{sorted(values)}.")
        value = values[key]
        if minimum is not None and (isinstance(value, bool) or not isinstance(value, int)
                                    or value < minimum):
            raise EFMLModelError(f"{path}: {sect}.{key} is {value!r}; expected an int >= "
                                 f"{minimum}.")
        return value

    embedder_name = str(get("token_embedder", "name")).lower()
    if embedder_name == "lstm":
        raise EFMLModelError(f"{path}: token_embedder.name is 'lstm' (EFML's LSTM char "
                             "encoder); expected 'cnn', the only one keras-elmo reads.")
    if embedder_name != "cnn":
        raise EFMLModelError(f"{path}: token_embedder.name is {embedder_name!r}; expected "
                             "'cnn'.")
    encoder_name = str(get("encoder", "name")).lower()
    if encoder_name != "elmo":
        raise EFMLModelError(f"{path}: encoder.name is {encoder_name!r}; expected 'elmo' (the "
                             "residual biLSTM with projections; EFML's 'lstm' is not read).")
    max_chars = get("token_embedder", "max_characters_per_token", _MIN_CHARACTERS_PER_TOKEN)
    filters = get("token_embedder", "filters")
    if not isinstance(filters, list) or not filters or not all(
            isinstance(f, list) and len(f) == 2 and all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in f)
            and f[0] <= max_chars for f in filters):
        raise EFMLModelError(f"{path}: token_embedder.filters is {filters!r}; expected "
                             f"[[width, count], ...] of positive ints, widths <= {max_chars}.")
    activation = get("token_embedder", "activation")
    if activation not in ("relu", "tanh"):
        raise EFMLModelError(f"{path}: token_embedder.activation is {activation!r}; expected "
                             "'relu' or 'tanh'.")
    clips = []
    for key in ("cell_clip", "proj_clip"):
        value = get("encoder", key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or value < 0):
            raise EFMLModelError(f"{path}: encoder.{key} is {value!r}; expected a number >= 0 "
                                 "or null.")
        clips.append(float(value) if value else None)
    return EFMLConfig(
        token_embedder=embedder_name,
        char_embedding_dim=get("token_embedder", "char_dim", 1),
        word_embedding_dim=get("token_embedder", "word_dim", 0),
        filters=tuple((width, count) for width, count in filters),
        num_highway=get("token_embedder", "n_highway", 0),
        activation=activation,
        max_characters_per_token=max_chars,
        encoder=encoder_name,
        num_layers=get("encoder", "n_layers", 1),
        lstm_units=get("encoder", "dim", 1),
        projection_dim=get("encoder", "projection_dim", 1),
        cell_clip=clips[0], proj_clip=clips[1])


# --- the state dicts -------------------------------------------------------------------------
def token_embedder_shapes(config):
    """name -> shape of token_embedder.pkl, in EFML's order; None stands for the rows of an
    embedding table, which the .dic file sets.

    Example:
    >>> token_embedder_shapes(config)["projection.weight"]  # (P, W + F)  # doctest: +SKIP
    (512, 2148)
    """
    c, w, f, p = (config.char_embedding_dim, config.word_embedding_dim, config.num_filters,
                  config.projection_dim)
    shapes = {}
    if w > 0:
        shapes["word_emb_layer.embedding.weight"] = (None, w)
    shapes["char_emb_layer.embedding.weight"] = (None, c)
    for i, (width, count) in enumerate(config.filters):
        shapes[f"convolutions.{i}.weight"] = (count, c, width)
        shapes[f"convolutions.{i}.bias"] = (count,)
    for k in range(config.num_highway):
        shapes[f"highways._layers.{k}.weight"] = (2 * f, f)
        shapes[f"highways._layers.{k}.bias"] = (2 * f,)
    shapes["projection.weight"] = (p, w + f)
    shapes["projection.bias"] = (p,)
    return shapes


def encoder_shapes(config):
    """name -> shape of encoder.pkl, in EFML's order.

    Example:
    >>> encoder_shapes(config)["forward_layer_0.input_linearity.weight"]  # doctest: +SKIP
    (16384, 512)
    """
    u, p = config.lstm_units, config.projection_dim
    shapes = {}
    for k in range(config.num_layers):
        for direction in ("forward", "backward"):
            prefix = f"{direction}_layer_{k}."
            shapes[prefix + "input_linearity.weight"] = (4 * u, p)
            shapes[prefix + "state_linearity.weight"] = (4 * u, p)
            shapes[prefix + "state_linearity.bias"] = (4 * u,)
            shapes[prefix + "state_projection.weight"] = (p, u)
    return shapes


def _check_shapes(path, weights, shapes, config_file):
    for key in shapes:
        if key not in weights:
            raise EFMLModelError(f"{path}: has no {key}; expected it (shape "
                                 f"{_shape_text(shapes[key])}) for the model of {config_file}.")
    for key, array in weights.items():
        if key not in shapes:
            raise EFMLModelError(f"{path}: holds {key} {array.shape}, which the model of "
                                 f"{config_file} has no place for; expected only "
                                 f"{', '.join(shapes)}.")
        want = shapes[key]
        if len(array.shape) != len(want) or any(
                w is not None and w != got for w, got in zip(want, array.shape)):
            raise EFMLModelError(f"{path}: {key} has shape {array.shape}; expected "
                                 f"{_shape_text(want)} from {config_file}.")
        if array.dtype.kind != "f":
            raise EFMLModelError(f"{path}: {key} holds {array.dtype}; expected floating "
                                 "point.")


def _shape_text(shape):
    return "(" + ", ".join("rows" if n is None else str(n) for n in shape) + \
        ("," if len(shape) == 1 else "") + ")"


def _check_rows(vocabulary, path, weights, key):
    rows = weights[key].shape[0]
    token, index = max(vocabulary.token_ids.items(), key=lambda item: item[1])
    if index >= rows:
        raise EFMLModelError(f"{vocabulary.path}: gives {token!r} the id {index}, beyond the "
                             f"{rows} rows of {key} in {path}; expected ids below {rows}.")
