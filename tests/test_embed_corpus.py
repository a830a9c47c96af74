"""Issue 27's corpus embedder: packed calls within the budget, equality with one-by-one
embedding, one trace, the progress line and closing line, `--quiet`, and a clean restart
after a kill."""

import io
import os
import signal
import subprocess
import sys
import time

import h5py
import keras
import numpy as np
import pytest

import keras_elmo
from keras_elmo import ElmoEmbedder
from keras_elmo.cli.main import main
from keras_elmo.embedding.bilm_runner import BiLMRunner
from keras_elmo.embedding.embed_file import embed_file
from keras_elmo.embedding.token_cache import TokenEmbeddingCache
from keras_elmo.text.sentence_windows import windows
from keras_elmo.process.progress import Progress

#: The stated float32 tolerance of a batched file against one-by-one embedding.
ATOL = 1e-5
LENGTHS = [7, 1, 5, 0, 9, 2, 6, 3, 8, 4, 1, 9, 12, 2, 3]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    keras.utils.set_random_seed(3)
    bilm = keras_elmo.BiLM(keras_elmo.BiLMOptions.tiny())
    directory = str(tmp_path_factory.mktemp("model"))
    keras_elmo.save_published(bilm, directory)
    return directory, ElmoEmbedder(directory, token_cache=False)


@pytest.fixture
def corpus(tmp_path):
    lines = [" ".join(f"w{i % 5}x{k}" for k in range(n)) for i, n in enumerate(LENGTHS)]
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path), lines


def test_calls_keep_to_the_budget_and_the_rows(model):
    _, embedder = model
    keyed = [(i, ["t"] * n) for i, n in enumerate(LENGTHS)]
    runner = BiLMRunner(embedder.bilm, batch_size=4, sort_batches=8, max_tokens=14,
                        max_length=5)
    calls = list(runner._planned_calls(keyed))
    keys = [k for call_keys, _, _ in calls for k in call_keys]
    assert sorted(keys) == list(range(len(LENGTHS)))  # every sentence once, empty ones too
    for call_keys, sentences, rows in calls:
        assert [len(s) for s in sentences] == [LENGTHS[k] for k in call_keys]
        filled = [sum(p.stop - p.start + 2 for p in row) for row in rows]
        assert len(rows) <= 4
        assert len(rows) * max(filled, default=0) <= 14 or len(rows) == 1 or all(
            p.sentence == rows[0][0].sentence for row in rows for p in row), filled
        # every token of the call's sentences in exactly one piece, windows in order
        for index, sentence in enumerate(sentences):
            pieces = [(p.start, p.stop) for row in rows for p in row if p.sentence == index]
            assert pieces == windows(len(sentence), 5)[:len(pieces)]
            assert sum(b - a for a, b in pieces) == len(sentence)
    # Without a budget one call of 4 rows holds the window, rows nearly full: 15 sentences
    # (14 with tokens, 69 tokens and 28 frame positions: 25 steps at best) in 4 rows of at
    # most 26 steps.
    (_, sentences, rows), = BiLMRunner(embedder.bilm, batch_size=4, sort_batches=8,
                                        max_tokens=None)._planned_calls(keyed)
    assert len(sentences) == 15 and len(rows) == 4
    assert max(sum(p.stop - p.start + 2 for p in row) for row in rows) <= 26


@pytest.mark.parametrize("max_tokens, max_length", [(None, 512), (12, 512), (6, 4)])
def test_file_equals_one_by_one_embedding(model, corpus, tmp_path, max_tokens, max_length):
    """The file (token budget, sorted batches, token memo, windows) against each sentence
    run alone through the char path, window by window."""
    _, embedder = model
    path, lines = corpus
    out = str(tmp_path / "out.hdf5")
    embed_file(embedder.bilm, path, out, batch_size=4, progress=False, max_tokens=max_tokens,
               max_length=max_length)
    with h5py.File(out, "r") as f:
        for i, line in enumerate(lines):
            expected = _char_path_alone(embedder.bilm, line.split(), max_length)
            assert f[str(i)].shape == expected.shape == (3, LENGTHS[i], 16)
            np.testing.assert_allclose(f[str(i)][...], expected, atol=ATOL, rtol=0)


def _char_path_alone(bilm, tokens, max_length):
    """`(L + 1, n, 2P)`: the sentence alone through the char path, window by window."""
    parts = [np.asarray(bilm(keras_elmo.batch_to_ids([tokens[a:b]]))["layers"])[0]
             for a, b in windows(len(tokens), max_length)]
    return np.concatenate(parts, axis=1)


