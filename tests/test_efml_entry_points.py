"""ELMoForManyLangs model directories, as downloaded, in every entry point that reads a model.

`keras-elmo embed`, `neighbors`, `export`, `train --init-from`, `perplexity`,
`ElmoEmbedder`, `keras_elmo.load_bilm` and `ElmoLayer` are given the tiny fixtures of
`tests/fixtures/efml` (written by EFML's own code, with EFML's own outputs for their
sentences): their vectors are held to EFML's outputs (the first batch of a fresh load,
`efml_outputs.npz`) or to the eager biLM's, the SavedModel in a process with TensorFlow
alone. The vocabulary's numpy path (`keras_elmo.text.token_vocabulary`) and its in-graph
twin (`VocabularyLookup`) are held to each other.
"""

import json
import os
import shutil

import h5py
import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_elmo
from keras_elmo.cli.main import main
from keras_elmo.text.token_vocabulary import vocabulary_batch_to_ids
from keras_elmo.text.vocabulary_lookup import VocabularyLookup
from test_export_helpers import finish_python, start_python

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "efml")
ATOL = 1e-5


def fixture_dir(name):
    return os.path.join(FIXTURES, name)


def lines(name):
    with open(os.path.join(fixture_dir(name), "sentences.txt"), encoding="utf-8") as f:
        return f.read().splitlines()


def efml_outputs(name):
    """EFML's own `(3, n, 2P)` per non-empty line, in order."""
    saved = np.load(os.path.join(fixture_dir(name), "efml_outputs.npz"))
    return [saved[str(i)] for i in range(len(saved.files))]


@pytest.fixture(scope="module")
def bilms():
    return {name: keras_elmo.load_bilm(fixture_dir(name))
            for name in ("tiny_zip", "tiny_no_words")}


def eager(bilm, sentences):
    """`bilm(bilm.batch_to_ids(...))["layers"]` per sentence, `(3, n, 2P)` each."""
    layers = bilm(bilm.batch_to_ids(sentences))["layers"].numpy()
    return [layers[i, :, :len(s)] for i, s in enumerate(sentences)]


# --- the vocabulary, in numpy and in the graph ------------------------------------------------
TRICKY = [["the", "cat", "北京", "弲溦該", "x" * 60, "<bos>", "<eos>", "", "\u3000", "zebra€"],
          ["猫"], []]


@pytest.mark.parametrize("name", ["tiny_zip", "tiny_no_words"])
def test_the_lookup_tables_give_the_numpy_ids(name):
    """CJK, unknown characters and words, a token over 48 characters, the boundary
    spellings, an empty word, the full-width space: the same ids both ways."""
    vocabulary = keras_elmo.efml_vocabulary(fixture_dir(name))
    lookup = VocabularyLookup(vocabulary)
    expected = vocabulary_batch_to_ids(vocabulary, TRICKY)
    width = max(len(s) for s in TRICKY)
    tokens = tf.constant([s + [""] * (width - len(s)) for s in TRICKY])
    real = tf.sequence_mask([len(s) for s in TRICKY], width)
    for got in (lookup.masked_ids(tokens, real), lookup.ragged_ids(tf.ragged.constant(TRICKY))):
        assert sorted(got) == sorted(expected)
        for key in expected:
            np.testing.assert_array_equal(got[key].numpy(), expected[key])


def test_invalid_utf8_is_dropped_inside_its_token_both_ways():
    vocabulary = keras_elmo.efml_vocabulary(fixture_dir("tiny_zip"))
    raw = [[b"ca\xfft", b"\xfe", "ca\udcfft"]]
    expected = vocabulary_batch_to_ids(vocabulary, raw)
    assert (expected["char_ids"][0, 0] == expected["char_ids"][0, 2]).all()
    got = VocabularyLookup(vocabulary).token_ids(tf.constant([[b"ca\xfft", b"\xfe", b"ca\xfft"]]))
    for key in expected:
        np.testing.assert_array_equal(got[key].numpy(), expected[key])


