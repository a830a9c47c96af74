"""keras_elmo.formats.efml_model: ELMoForManyLangs model directories, read without torch.

The fixtures were made by EFML's own code (tests/fixtures/efml/README.md). The last test runs
a plain-numpy forward pass of the model read and compares it with EFML's own outputs, which
checks the reader's names and shapes against what EFML computes with them.
"""

import json
import os
import shutil

import numpy as np
import pytest

import torch_file_writer as tw
from keras_elmo.formats import efml_model
from keras_elmo.formats.efml_model import (
    EFMLModelError, is_efml_model_dir, read_efml_config, read_efml_model)
from keras_elmo.formats.dic_file import DicFileError, read_dic

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "efml")
MODELS = ("tiny_zip", "tiny_legacy", "tiny_no_words")
CONFIG_NAME = "cnn_50_100_512_4096_sample.json"


def copy_model(tmp_path, name="tiny_zip"):
    target = str(tmp_path / name)
    shutil.copytree(os.path.join(FIXTURES, name), target)
    return target


def edit_config(directory, section, key, value=None, delete=False):
    path = os.path.join(directory, CONFIG_NAME)
    with open(path) as f:
        config = json.load(f)
    if delete:
        del config[section][key]
    else:
        config[section][key] = value
    with open(path, "w") as f:
        json.dump(config, f)
    return path


def error_of(directory, error=EFMLModelError):
    with pytest.raises(error) as caught:
        read_efml_model(directory)
    assert "\n" not in str(caught.value)
    return str(caught.value)


# --- what is read ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", MODELS)
def test_reads_the_fixtures(name):
    model = read_efml_model(os.path.join(FIXTURES, name))
    config = model.config
    assert (config.char_embedding_dim, config.filters, config.num_highway, config.activation,
            config.max_characters_per_token) == (10, ((1, 8), (2, 8), (3, 16), (4, 16)), 2,
                                                 "relu", 50)
    assert (config.num_layers, config.lstm_units, config.projection_dim, config.cell_clip,
            config.proj_clip, config.num_filters) == (2, 32, 16, 3.0, 3.0, 48)
    assert model.config_file == os.path.join(FIXTURES, name, CONFIG_NAME)
    assert model.chars.special_ids == {"<oov>": 0, "<pad>": 1, "<bow>": 3, "<eow>": 2,
                                       "<bos>": 4, "<eos>": 5}
    assert model.chars.token_ids["\u3000"] == 6  # its line strips to "6"
    assert list(model.token_embedder_weights) == list(efml_model.token_embedder_shapes(config))
    assert list(model.encoder_weights) == list(efml_model.encoder_shapes(config))
    if name == "tiny_no_words":
        assert config.word_embedding_dim == 0 and model.words is None
        assert not os.path.exists(os.path.join(FIXTURES, name, "word.dic"))
    else:
        assert config.word_embedding_dim == 12
        assert model.words.special_ids == {"<oov>": 0, "<pad>": 1, "<bos>": 2, "<eos>": 3}
        assert model.words.token_ids["弲溦該"] == 18


def test_recognises_a_model_directory():
    assert is_efml_model_dir(os.path.join(FIXTURES, "tiny_zip"))
    assert not is_efml_model_dir(FIXTURES)
    assert not is_efml_model_dir(os.path.join(FIXTURES, "tiny_zip", "config.json"))


# --- the configuration -----------------------------------------------------------------------
def test_config_path_relative_to_the_directory_comes_first(tmp_path):
    directory = copy_model(tmp_path)
    os.makedirs(os.path.join(directory, "configs"))
    shutil.copy(os.path.join(directory, CONFIG_NAME), os.path.join(directory, "configs",
                                                                   "other.json"))
    args = os.path.join(directory, "config.json")
    with open(args) as f:
        arguments = json.load(f)
    assert not os.path.exists(arguments["config_path"])  # the released files' quirk
    arguments["config_path"] = "configs/other.json"
    with open(args, "w") as f:
        json.dump(arguments, f)
    assert read_efml_config(directory)[0] == os.path.join(directory, "configs/other.json")


