"""Model archives unpacked safely: a zip-slip, an absolute path, a symbolic or hard link, a
device or a repeated member is refused in one line, and nothing is written outside the
folder; a damaged archive is one line too; a good zip or tar unpacks whole."""

import io
import os
import stat
import tarfile
import zipfile

import pytest

import model_mirror
from keras_elmo.pretrained.archives import (ArchiveDamagedError, ArchiveRefusedError,
                                            archive_kind, unpack_archive)


def _zip(path, members):
    """A zip of `(name, bytes, mode or None)` members."""
    with zipfile.ZipFile(path, "w") as archive:
        for name, data, mode in members:
            info = zipfile.ZipInfo(name)
            if mode is not None:
                info.external_attr = mode << 16
            archive.writestr(info, data)
    return path


def _tar(path, members, mode="w:xz"):
    """A tar of `(name, bytes, type, link target)` members."""
    with tarfile.open(path, mode) as archive:
        for name, data, kind, target in members:
            info = tarfile.TarInfo(name)
            info.type = kind
            info.linkname = target or ""
            info.size = len(data) if kind == tarfile.REGTYPE else 0
            archive.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
    return path


def _outside(tmp_path):
    """Every file under tmp_path outside `staging/` and the archives themselves."""
    return sorted(os.path.relpath(os.path.join(d, n), tmp_path)
                  for d, _, names in os.walk(tmp_path) for n in names
                  if not os.path.relpath(d, tmp_path).startswith("staging")
                  and not n.startswith("archive"))


@pytest.fixture
def staging(tmp_path):
    path = tmp_path / "staging"
    path.mkdir()
    return path


@pytest.mark.parametrize("name, reason", [
    ("../evil.txt", "climbs out with '..'"),
    ("model/../../evil.txt", "climbs out with '..'"),
    ("/tmp/evil.txt", "is an absolute path"),
    ("C:/evil.txt", "is an absolute path"),
    ("..\\evil.txt", "climbs out with '..'"),
])
def test_a_zip_member_outside_the_folder_is_refused(tmp_path, staging, name, reason):
    archive = _zip(tmp_path / "archive.zip", [("model/config.json", b"{}", None),
                                              (name, b"owned", None)])
    with pytest.raises(ArchiveRefusedError) as raised:
        unpack_archive(archive, staging, "zip", "efml-xx")
    assert str(raised.value) == (
        f"refused to unpack the archive of efml-xx (archive.zip): member {name!r} {reason}; a "
        "model archive holds regular files and folders inside its own folder only, so nothing "
        "of it was kept (use the model's published archive).")
    assert _outside(tmp_path) == []
    assert not os.path.exists("/tmp/evil.txt") or name != "/tmp/evil.txt"


def test_a_zip_symlink_is_refused(tmp_path, staging):
    archive = _zip(tmp_path / "archive.zip",
                   [("model/link", b"/etc/passwd", stat.S_IFLNK | 0o777)])
    with pytest.raises(ArchiveRefusedError, match="member 'model/link' is a symbolic link"):
        unpack_archive(archive, staging, "zip", "efml-xx")
    assert not os.path.lexists(staging / "model" / "link") and _outside(tmp_path) == []


@pytest.mark.parametrize("kind, target, reason", [
    (tarfile.SYMTYPE, "/etc/passwd", "is a symbolic link"),
    (tarfile.SYMTYPE, "../../outside", "is a symbolic link"),
    (tarfile.LNKTYPE, "/etc/passwd", "is a hard link"),
    (tarfile.CHRTYPE, None, "is a device or FIFO, not a regular file"),
    (tarfile.FIFOTYPE, None, "is a device or FIFO, not a regular file"),
])
def test_a_tar_link_or_device_is_refused(tmp_path, staging, kind, target, reason):
    archive = _tar(tmp_path / "archive.tar.xz", [
        ("zhs.model/config.json", b"{}", tarfile.REGTYPE, None),
        ("zhs.model/encoder.pkl", b"", kind, target),
        ("zhs.model/encoder.pkl", b"written through the link", tarfile.REGTYPE, None)])
    with pytest.raises(ArchiveRefusedError, match=f"member 'zhs.model/encoder.pkl' {reason}"):
        unpack_archive(archive, staging, "tar", "efml-zhs")
    assert not os.path.lexists(staging / "zhs.model" / "encoder.pkl")
    assert _outside(tmp_path) == []


def test_a_tar_slip_and_an_absolute_path_are_refused(tmp_path, staging):
    for name, reason in (("zhs.model/../../evil", "climbs out with '..'"),
                         ("/evil", "is an absolute path")):
        archive = _tar(tmp_path / "archive.tar.bz2",
                       [(name, b"owned", tarfile.REGTYPE, None)], mode="w:bz2")
        with pytest.raises(ArchiveRefusedError, match=reason):
            unpack_archive(archive, staging, "tar", "efml-zhs")
    assert _outside(tmp_path) == [] and os.listdir(staging) == []


def test_a_repeated_member_is_refused(tmp_path, staging):
    archive = _tar(tmp_path / "archive.tar", [("a.dic", b"1", tarfile.REGTYPE, None),
                                              ("./a.dic", b"2", tarfile.REGTYPE, None)], "w")
    with pytest.raises(ArchiveRefusedError, match="appears twice"):
        unpack_archive(archive, staging, "tar", "efml-xx")


def test_a_damaged_archive_is_one_line(tmp_path, staging):
    data = model_mirror.efml_archive_bytes("zhs.model.tar.xz")
    (tmp_path / "archive.tar.xz").write_bytes(data[:len(data) // 2])
    with pytest.raises(ArchiveDamagedError) as raised:
        unpack_archive(tmp_path / "archive.tar.xz", staging, "tar", "efml-zhs")
    line = str(raised.value)
    assert line.startswith("the archive of efml-zhs (archive.tar.xz) cannot be read to its end")
    assert line.endswith("run the same command again to download it afresh.")
    assert raised.value.exit_code == 75 and "\n" not in line
    (tmp_path / "archive.zip").write_bytes(b"PK\x03\x04 not a zip")
    with pytest.raises(ArchiveDamagedError, match="BadZipFile"):
        unpack_archive(tmp_path / "archive.zip", staging, "zip", "efml-en")


@pytest.mark.parametrize("name", ["144.zip", "zhs.model.tar.bz2", "zhs.model.tar.xz",
                                  "zhs.model.tar.gz"])
def test_a_good_archive_unpacks_whole(tmp_path, staging, name):
    (tmp_path / name).write_bytes(model_mirror.efml_archive_bytes(name))
    written = unpack_archive(tmp_path / name, staging, archive_kind(name), "efml")
    prefix = "" if name.endswith(".zip") else "zhs.model/"
    assert sorted(written) == sorted(prefix + f for f in model_mirror.EFML_FILES)
    for file in model_mirror.EFML_FILES:
        with open(os.path.join(model_mirror.EFML_FIXTURE, file), "rb") as handle:
            assert (staging / (prefix + file)).read_bytes() == handle.read()


def test_archive_kinds():
    assert [archive_kind(n) for n in ("a.zip", "a.TAR.GZ", "a.tgz", "a.tar.bz2", "a.tbz2",
                                      "a.tar.xz", "a.txz", "a.tar", "a.hdf5", "a.gz")] == [
        "zip", "tar", "tar", "tar", "tar", "tar", "tar", "tar", None, None]
