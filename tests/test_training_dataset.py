"""The tf.data pipeline: tokenisation, chunks, boundaries, token budget, order, skipping."""

import numpy as np
import pytest
import tensorflow as tf

from keras_elmo.text.characters import batch_to_ids
from keras_elmo.training.config import TrainingConfig
from keras_elmo.training.dataset import (bucket_boundaries, chunk_sentences, corpus_size, make_dataset,
                              tokenize_lines)
from keras_elmo.training.vocabulary import Vocabulary

VOCAB = Vocabulary(["<S>", "</S>", "<UNK>", "a", "b", "c", "d"])


def _config(**changes):
    fields = dict(n_tokens_vocab=len(VOCAB), max_sentence_tokens=4, batch_tokens=12,
                  batch_size=8, shuffle_buffer=100)
    fields.update(changes)
    return TrainingConfig.preset("tiny").replace(**fields)


def _write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def _rows(dataset):
    """Every sentence of every batch as its list of token ids (padding removed)."""
    rows = []
    for batch in dataset:
        lengths = np.count_nonzero(batch["char_ids"].numpy()[..., 0], axis=1)
        rows += [ids[:n].tolist() for ids, n in zip(batch["token_ids"].numpy(), lengths)]
    return rows


def test_whitespace_tokenizer_splits_like_python_str_split():
    lines = ["a\u00a0b  c", "\u3000x\ty\u2003z\x1cw ", "", "中国 人民"]
    tokens = tokenize_lines(tf.constant(lines)).to_list()
    assert [[t.decode() for t in row] for row in tokens] == [line.split() for line in lines]


def test_unicode_script_tokenizer_on_raw_text():
    tokens = tokenize_lines(tf.constant(["hello,\u00a0world!"]), "unicode-script").to_list()
    assert tokens == [[b"hello", b",", b"world", b"!"]]
    with pytest.raises(ValueError, match="tokenizer"):
        tokenize_lines(tf.constant(["a"]), "bpe")


def test_chunk_sentences_cuts_long_sentences_and_drops_empty_ones():
    sentences = tf.ragged.constant([["a", "b", "c", "d", "e"], [], ["f"]])
    assert chunk_sentences(sentences, 2).to_list() == [[b"a", b"b"], [b"c", b"d"], [b"e"], [b"f"]]


def test_batches_hold_framed_sentences_within_the_token_budget(tmp_path):
    path = _write(tmp_path / "a.txt", ["a b", "", "c zz d a b c", "d"])
    config = _config()
    batches = list(make_dataset([path], VOCAB, config, shuffle=False))
    for batch in batches:
        char_ids, token_ids = batch["char_ids"].numpy(), batch["token_ids"].numpy()
        assert char_ids.shape[:2] == token_ids.shape and char_ids.shape[2] == 50
        assert char_ids.shape[0] * char_ids.shape[1] <= config.batch_tokens
    rows = sorted(_rows(batches))
    # "c zz d a b c" is cut after 4 tokens; zz is out of vocabulary -> <UNK> (2).
    assert rows == sorted([[0, 3, 4, 1], [0, 5, 2, 6, 3, 1], [0, 4, 5, 1], [0, 6, 1]])
    first = next(b for b in batches if b["token_ids"].numpy()[0].tolist()[:4] == [0, 3, 4, 1])
    expected = batch_to_ids([["<S>", "a", "b", "</S>"]])[0]
    np.testing.assert_array_equal(first["char_ids"].numpy()[0, :4], expected)


def test_order_is_seeded_per_epoch_and_skipping_resumes_it(tmp_path):
    files = [_write(tmp_path / f"s{i}.txt", [" ".join("abcd"[(i + k) % 4] * 1 for k in range(n))
                                             for n in range(1, 7)]) for i in range(3)]
    config = _config(batch_tokens=8)
    epoch0 = _rows(make_dataset(files, VOCAB, config, epoch=0))
    assert epoch0 == _rows(make_dataset(files, VOCAB, config, epoch=0))
    assert epoch0 != _rows(make_dataset(files, VOCAB, config, epoch=1))
    assert sorted(epoch0) == sorted(_rows(make_dataset(files, VOCAB, config, shuffle=False)))
    full = list(make_dataset(files, VOCAB, config, epoch=0))
    skipped = list(make_dataset(files, VOCAB, config, epoch=0, skip_batches=3))
    assert _rows(skipped) == _rows(full[3:])


def test_pipeline_runs_without_the_autotuning_thread(tmp_path):
    # Destroying an autotuned iterator waits for tf.data's model thread: 8-13 s at every
    # epoch start of a training run on 2 cores (training/dataset.py, _pipeline_options).
    path = _write(tmp_path / "a.txt", ["a b", "c d"])
    dataset = make_dataset([path], VOCAB, _config(), epoch=0)
    assert dataset.options().autotune.enabled is False
    assert len(_rows(dataset)) == 2


def test_corpus_size_and_bucket_edges(tmp_path):
    path = _write(tmp_path / "a.txt", ["a b\u00a0c", "", "d"])
    assert corpus_size([path]) == (2, 4)
    edges = bucket_boundaries(102)
    assert edges[0] == 4 and edges[-1] <= 102 and edges == sorted(set(edges))


def test_raw_text_is_tokenised_in_the_pipeline(tmp_path):
    path = _write(tmp_path / "raw.txt", ["a,b\u00a0c!", "d"])
    vocab = Vocabulary(["<S>", "</S>", "<UNK>", "a", "b", "c", "d", ","])
    config = _config(tokenizer="unicode-script", n_tokens_vocab=len(vocab), max_sentence_tokens=8)
    rows = sorted(_rows(make_dataset([path], vocab, config, shuffle=False)))
    assert rows == sorted([[0, 3, 7, 4, 5, 2, 1], [0, 6, 1]])  # "!" is out of vocabulary


def test_an_xla_compiled_run_pads_each_bucket_to_one_length(tmp_path):
    """With `jit_compile` every batch of a bucket has the bucket's longest length (the step
    compiles once per shape), and the sentences are the same as without."""
    lines = ["a", "a b", "a b c", "a b c d", "b", "c d", "d c b"]
    path = _write(tmp_path / "a.txt", lines)
    config = _config(max_sentence_tokens=8, batch_tokens=64)
    plain = list(make_dataset([path], VOCAB, config, shuffle=False))
    compiled = list(make_dataset([path], VOCAB, config.replace(jit_compile=True), shuffle=False))
    largest = [edge - 1 for edge in bucket_boundaries(config.max_sentence_tokens + 2)]
    largest.append(config.max_sentence_tokens + 2)
    lengths = {b["token_ids"].shape[1] for b in compiled}
    assert lengths <= set(largest), (lengths, largest)
    assert any(b["token_ids"].shape[1] > np.count_nonzero(b["char_ids"].numpy()[..., 0], 1).max()
               for b in compiled)  # padded past its longest sentence
    assert sorted(_rows(compiled)) == sorted(_rows(plain))
    for batch in compiled:
        assert batch["char_ids"].shape[:2] == batch["token_ids"].shape