def test_config_falls_back_to_the_values_efml_ships(tmp_path):
    directory = copy_model(tmp_path)
    os.remove(os.path.join(directory, CONFIG_NAME))
    config_file, config = read_efml_config(directory)
    assert CONFIG_NAME in config_file
    assert (config.lstm_units, config.projection_dim, config.word_embedding_dim,
            config.char_embedding_dim, config.num_filters) == (4096, 512, 100, 50, 2048)
    # the tiny weights do not fit those values, and the message says where they came from
    assert "cnn_50_100_512_4096_sample.json (the values elmoformanylangs ships)" in \
        error_of(directory)


def test_config_named_nowhere_is_file_not_found(tmp_path):
    directory = copy_model(tmp_path)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump({"config_path": "/home/elmo/configs/mine.json"}, f)
    assert error_of(directory, FileNotFoundError) == (
        f"{directory}/config.json: names the model configuration "
        f"'/home/elmo/configs/mine.json', which is neither there nor in {directory} as "
        "mine.json; expected that file beside config.json.")


@pytest.mark.parametrize("section, key, value, found", [
    ("token_embedder", "name", "lstm", "token_embedder.name is 'lstm' (EFML's LSTM char "
                                       "encoder); expected 'cnn', the only one keras-elmo "
                                       "reads."),
    ("token_embedder", "name", "gru", "token_embedder.name is 'gru'; expected 'cnn'."),
    ("encoder", "name", "lstm", "encoder.name is 'lstm'; expected 'elmo'"),
    ("token_embedder", "activation", "gelu", "token_embedder.activation is 'gelu'; expected "
                                             "'relu' or 'tanh'."),
    ("token_embedder", "filters", [[60, 4]], "token_embedder.filters is [[60, 4]]; expected "
                                             "[[width, count], ...] of positive ints, widths "
                                             "<= 50."),
    ("encoder", "n_layers", 0, "encoder.n_layers is 0; expected an int >= 1."),
    ("token_embedder", "char_dim", 0, "token_embedder.char_dim is 0; expected an int >= 1."),
    ("encoder", "cell_clip", -1, "encoder.cell_clip is -1; expected a number >= 0 or null."),
])
def test_refuses_configurations_it_cannot_read(tmp_path, section, key, value, found):
    directory = copy_model(tmp_path)
    path = edit_config(directory, section, key, value)
    assert error_of(directory).startswith(f"{path}: {found}")


def test_refuses_a_configuration_missing_a_key(tmp_path):
    directory = copy_model(tmp_path)
    path = edit_config(directory, "encoder", "cell_clip", delete=True)
    assert error_of(directory) == (f"{path}: has no encoder.cell_clip; expected it among "
                                   "['dim', 'n_layers', 'name', 'proj_clip', 'projection_dim'].")


def test_zero_clips_mean_no_clipping(tmp_path):
    directory = copy_model(tmp_path)
    edit_config(directory, "encoder", "cell_clip", 0)
    edit_config(directory, "encoder", "proj_clip", None)
    config = read_efml_config(directory)[1]
    assert config.cell_clip is None and config.proj_clip is None


