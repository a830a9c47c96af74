"""Issue 27's corpus embedder: token-budget batches, equality with one-by-one embedding,
one trace, the progress line and closing line, `--quiet`, and a clean restart after a kill."""

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


def test_batches_keep_to_the_token_budget_and_the_sentence_cap(model):
    _, embedder = model
    keyed = [(i, ["t"] * n) for i, n in enumerate(LENGTHS)]
    runner = BiLMRunner(embedder.bilm, batch_size=4, sort_batches=8, max_tokens=10,
                        max_length=5)
    batches = [(keys, sentences) for keys, sentences in runner._sorted_batches(keyed)]
    assert sorted(k for keys, _ in batches for k in keys) == list(range(len(LENGTHS)))
    for _, sentences in batches:
        rows = sum(max(-(-len(s) // 5), 1) for s in sentences)  # windows of 5 are rows
        width = min(max(len(s) for s in sentences), 5)
        assert len(sentences) <= 4
        assert rows * width <= 10 or len(sentences) == 1, [len(s) for s in sentences]
    # Sorted by length inside the window, so consecutive batches never overlap in length.
    flat = [len(s) for _, sentences in batches for s in sentences]
    assert flat == sorted(flat)
    # Without a budget the sentence cap and the plan cut: the window's shortest three
    # (lengths 0-1) run apart from the next four rather than padded to their width.
    plain = list(BiLMRunner(embedder.bilm, batch_size=4, sort_batches=8)._sorted_batches(keyed))
    assert [[len(s) for s in sentences] for _, sentences in plain] == [
        [0, 1, 1], [2, 2, 3, 3], [4, 5, 6, 7], [8, 9, 9, 12]]


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
    np.testing.assert_allclose(memo.layers(sentences[:2]), np.asarray(embedder.bilm(
        keras_elmo.batch_to_ids(sentences[:2]))["layers"]), atol=ATOL, rtol=0)
    assert memo.computed == 3 and len(memo) == 3  # a, b, c
    np.testing.assert_allclose(memo.layers(sentences), reference, atol=ATOL, rtol=0)
    assert memo.computed == 6 and len(memo) == 4  # d, e, f new; room for one of them
    memo.layers([["e", "f"]])
    assert memo.computed == 8  # not kept: computed again, still right
    with pytest.raises(ValueError, match="batch_size must be a positive int; received 0"):
        TokenEmbeddingCache(embedder.bilm, batch_size=0)


def test_one_trace_for_every_batch_shape(model, corpus, tmp_path):
    """Budgets, windows and batch sizes change the shapes, never the traced functions."""
    _, embedder = model
    path, _ = corpus
    traced = BiLMRunner(embedder.bilm).token_cache._traced
    functions = traced.token_vectors, traced._rows, traced._one_row, traced._windowed
    for max_tokens, max_length in ((None, 512), (7, 3), (20, 2)):
        embed_file(embedder.bilm, path, str(tmp_path / f"o{max_tokens}.hdf5"), batch_size=3,
                   progress=False, max_tokens=max_tokens, max_length=max_length)
    # the biLSTM: one trace for several rows, one for a batch of one row (budget 7), one
    # for batches with sentences in windows
    assert [f.experimental_get_tracing_count() for f in functions] == [1, 1, 1, 1]


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_on_a_terminal_shows_rate_and_eta(model, corpus, tmp_path):
    _, embedder = model
    path, lines = corpus
    stream = _Terminal()
    meter = Progress(len(lines), label="embed", stream=stream)
    meter.interval = 0.0  # every batch, for the test
    embed_file(embedder.bilm, path, str(tmp_path / "o.hdf5"), batch_size=2, progress=meter)
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
