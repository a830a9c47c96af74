"""ELMoForManyLangs (EFML) models as keras-elmo vocabulary models: options, vocabulary, weights.

`keras_elmo.formats.efml_model` reads an EFML directory into numpy; this module turns what
it read into our terms, and is the only place that knows how the two differ
(docs/model.md section 10):

- char rows: EFML's `[<eow>, c_1 .. c_n, <bow>, <pad> ..]` (the two names swapped in its
  code) -> `begin_word_char` = id of `<eow>`, `end_word_char` = id of `<bow>`;
- tables: copied; our ids are EFML's rows + 1 (a zero row 0 is prepended at call time);
- `convolutions.i.weight` `(n, C, w)` -> `conv_i_kernel` `(w, C, n)`;
- highway: EFML's `y = W x + b`, `g = sigmoid(y[F:])`, `g x + (1 - g) relu(y[:F])` ->
  `transform_kernel = W[:F]^T`, `transform_bias = b[:F]`, `carry_kernel = -W[F:]^T`,
  `carry_bias = -b[F:]` (so `carry = 1 - g`; negation is exact);
- `projection.weight` `(P, W + F)` over `[word; chars]` -> `WordEmbedding.projection_kernel
  = weight[:, :W]^T` and the char `projection` kernel `weight[:, W:]^T` (the bias is its);
- LSTM `input_linearity`, `state_linearity` (+ bias), `state_projection`: `(out, in)` with
  gates i, f, g, o, as our cells store them: copied;
- the forget bias is inside EFML's stored bias: `forget_bias` 0.0; a clip of 0 or null is
  None; the residual from the second layer is `use_skip_connections`.

Example:
>>> model = read_efml_model("zh.model")  # doctest: +SKIP
>>> bilm = keras_elmo.BiLM(efml_options(model), zero_init=True)  # doctest: +SKIP
>>> load_efml_weights(bilm, model)  # what BiLM.from_efml does  # doctest: +SKIP
"""

import os

import numpy as np

from keras_elmo import constants
from keras_elmo.formats.dic_file import (CHAR_SPECIALS, WORD_OPTIONAL_SPECIALS, WORD_SPECIALS,
                                         read_dic)
from keras_elmo.formats.efml_model import (
    CHAR_DIC, ENCODER_FILE, TOKEN_EMBEDDER_FILE, WORD_DIC, EFMLModel, EFMLModelError,
    read_efml_config, read_efml_model)
from keras_elmo.formats.options import BiLMOptions
from keras_elmo.text.token_vocabulary import TokenVocabulary

#: EFML's names of the boundary tokens; a caller's token spelled so is spelled as them.
BEGIN_SENTENCE_TOKEN, END_SENTENCE_TOKEN = "<bos>", "<eos>"


def efml_options(model):
    """`BiLMOptions` of an EFML model (`EFMLModel` from `read_efml_model`): a vocabulary
    model whose tables have the state dicts' rows.

    Raises:
        EFMLModelError: a configuration keras-elmo cannot run (the message names its file).
    """
    config, specials = model.config, model.chars.special_ids
    embedder = model.token_embedder_weights
    words = {}
    if model.words is not None:
        words = dict(
            word_vocabulary_size=embedder["word_emb_layer.embedding.weight"].shape[0],
            word_embedding_dim=config.word_embedding_dim,
            begin_sentence_word=model.words.special_ids[BEGIN_SENTENCE_TOKEN],
            end_sentence_word=model.words.special_ids[END_SENTENCE_TOKEN])
    try:
        return BiLMOptions(
            char_embedding_dim=config.char_embedding_dim, filters=config.filters,
            num_highway=config.num_highway, activation=config.activation,
            max_characters_per_token=config.max_characters_per_token,
            num_characters=(embedder["char_emb_layer.embedding.weight"].shape[0]
                            + constants.CHAR_ID_SHIFT),
            lstm_units=config.lstm_units, projection_dim=config.projection_dim,
            num_layers=config.num_layers, cell_clip=config.cell_clip,
            proj_clip=config.proj_clip, use_skip_connections=True,
            char_vocabulary=True,
            # EFML's code writes <eow>'s id first and <bow>'s last (module docstring).
            begin_word_char=specials["<eow>"], end_word_char=specials["<bow>"],
            padding_char=specials["<pad>"], begin_sentence_char=specials[BEGIN_SENTENCE_TOKEN],
            end_sentence_char=specials[END_SENTENCE_TOKEN],
            forget_bias=0.0, **words)
    except ValueError as error:
        raise EFMLModelError(f"{model.config_file}: {error}") from None


