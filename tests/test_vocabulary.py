"""Vocabulary building, file format and errors; corpus helpers."""

import pytest

from keras_elmo.training.corpus import expand_corpus, read_sentences
from keras_elmo.training.vocabulary import Vocabulary, build_vocabulary

SPECIALS = ["<S>", "</S>", "<UNK>"]


@pytest.fixture
def corpus(tmp_path):
    # counts: 的 4, 中国 3, 人民 2, 了 2, 好 1, 走 1
    (tmp_path / "a.txt").write_text("中国 的 人民\n的 了 好\n\n", encoding="utf-8")
    (tmp_path / "b.txt").write_text("中国 的 了\n  中国   的 人民 走 <S>\n", encoding="utf-8")
    return tmp_path


def test_order_is_specials_then_count_then_token(corpus):
    vocab = build_vocabulary([str(corpus / "a.txt"), str(corpus / "b.txt")])
    # 了 (U+4E86) sorts before 人民 (U+4EBA) at count 2; 好 before 走 at count 1.
    assert vocab.tokens == SPECIALS + ["的", "中国", "了", "人民", "好", "走"]
    assert (vocab.bos_id, vocab.eos_id, vocab.unk_id) == (0, 1, 2)


def test_min_count_and_max_size(corpus):
    paths = expand_corpus(str(corpus / "*.txt"))
    assert build_vocabulary(paths, min_count=2).tokens == SPECIALS + ["的", "中国", "了", "人民"]
    assert build_vocabulary(paths, min_count=3).tokens == SPECIALS + ["的", "中国"]
    assert build_vocabulary(paths, max_size=4).tokens == SPECIALS + ["的"]
    assert build_vocabulary(paths, min_count=2, max_size=3).tokens == SPECIALS
    assert len(build_vocabulary(paths, max_size=100)) == 9


@pytest.mark.parametrize("kwargs, message", [
    ({"min_count": 0}, "min_count to be an integer >= 1. Received: min_count=0"),
    ({"max_size": 2}, "max_size to be None or an integer >= 3.*Received: max_size=2"),
])
def test_bad_arguments(corpus, kwargs, message):
    with pytest.raises(ValueError, match=message):
        build_vocabulary([str(corpus / "a.txt")], **kwargs)


def test_lookup_and_encode():
    vocab = Vocabulary(SPECIALS + ["的", "中国"])
    assert len(vocab) == 5
    assert vocab.token_to_id("中国") == 4
    assert vocab.token_to_id("火星") == 2
    assert vocab.encode(["<S>", "中国", "火星", "的", "</S>"]) == [0, 4, 2, 3, 1]
    assert vocab.id_to_token(3) == "的"
    assert "的" in vocab and "火星" not in vocab


def test_save_load_round_trip(tmp_path, corpus):
    vocab = build_vocabulary([str(corpus / "a.txt")])
    path = tmp_path / "vocab.txt"
    vocab.save(str(path))
    assert path.read_text(encoding="utf-8") == "\n".join(vocab.tokens) + "\n"
    assert Vocabulary.load(str(path)).tokens == vocab.tokens


@pytest.mark.parametrize("text, message", [
    ("<S>\n<UNK>\n</S>\nx\n", r"vocab.txt, line 2: expected the special token '</S>'.*"
                              r"Received: '<UNK>'"),
    ("的\n中国\n", r"vocab.txt, line 1: expected the special token '<S>'"),
    ("<S>\n</S>\n", r"vocab.txt: expected at least the 3 special tokens.*Received 2 line"),
    ("<S>\n</S>\n<UNK>\n的\n中国\n的\n", r"vocab.txt, line 6: duplicate token '的', first seen "
                                         r"on line 4"),
    ("<S>\n</S>\n<UNK>\n\n", r"vocab.txt, line 4: expected a non-empty token"),
    ("<S>\n</S>\n<UNK>\na b\n", r"vocab.txt, line 4: expected a non-empty token without "
                                r"whitespace. Received: 'a b'"),
])
def test_load_errors_name_file_and_line(tmp_path, text, message):
    path = tmp_path / "vocab.txt"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        Vocabulary.load(str(path))


def test_load_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        Vocabulary.load(str(tmp_path / "nope.txt"))


def test_constructor_errors():
    with pytest.raises(ValueError, match=r"starting with \['<S>', '</S>', '<UNK>'\]"):
        Vocabulary(["a", "<S>", "</S>", "<UNK>"])
    with pytest.raises(ValueError, match="Duplicate vocabulary token 'a' at positions 3 and 4"):
        Vocabulary(SPECIALS + ["a", "a"])


def test_expand_corpus_and_read_sentences(corpus):
    assert expand_corpus(str(corpus / "*.txt")) == [str(corpus / "a.txt"), str(corpus / "b.txt")]
    assert expand_corpus([str(corpus / "b.txt"), str(corpus / "*.txt")]) == [
        str(corpus / "a.txt"), str(corpus / "b.txt")]
    assert list(read_sentences(corpus / "a.txt")) == [["中国", "的", "人民"], ["的", "了", "好"]]
    with pytest.raises(ValueError, match=r"No corpus file matches '.*missing\*.txt'"):
        expand_corpus(str(corpus / "missing*.txt"))
    with pytest.raises(ValueError, match="at least one corpus file"):
        expand_corpus([])
