"""AllenNLP habits: `ElmoEmbedder` (numpy in and out), `embed --all/--top/--average
--use-sentence-keys`, published files under any names (`--options-file/--weight-file`), unknown
flags under the subcommand's usage line, and no TensorFlow start-up noise on stderr."""

import os
import shutil
import subprocess
import sys

import h5py
import numpy as np
import pytest

import keras
import keras_elmo
from keras_elmo import ElmoEmbedder
from keras_elmo.cli.main import main
from keras_elmo.cli.tensorflow_start import NOISE

ATOL = 1e-5
SENTENCES = [["the", "cat", "sat"], [], ["中国", "人民", "日报", "。"], ["a"],
             ["a", "much", "longer", "sentence", "than", "the", "others"]]


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """A tiny biLM as a MODEL_DIR, the same files under AllenNLP-style names, and the BiLM."""
    keras.utils.set_random_seed(3)
    root = tmp_path_factory.mktemp("published")
    directory = str(root / "model")
    keras_elmo.save_published(keras_elmo.BiLM(keras_elmo.BiLMOptions.tiny()), directory)
    options = str(root / "elmo_tiny_options.json")
    weights = str(root / "elmo_tiny_weights.hdf5")
    shutil.copyfile(os.path.join(directory, "options.json"), options)
    shutil.copyfile(os.path.join(directory, "weights.hdf5"), weights)
    bilm = keras_elmo.BiLM.from_weights(options, weights)
    return directory, options, weights, bilm


def _alone(bilm, tokens):
    """(L + 1, n, 2P) of one sentence run alone through the biLM."""
    if not tokens:
        return np.zeros((bilm.num_output_layers, 0, bilm.output_dim), np.float32)
    return np.asarray(bilm(keras_elmo.batch_to_ids([tokens]))["layers"])[0]


def test_embedder_from_a_directory_and_from_two_files(published):
    directory, options, weights, bilm = published
    for embedder in (ElmoEmbedder(directory), ElmoEmbedder(options_file=options,
                                                           weight_file=weights)):
        vectors = embedder.embed_sentence(["the", "cat", "sat"])
        assert vectors.shape == (3, 3, 16) and vectors.dtype == np.float32
        np.testing.assert_allclose(vectors, _alone(bilm, ["the", "cat", "sat"]), atol=ATOL)
        assert embedder.embed_sentence([]).shape == (3, 0, 16)


def test_embed_sentences_keeps_the_order_across_length_sorted_batches(published):
    directory, _, _, bilm = published
    embedder = ElmoEmbedder(directory, batch_size=2)
    stream = (s for s in SENTENCES * 3)  # a generator: read lazily
    outputs = list(embedder.embed_sentences(stream))
    assert len(outputs) == len(SENTENCES) * 3
    for tokens, vectors in zip(SENTENCES * 3, outputs):
        assert vectors.shape == (3, len(tokens), 16)
        np.testing.assert_allclose(vectors, _alone(bilm, tokens), atol=ATOL)
    # Strings are split on whitespace, like the lines of a file.
    lines = list(embedder.embed_sentences([" the  cat sat\n", "a"], batch_size=1))
    np.testing.assert_allclose(lines[0], _alone(bilm, ["the", "cat", "sat"]), atol=ATOL)
    batch = embedder.embed_batch([["a"], ["the", "cat"]])
    assert [b.shape for b in batch] == [(3, 1, 16), (3, 2, 16)]


@pytest.mark.parametrize("bad, message", [
    ([["the", "cat sat"]], "tokens must be without whitespace"),
    ([["the", " "]], "tokens must be without whitespace"),
    ([42], "expected a list of str tokens"),
])
def test_embedder_rejects_bad_sentences(published, bad, message):
    embedder = ElmoEmbedder(published[0])
    with pytest.raises(ValueError, match=message):
        list(embedder.embed_sentences(bad))


@pytest.mark.parametrize("kwargs, message", [
    ({}, "received neither"),
    ({"options_file": "o.json"}, "--options and --weights go together"),
    ({"model_dir": "m", "options_file": "o.json", "weight_file": "w.hdf5"}, "not both"),
    ({"model_dir": "nowhere"}, "neither a directory nor a name of the catalog"),  # a word
    ({"model_dir": "runs/nowhere"}, "model directory not found"),  # a path
    ({"options_file": "nowhere.json", "weight_file": "w.hdf5"}, "--options nowhere.json "
                                                                 "does not exist"),
    ({"model_dir": None, "batch_size": 0}, None),
])
def test_embedder_arguments_give_one_clear_error(published, kwargs, message):
    if message is None:  # a bad batch size with a good model
        with pytest.raises(ValueError, match="batch_size must be a positive int"):
            ElmoEmbedder(published[0], batch_size=0)
        return
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        ElmoEmbedder(**kwargs)


