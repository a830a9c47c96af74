"""Raw Chinese through the command line: a model whose options.json says jieba reads raw text
in `embed` and `neighbors` by default, exactly as its pre-segmented form under whitespace;
`vocab`, `train` and `perplexity` on raw text (slow: a tiny training run)."""

import json
import os

import h5py
import keras
import pytest

import keras_elmo
from keras_elmo.cli.main import main

RAW = ["我爱北京天安门。", "北京的花很美。", "她花了很多钱。", "", "我打了他一下。",
       "他们在公园打球。", "他昨天去北京了。"]


def _segmented(lines):
    from keras_elmo.text.tokenizers import tokenize

    return [" ".join(tokens) for tokens in tokenize(lines, "jieba")]


@pytest.fixture(scope="module")
def jieba_model(tmp_path_factory):
    """A tiny random biLM whose options.json names jieba, as `train --tokenizer jieba` writes."""
    keras.utils.set_random_seed(3)
    directory = str(tmp_path_factory.mktemp("jieba_model"))
    keras_elmo.save_published(keras_elmo.BiLM(keras_elmo.BiLMOptions.tiny()), directory)
    path = os.path.join(directory, "options.json")
    with open(path, encoding="utf-8") as handle:
        options = json.load(handle)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(dict(options, tokenizer="jieba"), handle)
    return directory


@pytest.fixture
def corpora(tmp_path):
    raw, segmented = tmp_path / "raw.txt", tmp_path / "segmented.txt"
    raw.write_text("\n".join(RAW) + "\n", encoding="utf-8")
    segmented.write_text("\n".join(_segmented(RAW)) + "\n", encoding="utf-8")
    return str(raw), str(segmented)


def _lengths(path):
    with h5py.File(path, "r") as f:
        return [f[str(i)].shape[1] for i in range(len(RAW))]


def test_embed_reads_raw_text_with_the_models_tokenizer(jieba_model, corpora, tmp_path, capsys):
    raw, segmented = corpora
    assert main(["embed", jieba_model, raw, str(tmp_path / "raw.hdf5"), "--no-progress"]) == 0
    assert "tokens (jieba)" in capsys.readouterr().out
    assert main(["embed", jieba_model, segmented, str(tmp_path / "seg.hdf5"), "--no-progress",
                 "--tokenizer", "whitespace"]) == 0
    expected = [len(line.split()) for line in _segmented(RAW)]
    assert expected[:3] == [5, 6, 6]
    assert _lengths(tmp_path / "raw.hdf5") == _lengths(tmp_path / "seg.hdf5") == expected
    with h5py.File(tmp_path / "raw.hdf5", "r") as a, h5py.File(tmp_path / "seg.hdf5", "r") as b:
        for i in range(len(RAW)):
            assert (a[str(i)][...] == b[str(i)][...]).all()
    # Forcing the whitespace split on raw text gives one "word" per line, as it should.
    assert main(["embed", jieba_model, raw, str(tmp_path / "ws.hdf5"), "--no-progress",
                 "--tokenizer", "whitespace"]) == 0
    assert _lengths(tmp_path / "ws.hdf5") == [1, 1, 1, 0, 1, 1, 1]


def test_neighbors_of_a_raw_query_equal_those_of_its_segmented_form(jieba_model, corpora,
                                                                      capsys):
    raw, segmented = corpora
    query = "她在北京买花。"  # jieba: 她 在 北京 买花 。 -- "买花" is in no corpus sentence
    assert _segmented([query]) == ["她 在 北京 买花 。"]
    assert main(["neighbors", jieba_model, query, "--word", "北京", "--corpus", raw,
                 "-k", "4", "--no-progress"]) == 0
    by_raw = capsys.readouterr().out.splitlines()
    assert by_raw[0] == "query: 她 在 [北京] 买花 。  (tokenizer jieba)"
    assert main(["neighbors", jieba_model, _segmented([query])[0], "--word", "北京",
                 "--corpus", segmented, "-k", "4", "--no-progress",
                 "--tokenizer", "whitespace"]) == 0
    by_segmented = capsys.readouterr().out.splitlines()
    assert by_raw[2:] == by_segmented[2:]  # same neighbours, scores and contexts
    contexts = [line.split(": ", 1) for line in by_raw if ": " in line and "  line " in line]
    assert len(contexts) == 4
    for where, text in contexts:  # each neighbour shown in its jieba-segmented sentence
        line_number = int(where.split()[-1])
        assert text.replace("[", "").replace("]", "") == _segmented(RAW)[line_number - 1]


def test_a_query_word_that_jieba_joins_is_one_clear_line(jieba_model, corpora, capsys):
    raw, _ = corpora
    assert main(["neighbors", jieba_model, "他打篮球。", "--word", "打", "--corpus", raw]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "the word '打' does not occur" in err[0] and "['他', '打篮球', '。']" in err[0]


@pytest.mark.slow
def test_vocab_train_perplexity_on_raw_text(corpora, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KERAS_ELMO_CACHE", str(tmp_path / "cache"))
    raw, segmented = corpora
    vocab = str(tmp_path / "vocab.txt")
    assert main(["vocab", "--train", raw, "--out", vocab, "--tokenizer", "jieba"]) == 0
    words = open(vocab, encoding="utf-8").read().split()
    assert words[:6] == ["<S>", "</S>", "<UNK>", "。", "了", "北京"]  # 6, 3, 3 (ties by token)
    assert "北京天安门" not in words and "北京天安门。" not in words
    model = str(tmp_path / "model")
    assert main(["train", model, "--train", raw, "--vocab", vocab, "--tokenizer", "jieba",
                 "--size", "tiny", "--max-steps", "2", "--log-every", "1"]) == 0
    with open(os.path.join(model, "options.json"), encoding="utf-8") as handle:
        saved = json.load(handle)
    assert saved["tokenizer"] == "jieba" and saved["n_train_tokens"] == 34
    capsys.readouterr()
    assert main(["perplexity", model, "--heldout", raw, "--json"]) == 0
    by_default = json.loads(capsys.readouterr().out)
    assert by_default["tokenizer"] == "jieba" and by_default["sentences"] == 6
    assert by_default["targets"] == 34 + 6
    assert main(["perplexity", model, "--heldout", segmented, "--json",
                 "--tokenizer", "whitespace"]) == 0
    by_segmented = json.loads(capsys.readouterr().out)
    assert by_segmented["targets"] == by_default["targets"]
    assert abs(by_segmented["average"] - by_default["average"]) < 1e-4 * by_default["average"]
    # Resuming needs no --tokenizer: the saved one is used, a different one is refused.
    assert main(["train", model, "--tokenizer", "whitespace"]) == 2
    assert "was trained with tokenizer='jieba'" in capsys.readouterr().err
