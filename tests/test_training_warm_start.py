"""`keras-elmo train --init-from`: a new run starts from an existing biLM's weights."""

import json
import os

import numpy as np
import pytest

from keras_elmo.cli.main import main
from keras_elmo.models.bilm import BiLM
from keras_elmo.formats.weight_file import bilm_weight_arrays, load_bilm_weights
from keras_elmo.training.config import TrainingConfig
from keras_elmo.training.language_model import LanguageModel
from keras_elmo.training.model_dir import ModelDir
from keras_elmo.evaluation.perplexity import evaluate
from keras_elmo.training.vocabulary import Vocabulary
from keras_elmo.training.warm_start import warm_start

SOURCE_LINES = "the cat sat on the mat\na dog ran to the red house\nthe end\n"
TARGET_LINES = "the phone is good\nthe battery is bad\nthe cat likes the phone\n"
SOURCE_VOCAB = ["<S>", "</S>", "<UNK>", "the", "cat", "sat", "on", "mat", "a", "dog"]
TARGET_VOCAB = ["<S>", "</S>", "<UNK>", "the", "phone", "is", "cat", "good", "bad", "battery"]


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A tiny model trained 60 steps by `keras-elmo train` (options, weights, checkpoint)."""
    root = tmp_path_factory.mktemp("warm")
    (root / "source.txt").write_text(SOURCE_LINES * 30)
    (root / "target.txt").write_text(TARGET_LINES * 30)
    (root / "source_vocab.txt").write_text("\n".join(SOURCE_VOCAB) + "\n")
    (root / "target_vocab.txt").write_text("\n".join(TARGET_VOCAB) + "\n")
    model_dir = str(root / "source_model")
    assert main(["train", model_dir, "--train", str(root / "source.txt"), "--vocab",
                 str(root / "source_vocab.txt"), "--size", "tiny", "--optimizer", "adam",
                 "--learning-rate", "0.01", "--max-steps", "60", "--log-every", "60"]) == 0
    return root, model_dir


def _fresh_model(model_dir, vocab):
    config = ModelDir(model_dir).load_config().replace(n_tokens_vocab=len(vocab),
                                                       init_from=None)
    return config, LanguageModel.from_training_config(config)


def test_encoder_and_shared_softmax_rows_are_copied(source):
    root, model_dir = source
    vocab = Vocabulary.load(str(root / "target_vocab.txt"))
    _, model = _fresh_model(model_dir, vocab)
    fresh_softmax = model.softmax.embeddings.numpy().copy()
    report = warm_start(model, model_dir, vocab)

    shared = [t for t in TARGET_VOCAB if t in SOURCE_VOCAB]  # <S> </S> <UNK> the cat
    assert report == {"source": model_dir, "softmax_rows_copied": len(shared),
                      "vocab_size": len(TARGET_VOCAB)}
    reference = BiLM.from_weights(os.path.join(model_dir, "options.json"),
                                  os.path.join(model_dir, "weights.hdf5"))
    expected, found = bilm_weight_arrays(reference), bilm_weight_arrays(model.backbone)
    assert sorted(expected) == sorted(found)
    for name in expected:
        np.testing.assert_array_equal(found[name], expected[name], err_msg=name)

    _, _, source_model = ModelDir(model_dir).load_model()
    source_rows = source_model.softmax.embeddings.numpy()
    source_bias = source_model.softmax.bias.numpy()
    rows = model.softmax.embeddings.numpy()
    for i, token in enumerate(TARGET_VOCAB):
        if token in SOURCE_VOCAB:
            j = SOURCE_VOCAB.index(token)
            np.testing.assert_array_equal(rows[i], source_rows[j], err_msg=token)
            assert model.softmax.bias.numpy()[i] == source_bias[j]
        else:  # a new word keeps the fresh initialisation
            np.testing.assert_array_equal(rows[i], fresh_softmax[i], err_msg=token)
            assert model.softmax.bias.numpy()[i] == 0.0


def test_same_vocabulary_gives_the_source_models_perplexity(source):
    root, model_dir = source
    config, _, source_model = ModelDir(model_dir).load_model()
    vocab = Vocabulary.load(str(root / "source_vocab.txt"))
    _, model = _fresh_model(model_dir, vocab)
    files = [str(root / "source.txt")]
    before = evaluate(model, files, vocab, config)["average"]
    warm_start(model, model_dir, vocab)
    after = evaluate(model, files, vocab, config)["average"]
    target = evaluate(source_model, files, vocab, config)["average"]
    assert after == pytest.approx(target, rel=1e-5)
    assert after < 0.95 * before  # the source learned something the fresh model lacks


def test_published_layout_source_copies_weights_and_no_softmax(source, tmp_path):
    root, model_dir = source
    published = str(tmp_path / "published")
    os.makedirs(published)
    for name in ("options.json", "weights.hdf5"):  # bilm-tf ships only these two
        with open(os.path.join(model_dir, name), "rb") as src:
            with open(os.path.join(published, name), "wb") as dst:
                dst.write(src.read())
    vocab = Vocabulary.load(str(root / "target_vocab.txt"))
    _, model = _fresh_model(model_dir, vocab)
    assert warm_start(model, published, vocab)["softmax_rows_copied"] == 0
    reference = BiLM.from_weights(os.path.join(published, "options.json"),
                                  os.path.join(published, "weights.hdf5"))
    loaded = model.backbone
    load_bilm_weights(reference, os.path.join(published, "weights.hdf5"))
    for name, array in bilm_weight_arrays(reference).items():
        np.testing.assert_array_equal(bilm_weight_arrays(loaded)[name], array, err_msg=name)


def test_cli_takes_the_source_architecture_trains_and_resumes(source, tmp_path, capsys):
    root, model_dir = source
    new_dir = str(tmp_path / "adapted")
    argv = ["train", new_dir, "--init-from", model_dir, "--train", str(root / "target.txt"),
            "--vocab", str(root / "target_vocab.txt"), "--max-steps", "3", "--log-every", "3"]
    assert main(argv) == 0  # default --size small, but the architecture is the source's
    out = capsys.readouterr().out
    assert f"started from {model_dir} (softmax rows of 5 of 10 words copied)" in out
    saved = TrainingConfig.from_file(os.path.join(new_dir, "options.json"))
    assert saved.options == ModelDir(model_dir).load_config().options
    assert saved.init_from == model_dir and saved.optimizer == "adam"  # small preset's
    with open(os.path.join(new_dir, "options.json"), encoding="utf-8") as handle:
        assert json.load(handle)["init_from"] == model_dir

    assert main(["train", new_dir, "--max-steps", "5", "--log-every", "5"]) == 0
    out = capsys.readouterr().out
    assert "resumed from ckpt-3" in out and "started from" not in out
    assert main(["train", new_dir, "--init-from", str(tmp_path), "--max-steps", "6"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"was trained with init_from={model_dir!r}" in err[0], err


@pytest.mark.parametrize("case, expected", [
    ("missing", "model directory not found: "),
    ("no_weights", "has no weights.hdf5"),
    ("architecture", "its architecture differs from this run's (lstm.dim is"),
])
def test_bad_sources_are_one_clear_line(source, tmp_path, capsys, case, expected):
    root, model_dir = source
    init_from = model_dir
    extra = []
    if case == "missing":
        init_from = str(tmp_path / "nowhere")
    elif case == "no_weights":
        init_from = str(tmp_path / "only_options")
        os.makedirs(init_from)
        with open(os.path.join(model_dir, "options.json"), "rb") as src:
            (tmp_path / "only_options" / "options.json").write_bytes(src.read())
    else:
        config = tmp_path / "wider.json"
        config.write_text(json.dumps({"lstm": {"dim": 64}}))
        extra = ["--config", str(config)]
    argv = ["train", str(tmp_path / "new"), "--init-from", init_from, "--train",
            str(root / "target.txt"), "--vocab", str(root / "target_vocab.txt"),
            "--max-steps", "1"] + extra
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected in err[0], err
    assert err[0].startswith("keras-elmo train: error: --init-from ")
    assert not (tmp_path / "new").exists()  # refused before anything was written
