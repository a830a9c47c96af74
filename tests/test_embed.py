"""`keras-elmo embed`: AllenNLP's HDF5 layout, empty lines, duplicates, mixed output, token
cache, streaming, and one clear line with exit 2 for bad input.

The killed and the next `embed` processes run from the module's first test on, beside the
others (`background`); their test is the last."""

import json
import os
import subprocess
import sys

import h5py
import numpy as np
import pytest

import keras
import keras_elmo
from background import background_jobs
from keras_elmo.embedding.bilm_runner import BiLMRunner
from keras_elmo.embedding.embed_file import embed_file, mix_sentence
from keras_elmo.export import build_mix
from keras_elmo.cli.main import main

ATOL = 1e-5
LINES = ["the cat sat", "", "  the cat sat  ", "中国 人民 日报 。", "a", "the cat sat",
         "a much longer sentence than the others here"]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A tiny random biLM saved as a MODEL_DIR, and the same BiLM in memory."""
    keras.utils.set_random_seed(1)
    bilm = keras_elmo.BiLM(keras_elmo.BiLMOptions.tiny())
    directory = str(tmp_path_factory.mktemp("model"))
    keras_elmo.save_published(bilm, directory)
    return directory, keras_elmo.BiLM.from_weights(os.path.join(directory, "options.json"),
                                                   os.path.join(directory, "weights.hdf5"))


@pytest.fixture
def text_file(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    return str(path)


def _expected(bilm, line):
    """(L + 1, n, 2P) of one sentence run alone through the char path."""
    tokens = line.split()
    return np.asarray(bilm(keras_elmo.batch_to_ids([tokens]))["layers"])[0]


def _run(capsys, *argv):
    code = main(["embed", *argv, "--no-progress"])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_layout_empty_lines_duplicates_and_values(model, text_file, tmp_path, capsys):
    directory, bilm = model
    out = str(tmp_path / "out.hdf5")
    code, stdout, stderr = _run(capsys, directory, text_file, out, "--batch-size", "2")
    assert code == 0 and stderr == ""
    assert "7 datasets (3, n, 16) float32" in stdout and "1 empty lines" in stdout
    with h5py.File(out, "r") as f:
        assert sorted(f) == sorted([str(i) for i in range(len(LINES))] + ["sentence_to_index"])
        for i, line in enumerate(LINES):
            data = f[str(i)]
            assert data.dtype == np.float32
            assert data.shape == (3, len(line.split()), 16)
            np.testing.assert_allclose(data[...], _expected(bilm, line), atol=ATOL, rtol=0)
        assert f["sentence_to_index"].shape == (1,)
        index = json.loads(f["sentence_to_index"][0])
    # Text stripped as AllenNLP does; a repeated sentence maps to its LAST line.
    assert index == {"the cat sat": "5", "": "1", "中国 人民 日报 。": "3", "a": "4",
                     "a much longer sentence than the others here": "6"}


def test_mixed_output_even_and_trained_mix(model, text_file, tmp_path, capsys):
    directory, bilm = model
    out = str(tmp_path / "mixed.hdf5")
    assert _run(capsys, directory, text_file, out, "--mixed")[0] == 0
    with h5py.File(out, "r") as f:
        assert f["1"].shape == (0, 16)
        np.testing.assert_allclose(f["3"][...], _expected(bilm, LINES[3]).mean(axis=0),
                                   atol=ATOL, rtol=0)
    mix = tmp_path / "scalar_mix.json"
    mix.write_text(json.dumps({"scalar_parameters": [1.0, 0.0, -1.0], "gamma": 2.0}))
    assert _run(capsys, directory, text_file, out, "--mix-weights", str(mix))[0] == 0
    weights = np.exp([1.0, 0.0, -1.0]) / np.exp([1.0, 0.0, -1.0]).sum() * 2.0
    with h5py.File(out, "r") as f:
        expected = np.tensordot(weights, _expected(bilm, LINES[3]), axes=1)
        np.testing.assert_allclose(f["3"][...], expected, atol=ATOL, rtol=0)


def test_mix_sentence_layer_norm_uses_the_sentence_alone():
    layers = np.random.default_rng(0).normal(size=(3, 4, 6)).astype(np.float32)
    mix = build_mix(3, np.log([0.2, 0.3, 0.5]).tolist(), gamma=1.0, do_layer_norm=True)
    mixed = mix_sentence(mix, layers)
    normed = [(h - h.mean()) / np.sqrt(h.var() + 1e-12) for h in layers]
    np.testing.assert_allclose(mixed, 0.2 * normed[0] + 0.3 * normed[1] + 0.5 * normed[2],
                               atol=ATOL)
    assert mix_sentence(mix, np.zeros((3, 0, 6), np.float32)).shape == (0, 6)


def test_token_cache_gives_the_same_file(model, text_file, tmp_path, capsys):
    directory, _ = model
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("<S>\n</S>\n<UNK>\nthe\ncat\n中国\n", encoding="utf-8")
    plain, cached = str(tmp_path / "plain.hdf5"), str(tmp_path / "cached.hdf5")
    assert _run(capsys, directory, text_file, plain, "--no-token-cache")[0] == 0
    code, stdout, _ = _run(capsys, directory, text_file, cached, "--vocab", str(vocab))
    assert code == 0 and "token cache 6 tokens, 8 hits, 14 char-CNN fallbacks" in stdout
    with h5py.File(plain, "r") as a, h5py.File(cached, "r") as b:
        for i in range(len(LINES)):
            np.testing.assert_allclose(a[str(i)][...], b[str(i)][...], atol=ATOL, rtol=0)


def test_forget_sentences_and_progress_line(model, text_file, tmp_path, capsys):
    directory, bilm = model
    out = str(tmp_path / "out.hdf5")
    code = main(["embed", directory, text_file, out, "--forget-sentences"])
    captured = capsys.readouterr()
    assert code == 0 and "no sentence_to_index" in captured.out
    assert "embed: 7/7 sentences (100%)" in captured.err  # the final progress line
    with h5py.File(out, "r") as f:
        assert "sentence_to_index" not in f


def test_input_is_streamed_in_windows(model):
    _, bilm = model
    runner = BiLMRunner(bilm, batch_size=2, sort_batches=2)  # windows of 4 sentences
    consumed = []

    def lines():
        for i in range(10):
            consumed.append(i)
            yield i, ["w"] * (10 - i)

    first_keys, _, first_layers = next(runner.iter_batches(lines()))
    # two windows read (the next call is planned while this one is handed back), not the
    # whole input; the first call holds the first window, the longest sentence first
    assert len(consumed) == 8
    assert sorted(first_keys) == [0, 1, 2, 3] and first_keys[0] == 0
    assert [layers.shape for layers in first_layers] == [(3, 10 - k, 16) for k in first_keys]
    keys = [key for key, _, _ in runner.iter_layers(lines())]
    assert sorted(keys) == list(range(10))


def test_embed_file_writes_nothing_when_it_fails(model, tmp_path):
    _, bilm = model
    path = tmp_path / "bad.txt"
    path.write_bytes(b"good line\n" * 3 + b"bad \xff byte\n")
    out = tmp_path / "out.hdf5"
    with pytest.raises(ValueError, match=r"line 4: not UTF-8"):
        embed_file(bilm, str(path), str(out), batch_size=2, progress=False)
    assert os.listdir(tmp_path) == ["bad.txt"]  # no output, no temporary file


@pytest.mark.parametrize("case", ["no_model_dir", "no_weights", "no_input", "input_is_dir",
                                  "no_output_dir", "output_is_dir", "batch_size",
                                  "not_utf8", "bad_mix"])
def test_bad_input_is_one_line_and_exit_2(model, text_file, tmp_path, capsys, case):
    directory, _ = model
    out = str(tmp_path / "out.hdf5")
    argv = [directory, text_file, out]
    if case == "no_model_dir":
        argv[0] = str(tmp_path / "missing")
    elif case == "no_weights":
        (tmp_path / "half").mkdir()
        (tmp_path / "half" / "options.json").write_text("{}")
        argv[0] = str(tmp_path / "half")
    elif case == "no_input":
        argv[1] = str(tmp_path / "missing.txt")
    elif case == "input_is_dir":
        argv[1] = str(tmp_path)
    elif case == "no_output_dir":
        argv[2] = str(tmp_path / "missing" / "out.hdf5")
    elif case == "output_is_dir":
        argv[2] = str(tmp_path)
    elif case == "batch_size":
        argv += ["--batch-size", "0"]
    elif case == "not_utf8":
        (tmp_path / "latin1.txt").write_bytes("café au lait\n".encode("latin-1"))
        argv[1] = str(tmp_path / "latin1.txt")
    elif case == "bad_mix":
        (tmp_path / "mix.json").write_text('{"scalar_parameters": [1.0]}')
        argv += ["--mix-weights", str(tmp_path / "mix.json")]
    code, stdout, stderr = _run(capsys, *argv)
    assert code == 2
    assert stderr.count("\n") == 1 and stderr.startswith("keras-elmo embed: error: ")
    assert not os.path.exists(out) or os.path.isdir(out)


@pytest.mark.slow
def test_console_exit_code_and_stderr_in_a_subprocess(tmp_path, text_file):
    result = subprocess.run(
        [sys.executable, "-m", "keras_elmo.cli", "embed", str(tmp_path / "nope"), text_file,
         str(tmp_path / "o.hdf5")], capture_output=True, text=True, timeout=120,
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"keras-elmo embed: error: model directory not found: {tmp_path / 'nope'} does not "
        "exist; expected a directory with options.json and weights.hdf5 (or an "
        "ELMoForManyLangs model directory)."]


def test_length_sorting_changes_nothing_but_the_order(model, tmp_path):
    """Packing a window regroups the sentences into calls; each line keeps its own vectors
    (same as running it alone, and as file-order calls) under its own key."""
    _, bilm = model
    lengths = [7, 1, 5, 0, 9, 2, 6, 3, 8, 4, 1, 9]
    lines = [" ".join(f"w{i}x{k}" for k in range(n)) for i, n in enumerate(lengths)]
    keyed = [(i, line.split()) for i, line in enumerate(lines)]
    file_order = {k: v for k, _, v in BiLMRunner(bilm, batch_size=3, sort_batches=1)
                  .iter_layers(keyed)}
    runner = BiLMRunner(bilm, batch_size=3, sort_batches=4)  # one window of 12: packed
    batches = list(runner.iter_batches(keyed))
    assert sorted(k for keys, _, _ in batches for k in keys) == list(range(12))
    for keys, sentences, layers in batches:  # each sentence's own layers, no padding
        assert [found.shape for found in layers] == [(3, lengths[k], 16) for k in keys]
        for key, found in zip(keys, layers):
            np.testing.assert_allclose(found, file_order[key], atol=ATOL, rtol=0)
    path = tmp_path / "lines.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = str(tmp_path / "out.hdf5")
    embed_file(bilm, str(path), out, batch_size=3, progress=False)
    with h5py.File(out, "r") as f:
        index = json.loads(f["sentence_to_index"][0])
        for i, line in enumerate(lines):
            assert index[line] == str(i)
            alone = _expected(bilm, line)  # (L + 1, n, 2P)
            assert f[str(i)].shape == alone.shape == (3, lengths[i], 16)
            np.testing.assert_allclose(f[str(i)][...], alone, atol=ATOL, rtol=0)
            np.testing.assert_allclose(file_order[i], alone, atol=ATOL, rtol=0)


def test_runners_of_one_bilm_share_one_trace(model, text_file, tmp_path):
    """Every file embedded with the same biLM reuses the first trace (any batch size)."""
    _, bilm = model
    first, second = BiLMRunner(bilm, batch_size=2), BiLMRunner(bilm, batch_size=5)
    traced = first.token_cache._traced  # the char CNN once per token, then the biLSTM
    assert traced is second.token_cache._traced
    for size in (2, 3):
        embed_file(bilm, text_file, str(tmp_path / f"o{size}.hdf5"), batch_size=size,
                   progress=False)
    assert traced._token_vectors.experimental_get_tracing_count() == 1
    # one trace of the biLSTM for batches of several rows; the one-row one never made
    assert traced._rows.experimental_get_tracing_count() == 1
    assert traced._one_row.experimental_get_tracing_count() == 0


def test_a_failing_batch_in_the_worker_reaches_the_caller(model):
    _, bilm = model
    runner = BiLMRunner(bilm, batch_size=1, sort_batches=1)
    batches = runner.iter_batches([(0, ["a"]), (1, [7])])  # 7 is not a token
    with pytest.raises(ValueError, match="A token must be str or bytes; received int"):
        list(batches)


def _killed_then_next_embed(directory, tmp_path):
    """The killed-embed test, run in the background (`background`): its asserts raise in
    the test."""
    import signal
    import time

    big = tmp_path / "big.txt"
    big.write_text("the cat sat on the mat today\n" * 40000, encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    command = [sys.executable, "-m", "keras_elmo.cli", "embed", directory, str(big)]
    process = subprocess.Popen(command + [str(out / "first.hdf5"), "--no-progress"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while not any(name.endswith(".tmp") for name in os.listdir(out)):
            assert process.poll() is None and time.time() < deadline, "no temporary appeared"
            time.sleep(0.05)
        time.sleep(0.5)  # writing
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert [n for n in os.listdir(out) if n.endswith(".tmp")], "the kill left no temporary"
    assert not (out / "first.hdf5").exists()  # never a partial file under the final name
    small = tmp_path / "small.txt"
    small.write_text("a b\n", encoding="utf-8")
    done = subprocess.run(command[:5] + [str(small), str(out / "second.hdf5"), "--no-progress"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert sorted(os.listdir(out)) == ["second.hdf5"]


@pytest.fixture(scope="module", autouse=True)
def background(request, tmp_path_factory, model):
    """The killed-embed test's processes, from the module's first test on."""
    directory, _ = model
    with background_jobs(request, tmp_path_factory, {
            "test_a_killed_embed_leaves_nothing_behind_the_next_run_in_its_folder":
                lambda tmp_path: _killed_then_next_embed(directory, tmp_path)}) as jobs:
        yield jobs


@pytest.mark.slow
def test_a_killed_embed_leaves_nothing_behind_the_next_run_in_its_folder(background, request):
    """`kill -9` mid-file: no partial file under the final name; the next `embed` in the
    same folder (another output name) removes the killed run's temporary."""
    background.result(request)  # _killed_then_next_embed, its asserts
