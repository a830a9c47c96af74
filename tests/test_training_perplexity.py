"""Held-out perplexity: full softmax against numpy, and the `keras-elmo perplexity` output."""

import io
import json
import math

import numpy as np
import pytest

from keras_elmo.cli.main import main
from keras_elmo.text.characters import batch_to_ids
from keras_elmo.training.config import TrainingConfig
from keras_elmo.training.model_dir import ModelDir
from keras_elmo.evaluation.perplexity import evaluate, format_report
from keras_elmo.training.trainer import Trainer
from keras_elmo.training.vocabulary import Vocabulary

VOCAB = Vocabulary(["<S>", "</S>", "<UNK>", "a", "b", "c", "d"])
HELDOUT = ["a b c", "d zz", "", "c c c c c c c"]  # zz: <UNK>; the long line is cut at 5


def _config():
    return TrainingConfig.preset("tiny").replace(n_tokens_vocab=len(VOCAB),
                                                 max_sentence_tokens=5)


def _numpy_perplexity(model, sentences):
    weights, bias = model.softmax.embeddings.numpy(), model.softmax.bias.numpy()
    p = model.options.projection_dim
    forward = backward = count = 0.0
    for words in sentences:
        framed = ["<S>"] + words + ["</S>"]
        ids = VOCAB.encode(framed)
        top = model(batch_to_ids([framed]))["layers"].numpy()[0, -1]  # (T, 2P)
        for t in range(len(framed) - 1):
            forward += _nll(top[t, :p] @ weights.T + bias, ids[t + 1])  # t predicts t + 1
            backward += _nll(top[t + 1, p:] @ weights.T + bias, ids[t])  # t + 1 predicts t
            count += 1
    return math.exp(forward / count), math.exp(backward / count), count


def _nll(logits, target):
    top = logits.max()
    return np.log(np.exp(logits - top).sum()) + top - logits[target]


def test_evaluate_matches_numpy(tmp_path):
    path = tmp_path / "heldout.txt"
    path.write_text("\n".join(HELDOUT) + "\n")
    config = _config()
    from keras_elmo.training.language_model import LanguageModel

    model = LanguageModel.from_training_config(config)
    result = evaluate(model, [str(path)], VOCAB, config)
    chunks = [["a", "b", "c"], ["d", "zz"], ["c"] * 5, ["c"] * 2]
    forward, backward, count = _numpy_perplexity(model, chunks)
    assert result["targets"] == count == 4 + 3 + 6 + 3
    assert result["sentences"] == 3 and result["chunks"] == 4  # the blank line is no sentence
    np.testing.assert_allclose(result["forward"], forward, rtol=1e-5)
    np.testing.assert_allclose(result["backward"], backward, rtol=1e-5)
    np.testing.assert_allclose(result["average"], math.sqrt(forward * backward), rtol=1e-5)


def test_a_long_sentence_is_one_sentence_in_two_chunks(tmp_path):
    """The report counted chunks as sentences ("2,119 sentences" for 2,112 lines)."""
    path = tmp_path / "long.txt"
    path.write_text("c c c c c c c\n")  # 7 tokens, cut at 5
    from keras_elmo.training.language_model import LanguageModel

    result = evaluate(LanguageModel.from_training_config(_config()), [str(path)], VOCAB,
                      _config())
    assert (result["sentences"], result["chunks"], result["targets"]) == (1, 2, 6 + 3)
    assert format_report(result, "long.txt").splitlines()[0] == (
        "held-out: long.txt (1 sentence (2 chunks of <= 5 tokens), 9 targets per direction, "
        "</S> and <S> included)")
    uncut = dict(result, sentences=2, chunks=2)
    assert format_report(uncut, "h.txt").startswith("held-out: h.txt (2 sentences, 9 targets")


def test_empty_heldout_is_an_error(tmp_path):
    path = tmp_path / "empty.txt"
    path.write_text("\n\n")
    from keras_elmo.training.language_model import LanguageModel

    with pytest.raises(ValueError, match="contain no token"):
        evaluate(LanguageModel.from_training_config(_config()), [str(path)], VOCAB, _config())


def test_perplexity_cli_output(tmp_path, capsys):
    heldout = tmp_path / "heldout.txt"
    heldout.write_text("\n".join(HELDOUT) + "\n")
    VOCAB.save(str(tmp_path / "vocab.txt"))
    model_dir = ModelDir(str(tmp_path / "model"))
    model_dir.prepare(_config(), str(tmp_path / "vocab.txt"))
    Trainer(_config(), VOCAB, model_dir, stream=io.StringIO()).save()

    assert main(["perplexity", model_dir.path, "--heldout", str(heldout)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] == (f"held-out: {heldout} (3 sentences (4 chunks of <= 5 tokens), 16 "
                        "targets per direction, </S> and <S> included)")
    assert [line.split(":")[0] for line in lines[1:]] == [
        "forward perplexity", "backward perplexity", "average perplexity"]
    figures = [float(line.split()[-1]) for line in lines[1:]]
    assert all(1.0 < f < 20.0 for f in figures)  # untrained: near the 7-word uniform value

    assert main(["perplexity", model_dir.path, "--heldout", str(heldout), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert sorted(result) == ["average", "backward", "chunks", "forward",
                              "max_sentence_tokens", "sentences", "targets", "tokenizer"]
    assert result["tokenizer"] == "whitespace"
    np.testing.assert_allclose(result["forward"], figures[0], atol=0.006)


def test_perplexity_cli_without_a_model(tmp_path, capsys):
    heldout = tmp_path / "heldout.txt"
    heldout.write_text("a b\n")
    assert main(["perplexity", str(tmp_path / "nothing"), "--heldout", str(heldout)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "options.json not found" in err[0]
