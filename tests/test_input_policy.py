"""Issue 15: every input is checked where it enters, with one clear line.

Invalid UTF-8 (one policy in every command), strict options.json types, --heldout checked
before the run, a checkpoint that does not match options.json, non-finite weights, char ids
out of range.
"""

import copy
import json
import os
import re

import numpy as np
import pytest

import weight_fixtures
from keras_elmo.models.bilm import BiLM
from keras_elmo.text.characters import batch_to_ids
from keras_elmo.cli.main import main
from keras_elmo.formats.options import BiLMOptions
from keras_elmo.text.text_files import check_utf8, read_text_lines
from keras_elmo.formats.weight_file import save_bilm_weights

BAD_LINE = "他 会 说\n".encode("utf-8") * 2 + b"a \xff b\n" + "好 的\n".encode("utf-8")


#: TensorFlow's C++ start-up lines (absl, before its log level applies: "failed call to
#: cuInit" on a machine without GPU). Python-side warnings are NOT filtered.
_CPP_LOG = re.compile(r"^([EIW]\d{4} |WARNING: All log messages before absl)")


def _one_error_line(capfd, argv, code=2):
    assert main(argv) == code
    err = [line for line in capfd.readouterr().err.strip().splitlines()
           if line and not _CPP_LOG.match(line)]
    assert len(err) == 1, err
    return err[0]


