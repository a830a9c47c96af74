"""Raw Chinese under jieba in training: segmented once into a content-keyed cache, then read by
the whitespace pipeline; vocabulary, corpus size and batches see the jieba tokens."""

import os

import pytest

from keras_elmo.text import tokenizers
from keras_elmo.training import segmented_corpus
from keras_elmo.training.config import TrainingConfig
from keras_elmo.training.corpus import read_sentences
from keras_elmo.training.dataset import corpus_size, make_dataset, tokenize_lines
from keras_elmo.training.segmented_corpus import segment_files
from keras_elmo.training.vocabulary import Vocabulary, token_counts

RAW = ["我爱北京天安门。", "", "他在北京打篮球。", "北京很大。"]
#: jieba 0.42.1 on RAW, written out by hand.
SEGMENTED = ["我 爱 北京 天安门 。", "", "他 在 北京 打篮球 。", "北京 很大 。"]


@pytest.fixture
def raw(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_ELMO_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "raw.txt"
    path.write_text("\n".join(RAW) + "\n", encoding="utf-8")
    return str(path)


def test_segment_files_writes_the_jieba_tokens_once(raw, tmp_path, monkeypatch):
    (cached,) = segment_files([raw], "jieba", stream=None)
    assert cached.startswith(str(tmp_path / "cache" / "segmented"))
    assert open(cached, encoding="utf-8").read().split("\n")[:-1] == SEGMENTED
    # A second call reads the cache: the segmenter is not run again.
    monkeypatch.setattr(tokenizers, "tokenize", lambda *a: pytest.fail("segmented again"))
    assert segment_files([raw], "jieba", stream=None) == [cached]


def test_a_changed_file_gets_a_new_cache_entry(raw):
    (first,) = segment_files([raw], "jieba", stream=None)
    with open(raw, "a", encoding="utf-8") as handle:
        handle.write("天安门很大。\n")
    (second,) = segment_files([raw], "jieba", stream=None)
    assert second != first and open(second, encoding="utf-8").read().endswith(
        "天安门 很大 。\n")


def test_in_graph_tokenizers_read_the_files_themselves(raw):
    assert segment_files([raw], "whitespace") == [raw]
    assert segment_files([raw], "unicode-script") == [raw]
    with pytest.raises(FileNotFoundError, match="corpus file not found: .*nope.txt"):
        segment_files([raw + ".nope.txt"], "jieba", stream=None)


def test_tokenize_lines_refuses_a_python_tokenizer():
    with pytest.raises(ValueError, match=r"received 'jieba' \(a Python tokenizer"):
        tokenize_lines(["我爱北京"], "jieba")


def test_vocabulary_corpus_size_and_sentences_use_jieba(raw):
    counts = token_counts([raw], "jieba")
    assert counts["北京"] == 3 and counts["。"] == 3 and "北京天安门" not in counts
    assert sum(counts.values()) == 13
    assert corpus_size([raw], "jieba") == (3, 13)
    assert corpus_size([raw], "whitespace") == (3, 3)  # each raw line is one "word"
    assert list(read_sentences(raw, "jieba")) == [s.split() for s in SEGMENTED if s]


def test_batches_hold_the_jieba_token_ids(raw):
    vocab = Vocabulary(["<S>", "</S>", "<UNK>", "北京", "。", "我", "爱", "天安门"])
    config = TrainingConfig.preset("tiny").replace(n_tokens_vocab=len(vocab),
                                                    tokenizer="jieba")
    rows = set()
    for batch in make_dataset([raw], vocab, config, shuffle=False):
        real = batch["char_ids"].numpy().any(axis=-1)  # (B, T): False on padding
        for ids, mask in zip(batch["token_ids"].numpy(), real):
            rows.add(tuple(int(i) for i in ids[mask]))
    unk = vocab.unk_id
    assert rows == {(0, 5, 6, 3, 7, 4, 1),  # <S> 我 爱 北京 天安门 。 </S>
                    (0, unk, unk, 3, unk, 4, 1),  # <S> 他 在 北京 打篮球 。 </S>
                    (0, 3, unk, 4, 1)}  # <S> 北京 很大 。 </S>


def test_default_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("KERAS_ELMO_CACHE", str(tmp_path))
    assert segmented_corpus.default_cache_dir() == os.path.join(str(tmp_path), "segmented")


def test_the_note_goes_to_the_stderr_of_the_call_not_of_the_import(raw, monkeypatch):
    # A stream bound at import (a test's captured stderr, closed since) must not be used.
    import io

    stream = io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    (cached,) = segment_files([raw], "jieba")
    assert stream.getvalue().startswith(f"segmenting {raw} with jieba (once) -> {cached}")
