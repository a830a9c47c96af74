"""examples/raw_chinese.py: People's Daily's segmented text made raw (spaces removed)."""

import pytest

import raw_chinese


def test_make_raw_removes_every_space_and_keeps_the_lines(tmp_path):
    data = tmp_path / "pd"
    data.mkdir()
    (data / "train.txt").write_text("迈向 充满 希望 的 新 世纪\n\n江 泽民\u3000讲话 。\n",
                                    encoding="utf-8")
    (data / "heldout.txt").write_text("北京 1 月 1 日 电\n", encoding="utf-8")
    stats = raw_chinese.make_raw(str(data), str(tmp_path / "raw"))
    assert (tmp_path / "raw" / "train.txt").read_text(encoding="utf-8") == (
        "迈向充满希望的新世纪\n\n江泽民讲话。\n")
    assert (tmp_path / "raw" / "heldout.txt").read_text(encoding="utf-8") == "北京1月1日电\n"
    assert stats == {"train": (3, 16), "heldout": (1, 7)}


def test_a_missing_source_is_one_clear_line(tmp_path, capsys):
    assert raw_chinese.main(["--data", str(tmp_path), "--out", str(tmp_path / "raw")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "train.txt not found" in err[0] and "people-daily" in err[0]
    with pytest.raises(FileNotFoundError):
        raw_chinese.make_raw(str(tmp_path), str(tmp_path / "raw"))
