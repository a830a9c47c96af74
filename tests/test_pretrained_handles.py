"""Model URLs that name no archive extension (tfhub.dev and Kaggle Models handles, Kaggle's
download URL): the query TF Hub's resolver adds, the archive kind told by the file's first
bytes, `./` entries as the archive's own folder and nothing more, and one line, with nothing
left in the cache, for what is no archive or holds no model."""

import bz2
import gzip
import io
import json
import lzma
import os
import tarfile
import zipfile

import pytest

import model_mirror
from keras_elmo.pretrained.archives import (ArchiveRefusedError, sniff_archive_kind,
                                            unpack_archive)
from keras_elmo.pretrained.fetch_plan import plan_for_archive_url
from keras_elmo.pretrained.model_check import ModelCheckError
from keras_elmo.pretrained.resolve import resolve_model

HANDLE = "https://tfhub.dev/google/elmo/3"
KAGGLE = "https://www.kaggle.com/api/v1/models/google/elmo/tensorFlow1/elmo/3/download"


def _tar(members, compression="gz"):
    """A tar (`w:gz` etc.) of `(name, bytes or None for a folder)`."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=f"w:{compression}" if compression else "w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _handles(directory):
    """The tiny published model as TF Hub and Kaggle serve archives: `./` entries, at
    paths with no extension; and two that are no model archive."""
    model = directory / ".tiny_model"
    files = [(name, (model / name).read_bytes()) for name in ("options.json", "weights.hdf5")]
    served = {
        "google/elmo/3": _tar([("./", None)] + [(f"./{n}", d) for n, d in files]),
        "api/v1/models/google/elmo/tensorFlow1/elmo/3/download": _zip(
            [("./", b"")] + [(f"./{n}", d) for n, d in files]),
        "google/weights/1": files[1][1],
        "google/empty/1": _tar([("./", None), ("./README.md", b"no model here\n")]),
    }
    for path, data in served.items():
        (directory / path).parent.mkdir(parents=True, exist_ok=True)
        (directory / path).write_bytes(data)


def _zip(members):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members:
            archive.writestr(name, data)
    return buffer.getvalue()


mirror_dir, served = model_mirror.served_fixtures(["elmo-small"], _handles)


def test_handles_get_tf_hubs_query_and_other_urls_keep_theirs():
    assert plan_for_archive_url(HANDLE).files[0].urls == (
        HANDLE + "?tf-hub-format=compressed",)
    assert plan_for_archive_url(HANDLE + "?x=1").files[0].urls == (
        HANDLE + "?x=1&tf-hub-format=compressed",)
    kaggle_handle = ("https://www.kaggle.com/models/google/elmo/frameworks/tensorFlow1/"
                     "variations/elmo/versions/3")
    assert plan_for_archive_url(kaggle_handle).files[0].urls == (
        kaggle_handle + "?tf-hub-format=compressed",)
    assert plan_for_archive_url(KAGGLE).files[0].urls == (KAGGLE,)  # a download URL
    assert plan_for_archive_url(HANDLE + "?tf-hub-format=compressed").files[0].urls == (
        HANDLE + "?tf-hub-format=compressed",)
    assert plan_for_archive_url(HANDLE).label == "tfhub.dev/google/elmo/3"
    with pytest.raises(ValueError, match=r"the model URL https://x.org/w.hdf5 names no archive"):
        plan_for_archive_url("https://x.org/w.hdf5")


def test_a_tfhub_handle_loads_through_the_mirror(served, mirror_dir):
    path = resolve_model(HANDLE).model_dir
    assert served.targets == ["/google/elmo/3?tf-hub-format=compressed"]
    assert sorted(os.listdir(path)) == [".keras-elmo-cache.json", "options.json",
                                        "weights.hdf5"]
    assert (mirror_dir / ".tiny_model" / "weights.hdf5").read_bytes() == open(
        os.path.join(path, "weights.hdf5"), "rb").read()
    assert resolve_model(HANDLE).model_dir == path and len(served.targets) == 1


def test_kaggles_download_url_serving_a_zip_with_dot_entries(served):
    path = resolve_model(KAGGLE).model_dir
    assert sorted(os.listdir(path)) == [".keras-elmo-cache.json", "options.json",
                                        "weights.hdf5"]
    with open(os.path.join(path, ".keras-elmo-cache.json"), encoding="utf-8") as handle:
        assert json.load(handle)["source"]["urls"] == [KAGGLE]


def test_a_url_serving_no_archive_is_one_line_and_nothing_stays(served, tmp_path, mirror_dir):
    size = (mirror_dir / "google" / "weights" / "1").stat().st_size
    with pytest.raises(ArchiveRefusedError) as raised:
        resolve_model("https://tfhub.dev/google/weights/1")
    assert str(raised.value) == (
        f"the model URL {served.url}/google/weights/1?tf-hub-format=compressed served an HDF5 "
        f"file (a weights file alone?), {size:,} bytes, not a model archive; expected a zip or "
        "a tar (plain, .gz, .bz2 or .xz) holding a model directory; nothing of it was kept.")
    assert model_mirror.left_in_cache(tmp_path) == []


def test_a_tar_gz_that_holds_no_model_is_one_line_and_nothing_stays(served, tmp_path):
    with pytest.raises(ModelCheckError) as raised:
        resolve_model("https://tfhub.dev/google/empty/1")
    line = str(raised.value)
    assert "\n" not in line and "holds no model director" in line
    assert "README.md" in line and line.endswith("nothing of it was kept.")
    assert model_mirror.left_in_cache(tmp_path) == []


@pytest.mark.parametrize("compression, kind", [("gz", "tar"), ("bz2", "tar"), ("xz", "tar"),
                                               (None, "tar")])
def test_the_kind_is_told_by_the_first_bytes(tmp_path, compression, kind):
    path = tmp_path / "download"
    path.write_bytes(_tar([("./", None), ("./a", b"x")], compression))
    assert sniff_archive_kind(str(path), "the model URL u") == kind
    path.write_bytes(_zip([("a", b"x")]))
    assert sniff_archive_kind(str(path), "the model URL u") == "zip"


@pytest.mark.parametrize("data, found", [
    (gzip.compress(b"just text", mtime=0), "a gzip-compressed file that holds no tar archive"),
    (bz2.compress(b"just text"), "a bzip2-compressed file that holds no tar archive"),
    (lzma.compress(b"just text"), "an? xz-compressed file that holds no tar archive"),
    (b'{"lstm": {}}', "a JSON document"),
    (b"<!DOCTYPE html><html>", "an HTML or XML document"),
    (b"", "an empty file"),
    (b"\x08\x01\x12\x04abcd", "a file starting with bytes 08 01 12 04 61 62 63 64"),
])
def test_what_is_no_archive_is_named(tmp_path, data, found):
    path = tmp_path / "download"
    path.write_bytes(data)
    with pytest.raises(ArchiveRefusedError, match=f"^the model URL u served {found}, "):
        sniff_archive_kind(str(path), "the model URL u")


@pytest.fixture
def staging(tmp_path):
    folder = tmp_path / "staging"
    folder.mkdir()
    return folder


def test_dot_entries_are_the_archives_own_folder(tmp_path, staging):
    archive = tmp_path / "m.tar.gz"
    archive.write_bytes(_tar([("./", None), (".", None), ("./saved_model.pb", b"pb"),
                              ("./variables/", None), ("./variables/variables.index", b"i")]))
    written = unpack_archive(str(archive), str(staging), "tar", "tfhub-elmo-3")
    assert written == ["saved_model.pb", os.path.join("variables", "variables.index")]
    assert sorted(os.listdir(staging)) == ["saved_model.pb", "variables"]


@pytest.mark.parametrize("name, reason", [
    ("./..", "climbs out with '..'"),
    ("./../evil", "climbs out with '..'"),
    (".//etc/passwd", "has an empty or '.' step inside its path"),
    ("./a//b", "has an empty or '.' step inside its path"),
    ("a/./b", "has an empty or '.' step inside its path"),
    ("././b", "has an empty or '.' step inside its path"),
])
def test_only_one_leading_dot_step_is_accepted(tmp_path, staging, name, reason):
    archive = tmp_path / "m.tar"
    archive.write_bytes(_tar([("./", None), (name, b"x")], None))
    with pytest.raises(ArchiveRefusedError) as raised:
        unpack_archive(str(archive), str(staging), "tar", "m")
    assert f"member {name!r} {reason};" in str(raised.value)


def test_a_dot_entry_that_is_a_file_or_a_link_is_refused(tmp_path, staging):
    archive = tmp_path / "m.zip"
    archive.write_bytes(_zip([("./.", b"x")]))
    with pytest.raises(ArchiveRefusedError, match=r"member '\./\.' names no file"):
        unpack_archive(str(archive), str(staging), "zip", "m")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        link = tarfile.TarInfo("./variables")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc"
        tar.addfile(link)
    (tmp_path / "l.tar").write_bytes(buffer.getvalue())
    with pytest.raises(ArchiveRefusedError, match=r"member '\./variables' is a symbolic link"):
        unpack_archive(str(tmp_path / "l.tar"), str(staging), "tar", "m")