# --- Python entry points ---------------------------------------------------------------------
@pytest.mark.parametrize("name", ["tiny_zip", "tiny_legacy", "tiny_no_words"])
def test_embedder_of_the_directory_matches_efml(name):
    embedder = keras_elmo.ElmoEmbedder(fixture_dir(name))
    sentences = [line.split() for line in lines(name) if line.split()]
    for ours, theirs in zip(embedder.embed_sentences(sentences), efml_outputs(name)):
        np.testing.assert_allclose(ours, theirs, atol=ATOL)
    assert embedder.embed_sentence([]).shape == (3, 0, embedder.output_dim)


def test_token_cache_of_a_word_model_equals_the_model(bilms):
    bilm = bilms["tiny_zip"]
    cache = keras_elmo.TokenEmbeddingCache(bilm, ["the", "北京", "<oov>"])
    sentences = [["the", "北京", "zebra", "x" * 60], ["猫"], []]
    layers = cache.layers(sentences)
    for i, expected in enumerate(eager(bilm, sentences)):
        np.testing.assert_allclose(layers[i], expected, atol=ATOL)
    assert cache.misses == 3 and cache.hits == 2


def test_saved_in_the_published_layout_and_loaded_again(bilms, tmp_path):
    """options.json + weights.hdf5 + char.dic + word.dic: `load_bilm` gives the same model."""
    for name, bilm in bilms.items():
        directory = tmp_path / name
        keras_elmo.save_published(bilm, directory)
        names = sorted(os.listdir(directory))
        assert names == sorted(["options.json", "weights.hdf5", "char.dic"]
                               + (["word.dic"] if bilm.word_embedder is not None else []))
        again = keras_elmo.load_bilm(directory)
        assert again.vocabulary == bilm.vocabulary and again.options == bilm.options
        for a, b in zip(eager(again, TRICKY), eager(bilm, TRICKY)):
            np.testing.assert_array_equal(a, b)


def test_elmo_layer_takes_strings_trains_and_survives_a_keras_file(bilms, tmp_path):
    bilm = bilms["tiny_zip"]
    sentences = [["the", "cat", "北京"], ["猫"]]
    tokens = tf.constant([["the", "cat", "北京"], ["猫", "", ""]])
    layer = keras_elmo.ElmoLayer(bilm, return_layers=True, num_output_representations=0)
    expected = bilm(bilm.batch_to_ids(sentences))["layers"].numpy()
    np.testing.assert_array_equal(layer(tokens).numpy(), expected)
    np.testing.assert_array_equal(layer(tf.ragged.constant(sentences)).numpy(), expected)
    np.testing.assert_array_equal(layer(bilm.batch_to_ids(sentences)).numpy(), expected)

    text = keras.Input(shape=(None,), dtype="string")
    elmo = keras_elmo.ElmoLayer(bilm, name="elmo")
    tagger = keras.Model(text, keras.layers.Dense(2)(elmo(text)))
    tagger.compile(keras.optimizers.Adam(0.1), "mse")
    before = elmo.scalar_mixes[0].scalar_parameters.numpy().copy()
    tagger.fit(tokens, np.ones((2, 3, 2)), epochs=2, verbose=0)
    assert not np.array_equal(before, elmo.scalar_mixes[0].scalar_parameters.numpy())
    path = str(tmp_path / "tagger.keras")
    tagger.save(path)
    again = keras.models.load_model(path)
    assert again.get_layer("elmo").bilm.vocabulary == bilm.vocabulary
    np.testing.assert_allclose(again(tokens).numpy(), tagger(tokens).numpy(), atol=1e-6)


