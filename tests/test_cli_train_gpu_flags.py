"""`keras-elmo train --precision / --jit-compile / --steps-per-execution`: saved in
options.json, bad values refused in one line."""

import json
import os

from keras_elmo.cli.main import main


def write_corpus(tmp_path):
    corpus = tmp_path / "train.txt"
    corpus.write_text("the cat sat on the mat\na dog ran to the red house\n" * 20)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["<S>", "</S>", "<UNK>", "the", "cat", "sat", "on", "mat", "a",
                                "dog", "ran", "to", "red", "house"]) + "\n")
    return str(corpus), str(vocab)


def test_the_flags_reach_the_saved_config(tmp_path):
    corpus, vocab = write_corpus(tmp_path)
    model = str(tmp_path / "model")
    assert main(["train", model, "--train", corpus, "--vocab", vocab, "--size", "tiny",
                 "--precision", "mixed_float16", "--steps-per-execution", "3",
                 "--no-jit-compile", "--max-steps", "4", "--log-every", "2"]) == 0
    with open(os.path.join(model, "options.json"), encoding="utf-8") as f:
        saved = json.load(f)
    assert (saved["precision"], saved["steps_per_execution"], saved["jit_compile"]) == \
        ("mixed_float16", 3, False)
    assert os.path.isfile(os.path.join(model, "weights.hdf5"))


def test_bad_values_are_one_line(tmp_path, capsys):
    corpus, vocab = write_corpus(tmp_path)
    model = str(tmp_path / "bad")
    code = main(["train", model, "--train", corpus, "--vocab", vocab, "--size", "tiny",
                 "--steps-per-execution", "0"])
    err = [line for line in capsys.readouterr().err.splitlines()
           if "steps_per_execution" in line]
    assert code != 0 and len(err) == 1 and "received 0" in err[0], err
    assert not os.path.exists(os.path.join(model, "options.json"))
