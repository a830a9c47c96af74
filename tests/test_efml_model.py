"""ELMoForManyLangs models as keras-elmo vocabulary models (docs/model.md section 10).

Parity: `BiLM.from_efml` on the fixtures that EFML's own code made gives EFML's own outputs
(tests/fixtures/efml/README.md) within 1e-5 in every layer. Beside it: the new layer and the
forget bias against plain numpy, the text -> ids contract written out by hand, padding
invariance, config / `.keras` / weights.hdf5 round trips, and the refusals.
"""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from cpu_class import needs_bfloat16_products
from keras_elmo import BiLM, BiLMOptions, batch_to_ids
from keras_elmo.formats import weight_file
from keras_elmo.formats.efml_model import EFMLModelError, read_efml_model
from keras_elmo.formats.efml_weights import efml_options, efml_vocabulary, load_efml_weights
from keras_elmo.layers import Highway, LSTMProjectionCell, WordEmbedding
from keras_elmo.layers.sentence_boundaries import with_boundary_tokens
from keras_elmo.text.token_vocabulary import TokenVocabulary, vocabulary_batch_to_ids

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "efml")
MODELS = ("tiny_zip", "tiny_legacy", "tiny_no_words")
ATOL = 1e-5


def fixture_dir(name):
    return os.path.join(FIXTURES, name)


def sentence_lines(name):
    """Every line of sentences.txt split on whitespace, the empty one included."""
    with open(os.path.join(fixture_dir(name), "sentences.txt"), encoding="utf-8") as f:
        return [line.split() for line in f]


@pytest.fixture(scope="module")
def loaded():
    """name -> (BiLM, TokenVocabulary), each model loaded once."""
    return {name: (BiLM.from_efml(fixture_dir(name)), efml_vocabulary(fixture_dir(name)))
            for name in MODELS}


def run(bilm, vocabulary, sentences):
    out = bilm(vocabulary_batch_to_ids(vocabulary, sentences))
    return np.asarray(out["layers"]), np.asarray(out["mask"])


# --- parity with EFML's own outputs ---------------------------------------------------------
@pytest.mark.parametrize("name", MODELS)
def test_every_layer_matches_efml_in_one_batch(loaded, name):
    """All lines of sentences.txt in one batch (EFML's first batch after loading), the empty
    line included: it gives (3, 0, 2P) and changes no other sentence."""
    bilm, vocabulary = loaded[name]
    sentences = sentence_lines(name)
    expected = np.load(os.path.join(fixture_dir(name), "efml_outputs.npz"))
    layers, mask = run(bilm, vocabulary, sentences)
    non_empty = [s for s in sentences if s]
    assert len(expected.files) == len(non_empty) and len(non_empty) < len(sentences)
    worst, k = 0.0, 0
    for i, sentence in enumerate(sentences):
        n = len(sentence)
        ours = layers[i, :, :n]  # (3, n, 2P)
        assert mask[i].sum() == n and not np.any(layers[i, :, n:])
        if not sentence:
            assert ours.shape == (3, 0, 2 * bilm.options.projection_dim)
            continue
        np.testing.assert_allclose(ours, expected[str(k)], atol=ATOL, rtol=0,
                                   err_msg=f"{name} sentence {i}")
        worst, k = max(worst, float(np.abs(ours - expected[str(k)]).max())), k + 1
    print(f"{name}: max |ours - EFML| = {worst:.2e}")


def test_a_batch_of_one_empty_sentence(loaded):
    bilm, vocabulary = loaded["tiny_zip"]
    layers, mask = run(bilm, vocabulary, [[]])
    assert layers.shape == (1, 3, 0, 2 * bilm.options.projection_dim) and mask.shape == (1, 0)