def efml_options_of_dir(directory):
    """`efml_options` of an EFML model directory (read whole, and checked, first)."""
    return efml_options(read_efml_model(directory))


def efml_vocabulary(model):
    """The `TokenVocabulary` of an EFML model: its char.dic (and word.dic), specials
    converted as `efml_options` converts them.

    Args:
        model: an `EFMLModel`, or a model directory (then only the configuration and the
            .dic files are read).

    Example:
    >>> vocabulary = efml_vocabulary("tests/fixtures/efml/tiny_zip")  # doctest: +SKIP
    >>> vocabulary_batch_to_ids(vocabulary, [["the", "cat"]])["word_ids"]  # doctest: +SKIP
    array([[5, 6]], dtype=int32)
    """
    if isinstance(model, EFMLModel):
        return dic_token_vocabulary(model.chars, model.words,
                                    model.config.max_characters_per_token)
    directory = os.fspath(model)
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"EFML model directory not found: {directory}.")
    config = read_efml_config(directory)[1]
    return read_dic_vocabulary(os.path.join(directory, CHAR_DIC),
                               os.path.join(directory, WORD_DIC)
                               if config.word_embedding_dim > 0 else None,
                               config.max_characters_per_token)


def read_dic_vocabulary(char_dic, word_dic, max_characters_per_token):
    """The `TokenVocabulary` of a char.dic and an optional word.dic (paths; None: no
    words), read the way EFML's code uses them (`dic_token_vocabulary`)."""
    chars = read_dic(char_dic, CHAR_SPECIALS)
    words = (read_dic(word_dic, WORD_SPECIALS, WORD_OPTIONAL_SPECIALS)
             if word_dic is not None else None)
    return dic_token_vocabulary(chars, words, max_characters_per_token)


def dic_token_vocabulary(chars, words, max_characters_per_token):
    """A `TokenVocabulary` from `DicVocabulary` chars (and words, or None): a row begins
    with `<eow>`'s id and ends with `<bow>`'s, as EFML's code writes it (module docstring)."""
    specials = chars.special_ids
    return TokenVocabulary(
        chars=chars.token_ids, unknown_char=specials["<oov>"], padding_char=specials["<pad>"],
        begin_word_char=specials["<eow>"], end_word_char=specials["<bow>"],
        begin_sentence_char=specials[BEGIN_SENTENCE_TOKEN],
        end_sentence_char=specials[END_SENTENCE_TOKEN],
        max_characters_per_token=max_characters_per_token,
        begin_sentence_token=BEGIN_SENTENCE_TOKEN, end_sentence_token=END_SENTENCE_TOKEN,
        words=None if words is None else words.token_ids,
        unknown_word=None if words is None else words.special_ids["<oov>"])