# --- the commands ----------------------------------------------------------------------------
def run_cli(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("name", ["tiny_zip", "tiny_legacy", "tiny_no_words"])
def test_embed_command_of_the_directory_matches_efml(name, tmp_path, capsys):
    out = str(tmp_path / "out.hdf5")
    code, stdout, _ = run_cli(capsys, "embed", fixture_dir(name),
                              os.path.join(fixture_dir(name), "sentences.txt"), out,
                              "--no-progress")
    assert code == 0 and "wrote" in stdout
    expected = iter(efml_outputs(name))
    with h5py.File(out) as f:
        for i, line in enumerate(lines(name)):
            if line.split():
                np.testing.assert_allclose(f[str(i)][()], next(expected), atol=ATOL)
            else:
                assert f[str(i)].shape == (3, 0, 32)


def test_neighbors_command_reads_the_directory(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat\n北京 the dog\n猫 cat\n", encoding="utf-8")
    code, stdout, _ = run_cli(capsys, "neighbors", fixture_dir("tiny_zip"), "the cat ran",
                              "--corpus", str(corpus), "--word", "cat", "--no-progress")
    assert code == 0 and "nearest tokens in context" in stdout


def test_perplexity_of_a_model_without_softmax_is_one_line(tmp_path, capsys):
    heldout = tmp_path / "h.txt"
    heldout.write_text("the cat\n", encoding="utf-8")
    code, stdout, stderr = run_cli(capsys, "perplexity", fixture_dir("tiny_zip"),
                                   "--heldout", str(heldout))
    assert code == 2 and stdout == ""
    assert stderr.count("\n") == 1 and "has no softmax" in stderr and "--init-from" in stderr


@pytest.mark.parametrize("remove, message", [
    ("token_embedder.pkl", "has no token_embedder.pkl"),
    ("char.dic", "has no char.dic"),
])
def test_a_directory_missing_a_file_is_one_line_naming_it(tmp_path, capsys, remove, message):
    broken = tmp_path / "model"
    shutil.copytree(fixture_dir("tiny_zip"), broken)
    os.remove(broken / remove)
    code, stdout, stderr = run_cli(capsys, "embed", str(broken),
                                   os.path.join(fixture_dir("tiny_zip"), "sentences.txt"),
                                   str(tmp_path / "out.hdf5"), "--no-progress")
    assert code != 0 and stdout == "" and stderr.count("\n") == 1 and message in stderr
    assert "Traceback" not in stderr and not os.path.exists(tmp_path / "out.hdf5")


# --- the export, with TensorFlow alone ----------------------------------------------------------
TF_ONLY = """
import json
import numpy as np
import tensorflow as tf

loaded = tf.saved_model.load({path!r})
text = tf.constant({text!r})
out = loaded.signatures["default"](text=text)
words = [t.split() for t in {text!r}]
width = max(len(w) for w in words)
tokens = loaded.signatures["tokens"](
    tokens=tf.constant([w + [""] * (width - len(w)) for w in words]),
    sequence_len=tf.constant([len(w) for w in words], tf.int32))
with tf.GradientTape() as tape:
    loss = tf.reduce_sum(loaded(text)["default"] ** 2)
grads = tape.gradient(loss, loaded.trainable_variables)
np.savez({out!r}, **{{k: v.numpy() for k, v in out.items() if k != "tokens"}},
         **{{"tokens/" + k: v.numpy() for k, v in tokens.items()}})
print(json.dumps({{"trainable": [v.name for v in loaded.trainable_variables],
                  "grads": [float(tf.reduce_sum(tf.abs(g))) for g in grads],
                  "keras_elmo": "keras_elmo" in sys.modules}}))
"""


@pytest.mark.slow
def test_export_serves_text_with_tensorflow_alone(tmp_path, capsys):
    """`keras-elmo export EFML_DIR`: `default` and `tokens` take raw strings (the vocabularies
    are lookup tables in the graph) and equal EFML's outputs; the mix trains through it."""
    name = "tiny_zip"
    path = str(tmp_path / "export" / "1")
    code, stdout, _ = run_cli(capsys, "export", fixture_dir(name), str(tmp_path / "export"),
                              "--version", "1")
    assert code == 0 and path in stdout
    text = [line for line in lines(name) if line.split()]
    result = finish_python(start_python(TF_ONLY.format(path=path, text=text,
                                                       out=str(tmp_path / "o.npz"))),
                           timeout=240)
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert not report["keras_elmo"] and len(report["trainable"]) == 2
    assert all(g > 0 for g in report["grads"])
    # Keras' own client of a SavedModel trains the mix through the vocabulary tables.
    layer = keras.layers.TFSMLayer(path, call_endpoint="default", trainable=True)
    text_input = keras.Input(shape=(), dtype="string")
    scores = keras.layers.Dense(1, activation="sigmoid")(layer(text_input)["default"])
    classifier = keras.Model(text_input, scores)
    classifier.compile(keras.optimizers.SGD(0.5), "binary_crossentropy")
    before = [w.numpy().copy() for w in layer.trainable_weights]
    labels = np.array([[i % 2] for i in range(len(text))], np.float32)
    classifier.fit(tf.constant(text), labels, epochs=3, batch_size=len(text), verbose=0)
    assert len(before) == 2 and all(not np.array_equal(b, w.numpy())
                                    for b, w in zip(before, layer.trainable_weights))
    outputs = np.load(tmp_path / "o.npz")
    for prefix in ("", "tokens/"):
        for i, expected in enumerate(efml_outputs(name)):
            n = expected.shape[1]
            np.testing.assert_allclose(outputs[prefix + "word_emb"][i, :n],
                                       expected[0, :, :16], atol=ATOL)
            for j in (1, 2):
                np.testing.assert_allclose(outputs[f"{prefix}lstm_outputs{j}"][i, :n],
                                           expected[j], atol=ATOL)


# --- fine-tuning -----------------------------------------------------------------------------
@pytest.mark.slow
def test_train_init_from_efml_then_every_command(tmp_path, capsys):
    """A new softmax over the run's vocabulary, EFML's vocabularies kept for the input; the
    run resumes, and embed, export, perplexity and a second --init-from read its result."""
    corpus = tmp_path / "train.txt"
    rng = np.random.default_rng(0)
    words = ["the", "cat", "北京", "欢迎", "你", "猫", "dog", "a"]
    corpus.write_text("".join(" ".join(rng.choice(words, rng.integers(1, 9))) + "\n"
                              for _ in range(60)), encoding="utf-8")
    vocab, run = str(tmp_path / "vocab.txt"), str(tmp_path / "run")
    assert run_cli(capsys, "vocab", "--train", str(corpus), "--out", vocab)[0] == 0
    code, stdout, _ = run_cli(capsys, "train", run, "--init-from", fixture_dir("tiny_zip"),
                              "--train", str(corpus), "--vocab", vocab, "--max-steps", "3",
                              "--batch-size", "8")
    assert code == 0 and "started from" in stdout
    assert {"char.dic", "word.dic", "options.json", "weights.hdf5"} <= set(os.listdir(run))
    for dic in ("char.dic", "word.dic"):
        with open(os.path.join(run, dic), "rb") as a, \
                open(os.path.join(fixture_dir("tiny_zip"), dic), "rb") as b:
            assert a.read() == b.read()
    tuned = keras_elmo.load_bilm(run)
    source = keras_elmo.load_bilm(fixture_dir("tiny_zip"))
    assert tuned.vocabulary == source.vocabulary
    moved = [np.abs(a.numpy() - b.numpy()).max()
             for a, b in zip(tuned.weights, source.weights)]
    assert max(moved) > 0  # it trained
    assert run_cli(capsys, "train", run, "--train", str(corpus), "--max-steps", "4")[0] == 0
    out = str(tmp_path / "out.hdf5")
    assert run_cli(capsys, "embed", run, str(corpus), out, "--no-progress")[0] == 0
    again = keras_elmo.load_bilm(run)
    first = corpus.read_text(encoding="utf-8").splitlines()[0].split()
    with h5py.File(out) as f:
        np.testing.assert_allclose(f["0"][()], eager(again, [first])[0], atol=ATOL)
    code, stdout, _ = run_cli(capsys, "perplexity", run, "--heldout", str(corpus), "--json")
    assert code == 0 and json.loads(stdout)["targets"] > 0
    assert run_cli(capsys, "export", run, str(tmp_path / "served"))[0] == 0
    code, stdout, _ = run_cli(capsys, "train", str(tmp_path / "run2"), "--init-from", run,
                              "--train", str(corpus), "--vocab", vocab, "--max-steps", "1",
                              "--batch-size", "8")
    assert code == 0 and "softmax rows of" in stdout