def test_the_legacy_and_the_zip_files_load_the_same_weights(loaded):
    zipped, legacy = loaded["tiny_zip"][0], loaded["tiny_legacy"][0]
    for a, b in zip(zipped.get_weights(), legacy.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_the_options_say_what_efml_computes():
    options = efml_options(read_efml_model(fixture_dir("tiny_zip")))
    assert (options.char_vocabulary, options.num_characters, options.forget_bias,
            options.use_skip_connections, options.use_char_projection) == (True, 89, 0.0,
                                                                           True, True)
    # EFML writes <eow>'s id (2) first in a row and <bow>'s (3) after the chars
    assert (options.begin_word_char, options.end_word_char, options.padding_char,
            options.begin_sentence_char, options.end_sentence_char) == (2, 3, 1, 4, 5)
    assert (options.word_vocabulary_size, options.word_embedding_dim,
            options.boundary_word_ids) == (24, 12, (3, 4))
    assert options.boundary_char_ids[0] == [3, 5, 4] + [2] * 47


# --- text -> ids, written out by hand --------------------------------------------------------
def test_vocabulary_ids_by_hand():
    vocabulary = efml_vocabulary(fixture_dir("tiny_zip"))
    long_token = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"  # 62 chars
    ids = vocabulary_batch_to_ids(vocabulary, [["ab", "The", "the", "<bos>", "€"], [long_token],
                                               []])
    chars, words = ids["char_ids"], ids["word_ids"]
    assert chars.shape == (3, 5, 50) and words.shape == (3, 5)
    # [<eow>=2, a=7, b=8, <bow>=3, <pad>=1 ...] + 1
    assert chars[0, 0].tolist() == [3, 8, 9, 4] + [2] * 46
    assert chars[0, 3].tolist() == [3, 5, 4] + [2] * 47  # the <bos> boundary row
    assert chars[0, 4].tolist() == [3, 1, 4] + [2] * 47  # an unknown char: <oov> = 0
    # words: case kept ("The" unknown), the literal <bos> is word.dic's <bos> (2)
    assert words[0].tolist() == [1, 1, 5, 3, 1]
    # cut to 48 chars: no room for padding, <bow> in the last slot, the cut token's word id
    assert chars[1, 0, -1] == 4 and np.all(chars[1, 0, 1:49] > 4) and words[1, 0] == 1
    assert not chars[1, 1:].any() and not chars[2].any() and not words[2].any()


def test_vocabulary_without_words_gives_char_ids_only():
    vocabulary = efml_vocabulary(fixture_dir("tiny_no_words"))
    assert not vocabulary.has_words
    assert list(vocabulary_batch_to_ids(vocabulary, [["a"]])) == ["char_ids"]


# --- the new layers and the forget bias against numpy ---------------------------------------
def test_word_embedding_against_numpy():
    rng = np.random.default_rng(0)
    layer = WordEmbedding(vocabulary_size=5, embedding_dim=3, output_dim=4)
    ids = np.array([[2, 5, 1], [3, 0, 0]], np.int32)
    layer.build(ids.shape)
    table, kernel = rng.normal(size=(5, 3)), rng.normal(size=(3, 4))
    layer.set_weights([table.astype("float32"), kernel.astype("float32")])
    expected = np.concatenate([np.zeros((1, 3)), table])[ids] @ kernel  # (2, 3, 4)
    out = layer(ids)
    np.testing.assert_allclose(np.asarray(out), expected, atol=1e-6)
    assert not np.any(np.asarray(out)[1, 1:])
    np.testing.assert_array_equal(np.asarray(out._keras_mask), ids != 0)
    with pytest.raises(ValueError, match=r"word ids must be in \[0, 5\].*received ids from 6 "
                                         r"to 6\."):
        layer(np.array([[6]]))


def test_sentence_boundaries_of_word_ids_and_of_vocabulary_char_rows():
    """A vocabulary model's boundary tokens ride along after every row (`BiLM` encodes
    them in the same call): single word ids, or rows of its character vocabulary."""
    words = with_boundary_tokens(np.array([[4, 5, 0], [6, 0, 0], [0, 0, 0]]), [7, 8])
    assert np.asarray(words).tolist() == [[4, 5, 0, 7, 8], [6, 0, 0, 7, 8], [0, 0, 0, 7, 8]]
    chars = with_boundary_tokens(np.array([[[3, 9, 4]]]), [[3, 5, 4], [3, 6, 4]])
    assert np.asarray(chars).tolist() == [[[3, 9, 4], [3, 5, 4], [3, 6, 4]]]
    assert tuple(with_boundary_tokens(np.zeros((0, 0, 3), np.int32),
                                      [[3, 5, 4], [3, 6, 4]]).shape) == (0, 2, 3)


def test_efml_highway_is_our_highway_with_the_converted_weights():
    """EFML: y = W x + b, g = sigmoid(y[F:]), g x + (1 - g) relu(y[:F])."""
    rng = np.random.default_rng(1)
    f = 6
    w, b, x = rng.normal(size=(2 * f, f)), rng.normal(size=2 * f), rng.normal(size=(4, f))
    y = x @ w.T + b
    gate = 1.0 / (1.0 + np.exp(-y[:, f:]))
    expected = gate * x + (1.0 - gate) * np.maximum(y[:, :f], 0.0)
    layer = Highway()
    layer.build((None, f))
    layer.carry_kernel.assign((-w[f:].T).astype("float32"))
    layer.carry_bias.assign((-b[f:]).astype("float32"))
    layer.transform_kernel.assign(w[:f].T.astype("float32"))
    layer.transform_bias.assign(b[:f].astype("float32"))
    np.testing.assert_allclose(np.asarray(layer(x.astype("float32"))), expected, atol=1e-5)


@pytest.mark.parametrize("forget_bias", [0.0, 1.0, 0.5])
def test_one_step_with_any_forget_bias_against_numpy(forget_bias):
    rng = np.random.default_rng(2)
    units, proj = 5, 3
    cell = LSTMProjectionCell(units, proj, cell_clip=1.5, proj_clip=0.8,
                              forget_bias=forget_bias)
    cell.build((None, proj))
    w_x, w_h = rng.normal(size=(4 * units, proj)), rng.normal(size=(4 * units, proj))
    bias, w_p = rng.normal(size=4 * units), rng.normal(size=(proj, units))
    for variable, value in zip((cell.input_kernel, cell.recurrent_kernel, cell.bias,
                                cell.projection_kernel), (w_x, w_h, bias, w_p)):
        variable.assign(value.astype("float32"))
    x, h, c = rng.normal(size=(proj, 2)), rng.normal(size=(proj, 2)), rng.normal(size=(units, 2))
    z = w_x @ x + w_h @ h + bias[:, None]  # gates i, f, c, o
    sig = lambda v: 1.0 / (1.0 + np.exp(-v))  # noqa: E731
    i, f, g, o = (z[k * units:(k + 1) * units] for k in range(4))
    c_new = np.clip(sig(f + forget_bias) * c + sig(i) * np.tanh(g), -1.5, 1.5)
    h_new = np.clip(w_p @ (sig(o) * np.tanh(c_new)), -0.8, 0.8)
    gates = cell.input_gates(x.astype("float32"))
    got_h, got_c = cell.step(gates, (h.astype("float32"), c.astype("float32")))
    np.testing.assert_allclose(np.asarray(got_c), c_new, atol=1e-5)
    np.testing.assert_allclose(np.asarray(got_h), h_new, atol=1e-5)
    assert LSTMProjectionCell.from_config(cell.get_config()).forget_bias == forget_bias


# --- the model: padding, round trips, entry points -------------------------------------------
def test_padding_and_batch_mates_change_no_real_position(loaded):
    bilm, vocabulary = loaded["tiny_zip"]
    sentences = [["the", "cat", "sat"], ["弲溦該", "zebra"], ["dog"]]
    batch, mask = run(bilm, vocabulary, sentences)
    ids = vocabulary_batch_to_ids(vocabulary, sentences)
    padded = {key: np.pad(value, ((0, 0), (0, 3)) + ((0, 0),) * (value.ndim - 2))
              for key, value in ids.items()}
    longer = np.asarray(bilm(padded)["layers"])
    np.testing.assert_allclose(longer[:, :, :3], batch, atol=1e-6)
    assert not longer[:, :, 3:].any()
    for i, sentence in enumerate(sentences):
        alone, _ = run(bilm, vocabulary, [sentence])
        np.testing.assert_allclose(batch[i:i + 1, :, :len(sentence)], alone, atol=1e-6)


def test_token_embedding_entry_point_of_a_word_model(loaded):
    bilm, vocabulary = loaded["tiny_zip"]
    ids = vocabulary_batch_to_ids(vocabulary, [["the", "cat"], ["弲"]])
    vectors = bilm.token_embedder(ids["char_ids"]) + bilm.word_embedder(ids["word_ids"])
    out = bilm.layers_from_token_embeddings(vectors, ids["word_ids"] != 0)
    np.testing.assert_allclose(np.asarray(out["layers"]), np.asarray(bilm(ids)["layers"]),
                               atol=1e-6)


@pytest.mark.parametrize("name", ["tiny_zip", "tiny_no_words"])
def test_config_keras_file_and_weight_file_round_trips(loaded, name, tmp_path):
    bilm, vocabulary = loaded[name]
    ids = vocabulary_batch_to_ids(vocabulary, sentence_lines(name))
    expected = np.asarray(bilm(ids)["layers"])
    rebuilt = BiLM.from_config(json.loads(json.dumps(bilm.get_config())))
    assert rebuilt.options == bilm.options
    rebuilt.set_weights(bilm.get_weights())
    np.testing.assert_allclose(np.asarray(rebuilt(ids)["layers"]), expected, atol=1e-6)
    path = str(tmp_path / "efml.keras")
    bilm.save(path)
    restored = keras.models.load_model(path)
    np.testing.assert_allclose(np.asarray(restored(ids)["layers"]), expected, atol=1e-6)
    options_file, weights_file = weight_file.save_published(bilm, str(tmp_path / "ours"))
    with open(options_file) as f:
        written = json.load(f)
    assert written["lstm"]["forget_bias"] == 0.0 and "char_vocabulary" in written["char_cnn"]
    assert ("word_embedding" in written) == (name == "tiny_zip")
    reread = BiLM.from_weights(options_file, weights_file)
    np.testing.assert_allclose(np.asarray(reread(ids)["layers"]), expected, atol=1e-6)


def test_a_vocabulary_model_projects_its_chars_even_when_the_filters_total_p(tmp_path):
    """EFML always projects `[words; chars]`; a byte model with F == P has no projection."""
    fields = dict(char_vocabulary=True, num_characters=10, padding_char=1, begin_word_char=2,
                  end_word_char=3, begin_sentence_char=4, end_sentence_char=5,
                  word_vocabulary_size=4, word_embedding_dim=3, begin_sentence_word=1,
                  end_sentence_word=1, filters=((1, 4), (2, 4)))  # F = 8 = P
    bilm = BiLM(BiLMOptions.tiny(**fields))
    assert bilm.token_embedder.projection is not None
    assert BiLM(BiLMOptions.tiny(filters=((1, 4), (2, 4)))).token_embedder.projection is None
    ids = {"char_ids": np.array([[[3, 7, 4] + [2] * 47]], np.int32),
           "word_ids": np.array([[2]], np.int32)}
    reread = BiLM.from_weights(*weight_file.save_published(bilm, str(tmp_path)))
    np.testing.assert_allclose(np.asarray(reread(ids)["layers"]),
                               np.asarray(bilm(ids)["layers"]), atol=1e-6)


@needs_bfloat16_products
def test_a_bfloat16_vocabulary_model_runs_close_to_efml():
    bilm = BiLM.from_efml(fixture_dir("tiny_zip"), dtype="bfloat16")
    assert bilm.word_embedder.compute_dtype == "bfloat16"
    vocabulary = efml_vocabulary(fixture_dir("tiny_zip"))
    layers, _ = run(bilm, vocabulary, [sentence_lines("tiny_zip")[0]])
    assert layers.dtype == np.float32
    expected = np.load(os.path.join(fixture_dir("tiny_zip"), "efml_outputs.npz"))["0"]
    np.testing.assert_allclose(layers[0], expected, atol=0.1)


# --- refusals --------------------------------------------------------------------------------
def test_weights_for_other_options_are_refused_and_nothing_is_assigned():
    model = read_efml_model(fixture_dir("tiny_zip"))
    options = efml_options(model)
    other = BiLM(BiLMOptions.from_dict({**options.to_dict(),
                                        "lstm": {**options.to_dict()["lstm"], "dim": 40}}))
    before = [w.copy() for w in other.get_weights()]
    with pytest.raises(EFMLModelError) as caught:
        load_efml_weights(other, model)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(fixture_dir("tiny_zip"))
    assert "lstm_units (40, expected 32)" in message
    for a, b in zip(before, other.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_a_non_efml_directory_is_file_not_found(tmp_path):
    (tmp_path / "options.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match="has no config.json"):
        BiLM.from_efml(str(tmp_path))


def test_the_text_paths_need_the_vocabulary_of_a_vocabulary_model():
    """Without it they would read bytes as rows of the character vocabulary."""
    from keras_elmo import ElmoLayer, TokenEmbeddingCache
    from keras_elmo.export.elmo_module import ElmoModule

    bilm = BiLM(efml_options(read_efml_model(fixture_dir("tiny_no_words"))))
    for make in (lambda: TokenEmbeddingCache(bilm), lambda: ElmoModule(bilm),
                 lambda: bilm.batch_to_ids([["a"]]),
                 lambda: ElmoLayer(bilm)(tf.constant([["a", "b"]]))):
        with pytest.raises(ValueError, match="needs the token vocabulary of this vocabulary "
                                             "model"):
            make()


def test_word_ids_out_of_range_are_refused(loaded):
    bilm, vocabulary = loaded["tiny_zip"]
    ids = vocabulary_batch_to_ids(vocabulary, [["the"]])
    ids["word_ids"][0, 0] = 25
    with pytest.raises(ValueError, match=r"word ids must be in \[0, 24\]"):
        bilm(ids)


@pytest.mark.parametrize("change, message", [
    (dict(char_vocabulary=True, num_characters=10, padding_char=12),
     "char_cnn.char_vocabulary.padding must be an id in [0, 8] (a row of its table of 9); "
     "received 12."),
    (dict(word_vocabulary_size=3, word_embedding_dim=2),
     "A word embedding needs a vocabulary model (char_vocabulary=True); received "
     "word_vocabulary_size=3, word_embedding_dim=2 with char_vocabulary=False."),
    (dict(forget_bias="0"), "lstm.forget_bias must be a finite number; received '0'."),
])
def test_options_refusals_are_one_line(change, message):
    fields = dict(begin_word_char=2, end_word_char=3, begin_sentence_char=4,
                  end_sentence_char=5) if change.get("char_vocabulary") else {}
    with pytest.raises(ValueError) as caught:
        BiLMOptions.tiny(**fields, **change)
    assert str(caught.value) == message


# --- a byte model is what it was -------------------------------------------------------------
def test_a_byte_model_writes_the_published_options_and_takes_a_dict_too():
    assert BiLMOptions.published().to_dict() == {
        "lstm": {"dim": 4096, "projection_dim": 512, "n_layers": 2, "cell_clip": 3.0,
                 "proj_clip": 3.0, "use_skip_connections": True},
        "char_cnn": {"activation": "relu", "n_highway": 2, "embedding": {"dim": 16},
                     "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512],
                                 [7, 1024]],
                     "n_characters": 262, "max_characters_per_token": 50}}
    options = BiLMOptions.tiny()
    assert not options.char_vocabulary and options.forget_bias == 1.0
    bilm = BiLM(options)
    assert bilm.word_embedder is None
    ids = batch_to_ids([["a", "cat"], ["dogs"]])
    np.testing.assert_array_equal(np.asarray(bilm({"char_ids": ids})["layers"]),
                                  np.asarray(bilm(ids)["layers"]))


def test_vocabulary_options_round_trip_through_json():
    options = efml_options(read_efml_model(fixture_dir("tiny_zip")))
    assert BiLMOptions.from_dict(json.loads(json.dumps(options.to_dict()))) == options
    vocabulary = TokenVocabulary(chars={"x": 1}, unknown_char=0, padding_char=1,
                                 begin_word_char=2, end_word_char=3, begin_sentence_char=4,
                                 end_sentence_char=5)
    assert not vocabulary.has_words