def test_embed_file_output_formats_and_sentence_keys(published, tmp_path):
    directory, _, _, bilm = published
    text = tmp_path / "in.txt"
    text.write_text("the cat sat\n\na\nthe cat sat\n", encoding="utf-8")
    embedder = ElmoEmbedder(directory)
    for output_format, pick in (("all", lambda v: v), ("top", lambda v: v[-1]),
                                ("average", lambda v: v.mean(axis=0))):
        out = str(tmp_path / f"{output_format}.hdf5")
        embedder.embed_file(str(text), out, output_format=output_format)
        with h5py.File(out, "r") as f:
            np.testing.assert_allclose(f["0"][...], pick(_alone(bilm, ["the", "cat", "sat"])),
                                       atol=ATOL)
            assert f["1"].shape[-2] == 0 and "sentence_to_index" in f
    keyed = str(tmp_path / "keys.hdf5")
    text.write_text("the cat sat\na\nthe cat sat\n", encoding="utf-8")
    embedder.embed_file(str(text), keyed, output_format="top", use_sentence_keys=True)
    with h5py.File(keyed, "r") as f:
        assert sorted(f) == ["a", "the cat sat"]  # a repeat written once, no index
        np.testing.assert_allclose(f["a"][...], _alone(bilm, ["a"])[-1], atol=ATOL)
    with pytest.raises(ValueError, match="output_format must be one of"):
        embedder.embed_file(str(text), keyed, output_format="first")


@pytest.mark.parametrize("line, what", [("", "is empty"), ("a / b", "cannot be an HDF5 name")])
def test_sentence_keys_refuse_what_hdf5_cannot_name(published, tmp_path, capsys, line, what):
    text = tmp_path / "in.txt"
    text.write_text(f"the cat\n{line}\n", encoding="utf-8")
    out = tmp_path / "out.hdf5"
    code = main(["embed", published[0], str(text), str(out), "--use-sentence-keys",
                 "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "line 2" in err and what in err, err
    assert not out.exists()


def test_cli_reads_published_files_under_any_names(published, tmp_path, capsys):
    directory, options, weights, bilm = published
    text = tmp_path / "in.txt"
    text.write_text("the cat sat\na\n", encoding="utf-8")
    by_dir, by_files = str(tmp_path / "dir.hdf5"), str(tmp_path / "files.hdf5")
    assert main(["embed", directory, str(text), by_dir, "--average", "--no-progress"]) == 0
    assert main(["embed", str(text), by_files, "--average", "--options-file", options,
                 "--weight-file", weights, "--batch-size", "1", "--no-progress"]) == 0
    assert "even average" in capsys.readouterr().out
    with h5py.File(by_dir, "r") as a, h5py.File(by_files, "r") as b:
        np.testing.assert_allclose(a["0"][...], b["0"][...], atol=ATOL)
        np.testing.assert_allclose(b["1"][...], _alone(bilm, ["a"]).mean(axis=0), atol=ATOL)
    code = main(["neighbors", "the cat sat", "--word", "cat", "--corpus", str(text),
                 "--options", options, "--weights", weights, "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0 and "nearest tokens in context" in out and "[cat]" in out


@pytest.mark.parametrize("argv, message", [
    (["--top", "--all"], "not allowed with argument"),
    (["--bogus"], "unrecognized arguments: --bogus"),
    (["--top", "--mix-weights", "m.json"], "--mix-weights needs --mixed"),
])
def test_bad_embed_flags_are_reported_under_embeds_usage(published, tmp_path, capsys, argv,
                                                         message):
    text = tmp_path / "in.txt"
    text.write_text("a\n", encoding="utf-8")
    argv = ["embed", published[0], str(text), str(tmp_path / "o.hdf5"), *argv]
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's own errors
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2 and message in err, err
    if "usage:" in err:
        assert "usage: keras-elmo embed" in err


def test_noise_pattern_matches_tensorflows_start_up_lines_only():
    noise = [
        "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
        "I0000 00:00:1795451024.523114    3125 cudart_stub.cc:31] Could not find cuda drivers "
        "on your machine, GPU will not be used.",
        "I0000 00:00:1795451024.614231    3125 cpu_feature_guard.cc:227] This TensorFlow "
        "binary is optimized to use available CPU instructions in performance-critical "
        "operations.",
        "To enable the following instructions: AVX2 FMA, in other operations, rebuild "
        "TensorFlow with the appropriate compiler flags.",
        "E0000 00:00:1795451024.700000    3125 cuda_executor.cc:1309] failed call to cuInit: "
        "INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)",
    ]
    kept = ["keras-elmo embed: error: model directory not found: x",
            "embed: 3/3 sentences (100%) | 5 tokens | 1 tok/s | 0:00:04",
            "W0000 00:00:1.0 1 trainer.cc:1] something of ours"]
    assert all(NOISE.fullmatch(line) for line in noise)
    assert not any(NOISE.fullmatch(line) for line in kept)


@pytest.mark.slow
def test_commands_print_no_tensorflow_start_up_lines(published, tmp_path):
    text = tmp_path / "in.txt"
    text.write_text("the cat\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    proc = subprocess.run([sys.executable, "-m", "keras_elmo.cli", "embed", published[0],
                           str(text), str(tmp_path / "o.hdf5"), "--no-progress"],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "", proc.stderr