def test_token_cache_encodes_each_distinct_token_once_within_its_bound(model):
    _, embedder = model
    sentences = [["a", "b", "a"], ["b", "c"], [], ["a", "d", "e", "f"]]
    reference = np.asarray(embedder.bilm(keras_elmo.batch_to_ids(sentences))["layers"])
    memo = TokenEmbeddingCache(embedder.bilm, max_entries=4, batch_size=2)

    def check(found, expected):  # one (L + 1, n, 2P) per sentence against the dense rows
        assert len(found) == len(expected)
        for row, layers in enumerate(found):
            n = layers.shape[1]
            np.testing.assert_allclose(layers, expected[row, :, :n], atol=ATOL, rtol=0)
            assert not expected[row, :, n:].any()

    check(memo.layers(sentences[:2]), reference[:2])
    assert memo.computed == 3 and len(memo) == 3  # a, b, c
    check(memo.layers(sentences), reference)
    assert memo.computed == 6 and len(memo) == 4  # d, e, f new; room for one of them
    memo.layers([["e", "f"]])
    assert memo.computed == 8  # not kept: computed again, still right
    np.testing.assert_allclose(memo(sentences)["layers"], reference, atol=ATOL, rtol=0)
    with pytest.raises(ValueError, match="batch_size must be a positive int; received 0"):
        TokenEmbeddingCache(embedder.bilm, batch_size=0)


def test_one_trace_for_every_batch_shape(model, corpus, tmp_path):
    """Budgets, windows and batch sizes change the shapes, never the traced functions."""
    _, embedder = model
    path, _ = corpus
    traced = BiLMRunner(embedder.bilm).token_cache._traced
    functions = traced._token_vectors, traced._rows, traced._one_row
    for max_tokens, max_length in ((None, 512), (7, 3), (20, 2)):
        embed_file(embedder.bilm, path, str(tmp_path / f"o{max_tokens}.hdf5"), batch_size=3,
                   progress=False, max_tokens=max_tokens, max_length=max_length)
    # the biLSTM: one trace for several rows, one for calls of one row (budget 7: pieces
    # of up to 5 positions, one row each); windows are pieces like any other
    assert [f.experimental_get_tracing_count() for f in functions] == [1, 1, 1]


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_on_a_terminal_shows_rate_and_eta(model, corpus, tmp_path):
    _, embedder = model
    path, lines = corpus
    stream = _Terminal()
    meter = Progress(len(lines), label="embed", stream=stream)
    meter.interval = 0.0  # every batch, for the test
    embed_file(embedder.bilm, path, str(tmp_path / "o.hdf5"), batch_size=2, progress=meter,
               max_tokens=12)  # several calls
    text = stream.getvalue()
    updates = [part for part in text.split("\r") if part.strip()]
    assert len(updates) >= 3
    assert "ETA" in updates[0] and "tok/s" in updates[0] and "sentences (" in updates[0]
    assert updates[-1].startswith(f"embed: {len(lines)}/{len(lines)} sentences (100%)")
    assert text.endswith("\n")


def test_closing_line_and_quiet_mode(model, corpus, tmp_path, capsys):
    directory, _ = model
    path, lines = corpus
    tokens = sum(LENGTHS)
    assert main(["embed", directory, path, str(tmp_path / "a.hdf5"), "--no-progress"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and out.count("\n") == 1
    assert f"{len(lines)} datasets" in out and f"{tokens} tokens" in out
    assert " tokens/s), peak memory " in out and " MiB" in out
    assert main(["embed", directory, path, str(tmp_path / "b.hdf5"), "--quiet"]) == 0
    assert capsys.readouterr() == ("", "")
    with h5py.File(tmp_path / "a.hdf5", "r") as a, h5py.File(tmp_path / "b.hdf5", "r") as b:
        assert sorted(a) == sorted(b)


@pytest.mark.slow
def test_an_interrupted_embed_restarts_cleanly(model, tmp_path):
    """The choice is restart, not resume: after `kill -9` the same command, run again,
    writes the whole file (equal to an uninterrupted run) and leaves no temporary."""
    directory, embedder = model
    lines = [f"the cat sat on mat number {i % 97}" for i in range(30000)]
    big = tmp_path / "big.txt"
    big.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    command = [sys.executable, "-m", "keras_elmo.cli", "embed", directory, str(big),
               str(out / "elmo.hdf5"), "--quiet"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while not any(name.endswith(".tmp") for name in os.listdir(out)):
            assert process.poll() is None and time.time() < deadline, "no temporary appeared"
            time.sleep(0.05)
        time.sleep(1.0)  # part of the file written
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert not (out / "elmo.hdf5").exists()
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout == "" and done.stderr == "", done.stderr[-2000:]
    assert os.listdir(out) == ["elmo.hdf5"]  # the killed run's temporary is gone
    with h5py.File(out / "elmo.hdf5", "r") as f:
        assert len(f) == len(lines) + 1  # every line and sentence_to_index
        for i in (0, 12345, len(lines) - 1):
            np.testing.assert_allclose(f[str(i)][...], embedder.embed_sentence(lines[i]),
                                       atol=ATOL, rtol=0)