def load_efml_weights(bilm, model):
    """Assigns an EFML model's weights to a `BiLM` built from `efml_options(model)`.

    All or nothing: the options, then every array's shape and values are checked before
    the first weight is assigned.

    Args:
        bilm: a `BiLM` (built with `zero_init=True` to hold one copy of the model).
        model: an `EFMLModel`, or a model directory to read.

    Raises:
        EFMLModelError: the biLM's options are not the model's, or an array does not fit
            its weight or is not finite (one line naming the file and the array).
    """
    if not isinstance(model, EFMLModel):
        model = read_efml_model(model)
    expected = efml_options(model)
    if bilm.options != expected:
        differ = [name for name in expected.__dataclass_fields__ if name != "extra"
                  and getattr(bilm.options, name) != getattr(expected, name)]
        raise EFMLModelError(
            f"{model.directory}: the BiLM's options differ from the model's in "
            + ", ".join(f"{name} ({getattr(bilm.options, name)!r}, expected "
                        f"{getattr(expected, name)!r})" for name in differ)
            + "; build it with BiLM(efml_options(model)).")
    assignments = _assignments(bilm, model)
    for where, variable, array in assignments:
        if tuple(array.shape) != tuple(variable.shape):
            raise EFMLModelError(f"{where} has shape {tuple(array.shape)} for {variable.path}; "
                                 f"expected {tuple(variable.shape)}.")
        if not np.all(np.isfinite(array)):
            raise EFMLModelError(f"{where} holds non-finite values (NaN or inf); expected "
                                 "finite weights.")
    from keras import ops

    # The arrays are mostly views of the files (`read_torch_state_dict` maps them): each is
    # copied into the process once, one at a time, so loading holds about one copy of the
    # model, in its variables. `keras.ops` converts it for any backend.
    while assignments:
        _, variable, array = assignments.pop(0)
        value = ops.convert_to_tensor(np.ascontiguousarray(array, np.float32))
        del array
        variable.assign(ops.cast(value, variable.dtype))
        del value


def _assignments(bilm, model):
    """`[(where, variable, array)]` for every weight of the biLM, the arrays converted to
    our layout (views where the conversion is a transpose or a slice)."""
    directory, config = model.directory, model.config
    embedder_file = os.path.join(directory, TOKEN_EMBEDDER_FILE)
    encoder_file = os.path.join(directory, ENCODER_FILE)
    weights, encoder = model.token_embedder_weights, model.encoder_weights
    chars, num_filters = bilm.token_embedder, config.num_filters
    entries = []

    def add(key, variable, array, path=embedder_file):
        entries.append((f"{path}: {key}", variable, array))

    add("char_emb_layer.embedding.weight", chars.char_embeddings,
        weights["char_emb_layer.embedding.weight"])
    for i in range(len(config.filters)):
        kernel = weights[f"convolutions.{i}.weight"]  # (n, C, w)
        add(f"convolutions.{i}.weight", chars.conv_kernels[i], kernel.transpose(2, 1, 0))
        add(f"convolutions.{i}.bias", chars.conv_biases[i], weights[f"convolutions.{i}.bias"])
    for k, highway in enumerate(chars.highways):
        key = f"highways._layers.{k}"
        kernel, bias = weights[key + ".weight"], weights[key + ".bias"]  # (2F, F), (2F,)
        add(key + ".weight[:F]", highway.transform_kernel, kernel[:num_filters].T)
        add(key + ".bias[:F]", highway.transform_bias, bias[:num_filters])
        add(key + ".weight[F:]", highway.carry_kernel, -kernel[num_filters:].T)
        add(key + ".bias[F:]", highway.carry_bias, -bias[num_filters:])
    projection = weights["projection.weight"]  # (P, W + F): columns [word; chars]
    word_dim = config.word_embedding_dim
    add("projection.weight[:, W:]", chars.projection.kernel, projection[:, word_dim:].T)
    add("projection.bias", chars.projection.bias, weights["projection.bias"])
    if bilm.word_embedder is not None:
        add("word_emb_layer.embedding.weight", bilm.word_embedder.embeddings,
            weights["word_emb_layer.embedding.weight"])
        add("projection.weight[:, :W]", bilm.word_embedder.projection_kernel,
            projection[:, :word_dim].T)
    for direction in constants.DIRECTIONS:
        for k, cell in enumerate(bilm.contextual_encoder.cells[direction]):
            prefix = f"{direction}_layer_{k}."
            for key, variable in (("input_linearity.weight", cell.input_kernel),
                                  ("state_linearity.weight", cell.recurrent_kernel),
                                  ("state_linearity.bias", cell.bias),
                                  ("state_projection.weight", cell.projection_kernel)):
                add(prefix + key, variable, encoder[prefix + key], encoder_file)
    return entries