# --- the vocabularies ------------------------------------------------------------------------
def write_dic(tmp_path, text, name="char.dic"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


SPECIAL_LINES = "<oov>\t0\n<pad>\t1\n<eow>\t2\n<bow>\t3\n<bos>\t4\n<eos>\t5\n"


def test_dic_line_of_an_id_alone_is_the_full_width_space(tmp_path):
    path = write_dic(tmp_path, SPECIAL_LINES + "\u3000\t6\na\t7\r\n")
    vocabulary = read_dic(path, efml_model.CHAR_SPECIALS)
    assert vocabulary.token_ids["\u3000"] == 6 and vocabulary.token_ids["a"] == 7
    assert vocabulary.special_ids["<bow>"] == 3 and vocabulary.special_ids["<eow>"] == 2


@pytest.mark.parametrize("extra, found", [
    ("a\t6\nb\t6\n", "line 8 gives id 6 to 'b', already the id of 'a'; expected each id once."),
    ("a\t6\na\t7\n", "line 8 repeats the token 'a' (first with id 6); expected each token "
                     "once."),
    ("\u3000\t6\n\u00a0\t7\n", "line 8 repeats the token '\\u3000' (first with id 6); "
                               "expected each token once."),
    ("a 6\nb\t7\n", "line 7 is 'a 6'; expected 'token<TAB>id' with a non-negative integer id."),
    ("a\t-6\n", "line 7 is 'a\\t-6'; expected 'token<TAB>id' with a non-negative integer id."),
    ("\n", "line 7 is ''; expected 'token<TAB>id' with a non-negative integer id."),
])
def test_refuses_bad_dic_lines(tmp_path, extra, found):
    path = write_dic(tmp_path, SPECIAL_LINES + extra)
    with pytest.raises(DicFileError) as caught:
        read_dic(path, efml_model.CHAR_SPECIALS)
    assert str(caught.value) == f"{path}: {found}"


def test_refuses_a_dic_without_its_specials(tmp_path):
    path = write_dic(tmp_path, "<oov>\t0\n<pad>\t1\na\t2\n")
    with pytest.raises(DicFileError, match="has no line for <bow>, <eow>, <bos>, <eos>"):
        read_dic(path, efml_model.CHAR_SPECIALS)


def test_word_boundaries_missing_from_word_dic_fall_back_to_oov(tmp_path):
    path = write_dic(tmp_path, "<pad>\t0\n<oov>\t1\nthe\t2\n", "word.dic")
    vocabulary = read_dic(path, efml_model.WORD_SPECIALS, efml_model.WORD_OPTIONAL_SPECIALS)
    assert vocabulary.special_ids == {"<oov>": 1, "<pad>": 0, "<bos>": 1, "<eos>": 1}


def test_refuses_an_id_beyond_its_embedding_rows(tmp_path):
    directory = copy_model(tmp_path)
    with open(os.path.join(directory, "char.dic"), "a", encoding="utf-8") as f:
        f.write("@\t88\n")
    assert error_of(directory) == (
        f"{directory}/char.dic: gives '@' the id 88, beyond the 88 rows of "
        f"char_emb_layer.embedding.weight in {directory}/token_embedder.pkl; expected ids "
        "below 88.")


def test_missing_files(tmp_path):
    directory = copy_model(tmp_path)
    os.remove(os.path.join(directory, "word.dic"))
    assert "has no word.dic" in error_of(directory, FileNotFoundError)
    directory = copy_model(tmp_path, "tiny_no_words")
    os.remove(os.path.join(directory, "char.dic"))
    assert "has no char.dic" in error_of(directory, FileNotFoundError)
    assert "EFML model directory not found" in error_of(str(tmp_path / "nowhere"),
                                                        FileNotFoundError)


# --- the state dicts -------------------------------------------------------------------------
def test_refuses_a_tensor_that_does_not_fit_the_configuration(tmp_path):
    directory = copy_model(tmp_path)
    path = edit_config(directory, "token_embedder", "word_dim", 13)
    assert error_of(directory) == (
        f"{directory}/token_embedder.pkl: word_emb_layer.embedding.weight has shape (24, 12); "
        f"expected (rows, 13) from {path}.")


def rewrite_encoder(directory, change):
    arrays = read_efml_model(directory).encoder_weights
    change(arrays)
    path = os.path.join(directory, "encoder.pkl")
    tw.save_arrays_zip(path, arrays)
    return path


def test_refuses_missing_and_extra_state_dict_keys(tmp_path):
    directory = copy_model(tmp_path)
    path = rewrite_encoder(directory, lambda a: a.pop("backward_layer_1.state_linearity.bias"))
    assert error_of(directory).startswith(
        f"{path}: has no backward_layer_1.state_linearity.bias; expected it (shape (128,)) "
        "for the model of")
    directory = copy_model(tmp_path, "tiny_no_words")
    path = rewrite_encoder(directory, lambda a: a.update(
        {"forward_layer_2.state_linearity.bias": np.zeros(128, np.float32)}))
    assert error_of(directory).startswith(
        f"{path}: holds forward_layer_2.state_linearity.bias (128,), which the model of")


def test_refuses_integer_weights(tmp_path):
    directory = copy_model(tmp_path)
    key = "forward_layer_0.state_linearity.bias"
    path = rewrite_encoder(directory, lambda a: a.update({key: np.zeros(128, np.int64)}))
    assert error_of(directory) == f"{path}: {key} holds int64; expected floating point."


# --- EFML's computation, in numpy, on the weights read ---------------------------------------
def char_ids(model, token):
    """EFML's char row of one token: <eow>'s id first and <bow>'s id last (EFML swaps the
    two names), the token's chars or the boundary special between, <pad> after."""
    chars = model.chars
    row = np.full(model.config.max_characters_per_token, chars.special_ids["<pad>"])
    inner = ([chars.special_ids[token]] if token in ("<bos>", "<eos>") else
             [chars.token_ids.get(c, chars.special_ids["<oov>"]) for c in token])
    row[0], row[1:len(inner) + 1], row[len(inner) + 1] = (chars.special_ids["<eow>"], inner,
                                                          chars.special_ids["<bow>"])
    return row


def token_embeddings(model, tokens):
    """(len(tokens), P): char CNN -> highways -> [word; chars] -> projection."""
    config, w = model.config, model.token_embedder_weights
    embedded = w["char_emb_layer.embedding.weight"][np.stack([char_ids(model, t)
                                                               for t in tokens])]  # (T, 50, C)
    pooled = []
    for i, (width, _) in enumerate(config.filters):
        windows = np.stack([embedded[:, j:j + width] for j in
                            range(config.max_characters_per_token - width + 1)], 1)
        conv = np.einsum("tjwc,ocw->tjo", windows, w[f"convolutions.{i}.weight"])
        pooled.append(np.maximum((conv + w[f"convolutions.{i}.bias"]).max(1), 0.0))
    x = np.concatenate(pooled, -1)  # (T, F)
    for k in range(config.num_highway):
        y = x @ w[f"highways._layers.{k}.weight"].T + w[f"highways._layers.{k}.bias"]
        carry = 1.0 / (1.0 + np.exp(-y[:, config.num_filters:]))
        x = carry * x + (1.0 - carry) * np.maximum(y[:, :config.num_filters], 0.0)
    if model.words is not None:
        words = model.words
        ids = [words.token_ids.get(t, words.special_ids["<oov>"]) for t in tokens]
        x = np.concatenate([w["word_emb_layer.embedding.weight"][ids], x], -1)  # (T, W + F)
    return x @ w["projection.weight"].T + w["projection.bias"]


def lstm(model, prefix, inputs):
    """One direction of one layer, zero initial state, gates i, f, g, o, clipped."""
    config, w, units = model.config, model.encoder_weights, model.config.lstm_units
    h, c, outputs = np.zeros(config.projection_dim), np.zeros(units), []
    for x in inputs:
        z = (w[prefix + "input_linearity.weight"] @ x + w[prefix + "state_linearity.weight"] @ h
             + w[prefix + "state_linearity.bias"])
        i, f, g, o = (z[k * units:(k + 1) * units] for k in range(4))
        c = np.clip(1 / (1 + np.exp(-i)) * np.tanh(g) + 1 / (1 + np.exp(-f)) * c,
                    -config.cell_clip, config.cell_clip)
        h = np.clip(w[prefix + "state_projection.weight"] @ (np.tanh(c) / (1 + np.exp(-o))),
                    -config.proj_clip, config.proj_clip)
        outputs.append(h)
    return np.array(outputs)


def efml_layers(model, sentence):
    """(1 + n_layers, len(sentence), 2P): what EFML's sents2elmo(output_layer=-2) gives."""
    cut = model.config.max_characters_per_token - 2
    tokens = ["<bos>"] + [t[:cut] for t in sentence] + ["<eos>"]
    x = token_embeddings(model, tokens)
    layers, forward, backward = [np.concatenate([x, x], -1)], x, x
    for k in range(model.config.num_layers):
        f = lstm(model, f"forward_layer_{k}.", forward)
        b = lstm(model, f"backward_layer_{k}.", backward[::-1])[::-1]
        forward, backward = (f + forward, b + backward) if k > 0 else (f, b)
        layers.append(np.concatenate([forward, backward], -1))
    return np.stack(layers)[:, 1:-1]


@pytest.mark.parametrize("name", MODELS)
def test_numpy_forward_of_the_weights_read_gives_efml_outputs(name):
    model = read_efml_model(os.path.join(FIXTURES, name))
    with open(os.path.join(FIXTURES, name, "sentences.txt"), encoding="utf-8") as f:
        sentences = [line.split() for line in f if line.split()]
    expected = np.load(os.path.join(FIXTURES, name, "efml_outputs.npz"))
    assert len(expected.files) == len(sentences)
    for i, sentence in enumerate(sentences):
        np.testing.assert_allclose(efml_layers(model, sentence), expected[str(i)], atol=1e-5,
                                   err_msg=f"sentence {i}")