@pytest.fixture
def bad_utf8(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(BAD_LINE * 3)
    return str(path)


def test_text_files_name_file_and_line(bad_utf8, tmp_path):
    with pytest.raises(ValueError, match=r"bad\.txt, line 3: not UTF-8"):
        check_utf8([bad_utf8])
    with pytest.raises(ValueError, match=r"bad\.txt, line 3: not UTF-8"):
        list(read_text_lines(bad_utf8))
    cut = tmp_path / "cut.txt"
    cut.write_bytes("好 的\n好".encode("utf-8")[:-1])  # ends inside a character
    with pytest.raises(ValueError, match=r"cut\.txt, line 2: not UTF-8"):
        check_utf8([str(cut)])
    good = tmp_path / "good.txt"
    good.write_bytes("好 的\r\nb\n".encode("utf-8"))
    check_utf8([str(good)])
    assert list(read_text_lines(str(good))) == [(1, "好 的"), (2, "b")]


@pytest.mark.parametrize("command", ["vocab", "train", "perplexity", "embed", "neighbors"])
def test_invalid_utf8_is_the_same_error_in_every_command(command, bad_utf8, tmp_path,
                                                         tiny_model_dir, capfd):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("<S>\n</S>\n<UNK>\na\n")
    argv = {
        "vocab": ["vocab", "--train", bad_utf8, "--out", str(tmp_path / "v.txt")],
        "train": ["train", str(tmp_path / "run"), "--train", bad_utf8, "--vocab", str(vocab),
                  "--size", "tiny"],
        "perplexity": ["perplexity", tiny_model_dir.directory, "--heldout", bad_utf8],
        "embed": ["embed", tiny_model_dir.directory, bad_utf8, str(tmp_path / "e.hdf5"),
                  "--no-progress"],
        "neighbors": ["neighbors", tiny_model_dir.directory, "他 会 说", "--word", "会",
                      "--corpus", bad_utf8, "--no-progress"],
    }[command]
    line = _one_error_line(capfd, argv)
    assert f"{bad_utf8}, line 3: not UTF-8 (invalid start byte" in line, line
    assert not os.path.exists(tmp_path / "run") and not os.path.exists(tmp_path / "v.txt")


def test_vocab_refuses_an_empty_corpus(tmp_path, capfd):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n   \n")
    line = _one_error_line(capfd, ["vocab", "--train", str(empty), "--out",
                                   str(tmp_path / "v.txt")])
    assert "holds no token" in line and not os.path.exists(tmp_path / "v.txt")


def test_a_missing_heldout_fails_before_the_run(tmp_path, capfd):
    corpus = tmp_path / "train.txt"
    corpus.write_text("a b c\n" * 5)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("<S>\n</S>\n<UNK>\na\nb\n")
    line = _one_error_line(capfd, ["train", str(tmp_path / "run"), "--train", str(corpus),
                                   "--vocab", str(vocab), "--size", "tiny", "--heldout",
                                   str(tmp_path / "missing.txt")])
    assert "No corpus file matches" in line and "missing.txt" in line
    assert not os.path.exists(tmp_path / "run")  # refused before anything was written


@pytest.mark.parametrize("section, key, value, expected", [
    ("lstm", "use_skip_connections", "false", "'lstm.use_skip_connections' must be true or false; received 'false' (str)"),
    ("lstm", "dim", 12.9, "'lstm.dim' must be an integer; received 12.9 (float)"),
    ("lstm", "dim", "12", "'lstm.dim' must be an integer; received '12' (str)"),
    ("char_cnn", "filters", "abc", "'char_cnn.filters' must be a list of [width, n_filters] pairs; received 'abc'"),
    ("char_cnn", "filters", [[1, 4], [2.5, 8]], "'char_cnn.filters[1][0]' must be an integer; received 2.5"),
    ("lstm", "cell_clip", "3", "'lstm.cell_clip' must be a number or null; received '3'"),
    ("char_cnn", "n_highway", True, "'char_cnn.n_highway' must be an integer; received True"),
])
def test_options_json_types_are_strict(tmp_path, tiny_options_dict, section, key, value,
                                       expected):
    options = copy.deepcopy(tiny_options_dict)
    options[section][key] = value
    path = tmp_path / "options.json"
    path.write_text(json.dumps(options))
    with pytest.raises(ValueError) as info:
        BiLMOptions.from_file(str(path))
    assert str(info.value) == f"options file {path}: options.json key {expected}" or \
        expected in str(info.value), str(info.value)
    assert str(path) in str(info.value)


def test_training_keys_of_options_json_are_typed(tmp_path, tiny_options_dict):
    from keras_elmo.training.config import TrainingConfig

    options = dict(copy.deepcopy(tiny_options_dict), learning_rate="0.1", n_tokens_vocab=10)
    path = tmp_path / "options.json"
    path.write_text(json.dumps(options))
    with pytest.raises(ValueError, match=r"options\.json: learning_rate must be a number; "
                                         r"received '0\.1' \(str\)"):
        TrainingConfig.from_file(str(path))


def test_non_finite_weight_files_are_refused(tiny_model_dir, tmp_path, capfd):
    arrays = dict(tiny_model_dir.arrays)
    arrays["CNN_proj/W_proj"] = arrays["CNN_proj/W_proj"].copy()
    arrays["CNN_proj/W_proj"][0, :3] = [np.nan, np.inf, -np.inf]
    directory = str(tmp_path / "nan_model")
    options_file, weight_file = weight_fixtures.write_model_dir(
        directory, tiny_model_dir.options, arrays)
    with pytest.raises(ValueError, match=r"dataset 'CNN_proj/W_proj' holds 3 non-finite "
                                         r"values \(NaN or inf\)"):
        BiLM.from_weights(options_file, weight_file)
    sentences = tmp_path / "s.txt"
    sentences.write_text("a b\n")
    for argv in (["embed", directory, str(sentences), str(tmp_path / "e.hdf5")],
                 ["export", directory, str(tmp_path / "export")]):
        line = _one_error_line(capfd, argv)
        assert "holds 3 non-finite values" in line and weight_file in line, line
    assert not os.path.exists(tmp_path / "e.hdf5") and not os.path.exists(tmp_path / "export")
    # Never written either.
    bilm = BiLM.from_weights(tiny_model_dir.options_file, tiny_model_dir.weight_file)
    bilm.token_embedder.char_embeddings.assign(
        np.full(bilm.token_embedder.char_embeddings.shape, np.nan, np.float32))
    with pytest.raises(ValueError, match="refusing to write .*'char_embed' holds 1044 "
                                         "non-finite"):
        save_bilm_weights(bilm, str(tmp_path / "w.hdf5"))
    assert os.listdir(tmp_path).count("w.hdf5") == 0


def test_char_ids_out_of_range_are_refused(tiny_model_dir):
    import keras_elmo

    bilm = BiLM.from_weights(tiny_model_dir.options_file, tiny_model_dir.weight_file)
    ids = batch_to_ids([["a", "b"], ["c"]])
    bad = np.array(ids)
    bad[0, 1, 2] = -3
    with pytest.raises(ValueError, match=r"char ids must be in \[0, 261\].*received ids from "
                                         r"-3 to 261"):
        bilm(bad)
    layer = keras_elmo.ElmoLayer.from_weights(tiny_model_dir.options_file,
                                              tiny_model_dir.weight_file)
    bad[0, 1, 2] = 262
    with pytest.raises(ValueError, match=r"received ids from 0 to 262"):
        layer(bad)
    assert layer(ids).shape == (2, 2, 16)
