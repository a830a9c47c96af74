"""`keras-elmo neighbors`: contextual neighbours match a brute-force cosine search, type
neighbours use layer 0, the query is not its own neighbour, bad input is one line + exit 2."""

import os

import numpy as np
import pytest

import keras
import keras_elmo
from keras_elmo.embedding.neighbors import find_neighbors
from keras_elmo.embedding.inputs import find_word
from keras_elmo.cli.main import main

CORPUS = ["the cat sat on the mat .", "the dog ate the cat food", "", "a cat", "the mat is red",
          "他 会 说 英语 。", "大会 开 了 。"]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    keras.utils.set_random_seed(2)
    bilm = keras_elmo.BiLM(keras_elmo.BiLMOptions.tiny())
    directory = str(tmp_path_factory.mktemp("model"))
    keras_elmo.save_published(bilm, directory)
    return directory, bilm


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    return str(path)


def _unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _brute_force(bilm, query_tokens, position, layer):
    """Every corpus token's cosine with the query, the query's own occurrence left out."""
    query = _unit(np.asarray(bilm(keras_elmo.batch_to_ids([query_tokens]))["layers"])[
        0, layer, position])
    scored = []
    for line, text in enumerate(CORPUS, start=1):
        tokens = text.split()
        if not tokens:
            continue
        layers = np.asarray(bilm(keras_elmo.batch_to_ids([tokens]))["layers"])[0, layer]
        for k, score in enumerate(_unit(layers) @ query):
            if not (tokens == query_tokens and k == position):
                scored.append((float(score), line, k))
    return sorted(scored, key=lambda item: (-item[0], item[1], item[2]))


@pytest.mark.parametrize("layer", [None, 1])
def test_contextual_neighbors_match_brute_force(model, corpus, layer):
    _, bilm = model
    query = "the dog ate the cat food".split()  # in the corpus: its own "cat" is left out
    result = find_neighbors(bilm, corpus, query, "cat", layer=layer, k=4, batch_size=2)
    expected = _brute_force(bilm, query, 4, 2 if layer is None else layer)[:4]
    got = [(n.score, n.line_number, n.position) for n in result["contextual"]]
    assert [g[1:] for g in got] == [e[1:] for e in expected]
    np.testing.assert_allclose([g[0] for g in got], [e[0] for e in expected], atol=1e-5)
    assert (2, 4) not in [(n.line_number, n.position) for n in result["contextual"]]
    first = result["contextual"][0]
    assert first.tokens == CORPUS[first.line_number - 1].split()
    assert (result["corpus_sentences"], result["corpus_tokens"]) == (7, 28)


def test_layer_0_is_context_free_and_type_neighbors(model, corpus):
    _, bilm = model
    result = find_neighbors(bilm, corpus, "a cat", "cat", layer=0, k=3)
    # Layer 0 ignores context: the other occurrences of "cat" are exact matches.
    assert [n.tokens[n.position] for n in result["contextual"][:2]] == ["cat", "cat"]
    np.testing.assert_allclose([n.score for n in result["contextual"][:2]], 1.0, atol=1e-5)
    types = result["types"]
    assert len(types) == 3 and "cat" not in [t.token for t in types]
    vectors = np.asarray(bilm.token_embedder(keras_elmo.batch_to_ids([["cat", types[0].token]])))
    cosine = float(_unit(vectors[0, 0]) @ _unit(vectors[0, 1]))
    assert types[0].score == pytest.approx(cosine, abs=1e-5)
    assert types[0].score >= types[1].score >= types[2].score
    all_tokens = " ".join(CORPUS).split()
    assert all(t.count == all_tokens.count(t.token) for t in types)


def test_type_neighbors_do_not_depend_on_the_sentence(model, corpus):
    _, bilm = model
    one = find_neighbors(bilm, corpus, "他 会 说 英语 。", "会", k=3)
    two = find_neighbors(bilm, corpus, "明天 开 会", "会", k=3)
    assert [t.token for t in one["types"]] == [t.token for t in two["types"]]
    assert one["contextual"] != two["contextual"]


def test_cli_prints_both_lists(model, corpus, capsys):
    directory, _ = model
    code = main(["neighbors", directory, "the cat sat", "--word", "cat", "--corpus", corpus,
                 "-k", "2", "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith("query: the [cat] sat\n")
    assert "7 sentences, 28 tokens, 20 types" in out
    assert "nearest tokens in context (cosine, biLM layer 2 of 0..2):" in out
    assert "nearest types by layer 0" in out
    assert len([line for line in out.splitlines() if line.startswith(("  1 ", "  2 "))]) == 4


def test_find_word():
    assert find_word(["a", "b", "a"], "a", occurrence=2) == 2
    with pytest.raises(ValueError, match="does not occur"):
        find_word(["a"], "b")
    with pytest.raises(ValueError, match="occurs 1 time"):
        find_word(["a"], "a", occurrence=2)


@pytest.mark.parametrize("case", ["word", "layer", "corpus", "model", "top", "empty_corpus"])
def test_bad_input_is_one_line_and_exit_2(model, corpus, tmp_path, capsys, case):
    directory, _ = model
    argv = [directory, "the cat sat", "--word", "cat", "--corpus", corpus, "--no-progress"]
    if case == "word":
        argv[3] = "dog"
    elif case == "layer":
        argv += ["--layer", "3"]
    elif case == "corpus":
        argv[5] = str(tmp_path / "missing.txt")
    elif case == "model":
        argv[0] = str(tmp_path / "missing")
    elif case == "top":
        argv += ["-k", "0"]
    elif case == "empty_corpus":
        (tmp_path / "empty.txt").write_text("\n\n")
        argv[5] = str(tmp_path / "empty.txt")
    code = main(["neighbors", *argv])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("keras-elmo neighbors: error: ")
    assert os.path.isdir(directory)
