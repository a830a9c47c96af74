"""keras_elmo.text.tokenizers: the three tokenisers on raw text, a model's tokeniser as the default,
and a missing jieba as one clear line (the import failure is simulated)."""

import json
import sys

import pytest

from keras_elmo.text import tokenizers
from keras_elmo.cli.main import main
from keras_elmo.text.tokenizers import model_tokenizer, resolve_tokenizer, tokenize

#: The issue's example line.
MIXED = "我爱北京天安门。Hello, world! 2024年"


def test_whitespace_is_python_split():
    assert tokenize(["a\u00a0b  c\u3000d", "", "  "], "whitespace") == [
        ["a", "b", "c", "d"], [], []]


def test_unicode_script_splits_han_per_character_and_other_scripts_by_word():
    tokens = tokenize([MIXED, "日本語のテキスト、한국어 문장", ""], "unicode-script")
    assert tokens[0] == ["我", "爱", "北", "京", "天", "安", "门", "。", "Hello", ",", "world",
                         "!2024", "年"]  # digits and '!' are one script (Common): kept
    assert tokens[1] == ["日", "本", "語", "の", "テ", "キ", "ス", "ト", "、", "한국어", "문장"]
    assert tokens[2] == []


def test_unicode_script_in_graph_matches_the_python_path():
    import tensorflow as tf

    from keras_elmo.training.dataset import tokenize_lines

    graph = tokenize_lines(tf.constant([MIXED]), "unicode-script").to_list()[0]
    assert [t.decode("utf-8") for t in graph] == tokenize([MIXED], "unicode-script")[0]


def test_jieba_segments_words_and_drops_spaces():
    assert tokenize([MIXED], "jieba") == [
        ["我", "爱", "北京", "天安门", "。", "Hello", ",", "world", "!", "2024", "年"]]
    tokens = tokenize(["他 打 篮球\u3000了", ""], "jieba")
    assert tokens[1] == [] and all(t and not any(c.isspace() for c in t) for t in tokens[0])
    assert "".join(tokens[0]) == "他打篮球了"
    assert tokenizers.segment("我爱北京天安门。", "jieba") == "我 爱 北京 天安门 。"


def test_unknown_tokenizer_is_refused():
    with pytest.raises(ValueError, match=r"one of whitespace, unicode-script, jieba; "
                                         r"received 'chars'"):
        tokenize(["a"], "chars")


def _without_jieba(monkeypatch):
    """The import of jieba fails, as on a machine without it."""
    monkeypatch.setitem(sys.modules, "jieba", None)


def test_missing_jieba_is_one_clear_error(monkeypatch):
    _without_jieba(monkeypatch)
    with pytest.raises(ValueError, match=r"needs the jieba package.*pip install "
                                         r"keras-elmo\[chinese\]"):
        tokenize(["我爱北京"], "jieba")
    assert tokenize(["a b"], "whitespace") == [["a", "b"]]  # the others still work


@pytest.mark.parametrize("argv", [
    ["vocab", "--train", "{corpus}", "--out", "{tmp}/v.txt", "--tokenizer", "jieba"],
    ["train", "{tmp}/model", "--train", "{corpus}", "--vocab", "{corpus}", "--tokenizer",
     "jieba"],
])
def test_missing_jieba_in_the_cli_is_one_line_and_exit_2(argv, tmp_path, monkeypatch, capsys):
    corpus = tmp_path / "raw.txt"
    corpus.write_text("我爱北京天安门。\n", encoding="utf-8")
    _without_jieba(monkeypatch)
    argv = [a.format(corpus=corpus, tmp=tmp_path) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install keras-elmo[chinese]" in err[0], err
    assert not (tmp_path / "model").exists() and not (tmp_path / "v.txt").exists()


def test_model_tokenizer_is_the_default(tmp_path):
    assert model_tokenizer(tmp_path) == "whitespace"  # no options.json
    options = tmp_path / "options.json"
    options.write_text(json.dumps({"lstm": {}}))  # a published model names none
    assert model_tokenizer(tmp_path) == "whitespace"
    options.write_text(json.dumps({"lstm": {}, "tokenizer": "jieba"}))
    assert model_tokenizer(tmp_path) == "jieba"
    assert resolve_tokenizer(None, tmp_path) == "jieba"
    assert resolve_tokenizer("whitespace", tmp_path) == "whitespace"  # the flag wins
    assert resolve_tokenizer(None) == "whitespace"
    assert model_tokenizer(options) == "jieba"  # the options file itself
    options.write_text(json.dumps({"tokenizer": "chars"}))
    with pytest.raises(ValueError, match=r"names tokenizer 'chars'; expected one of"):
        model_tokenizer(tmp_path)
    options.write_text("{not json")
    with pytest.raises(ValueError, match="is not valid JSON"):
        model_tokenizer(tmp_path)
