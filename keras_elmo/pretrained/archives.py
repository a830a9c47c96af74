"""Unpacking a downloaded model archive (zip, tar, tar.gz, tar.bz2, tar.xz) safely.

A crafted archive must not write outside the folder it is unpacked into: every member is
checked before anything of it is written, and refused (one `ArchiveRefusedError` line) when
its name is absolute, holds `..` or an empty or `.` step, or would land outside the folder,
and when it is anything but a regular file or a directory (a symbolic or hard link, a
device, a FIFO). One leading `./` is the archive's own folder (TF Hub's and Kaggle's
archives list `./`, `./saved_model.pb`, `./variables/`), and nothing more: `./..` and
`.//etc` are refused. An archive named by no extension (a tfhub.dev handle) is told by its
first bytes (`sniff_archive_kind`). A member name
that repeats is refused too (it would overwrite). The caller unpacks into a staging folder
that it removes on any error, so a refused archive leaves nothing behind. A damaged archive
(a truncated download) is one `ArchiveDamagedError` line.

Standard library only (zipfile, tarfile).

Example:
>>> kind = archive_kind("144.zip")  # 'zip'
>>> unpack_archive("downloads/144.zip", "staging/", kind, "efml-en")  # doctest: +SKIP
['char.dic', 'config.json', 'encoder.pkl', 'token_embedder.pkl', 'word.dic']
"""

import bz2
import gzip
import lzma
import os
import shutil
import stat
import tarfile
import zipfile
import zlib

from keras_elmo.process.storage_errors import check_free_space

#: Archive name endings -> the module that reads them.
SUFFIXES = {".zip": "zip", ".tar": "tar", ".tar.gz": "tar", ".tgz": "tar", ".tar.bz2": "tar",
            ".tbz2": "tar", ".tar.xz": "tar", ".txz": "tar"}
_CHUNK = 1 << 20
#: Where a tar header holds `ustar` (POSIX and GNU tar).
_TAR_MAGIC_AT = 257
#: The first bytes of a compressed file -> its compression.
_COMPRESSED = {b"\x1f\x8b": "gzip", b"BZh": "bzip2", b"\xfd7zXZ\x00": "xz"}


class ArchiveRefusedError(ValueError):
    """An archive member that would write outside its folder, or is no regular file."""


class ArchiveDamagedError(OSError):
    """An archive that cannot be read to its end (a rerun downloads it again)."""

    exit_code = 75


def archive_kind(name):
    """`"zip"` or `"tar"` for an archive file name (or URL path), else None.

    Example:
    >>> archive_kind("zhs.model.tar.bz2"), archive_kind("weights.hdf5")
    ('tar', None)
    """
    lowered = name.lower()
    return next((kind for suffix, kind in sorted(SUFFIXES.items(), key=lambda s: -len(s[0]))
                 if lowered.endswith(suffix)), None)


def sniff_archive_kind(path, what, name=None):
    """`"zip"` or `"tar"` from the first bytes of the file `path` (a URL that names no
    archive extension: a tfhub.dev handle, Kaggle's download URL; and every other, whose
    name could lie). `what` names the source in the line (`"the model URL ..."`), `name`
    the file name its server gave (Content-Disposition), if any.

    zip (`PK\\x03\\x04`), and a tar (`ustar` at byte 257) plain or compressed with gzip
    (`1f 8b`), bzip2 (`BZh`) or xz (`fd 37 7a 58 5a 00`): the compressed start is opened to
    see the tar inside.

    Raises:
        ArchiveRefusedError: anything else, in one line naming what it is (an HDF5 file, a
            JSON or HTML document, a compressed file that holds no tar, ...).

    Example:
    >>> sniff_archive_kind("downloads/elmo-3.part", "the URL ...")  # doctest: +SKIP
    'tar'
    """
    with open(path, "rb") as handle:
        head = handle.read(_TAR_MAGIC_AT + 8)
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "zip"
    if head[_TAR_MAGIC_AT:_TAR_MAGIC_AT + 5] == b"ustar":
        return "tar"
    compression = next((kind for magic, kind in _COMPRESSED.items() if head.startswith(magic)),
                       None)
    if compression is not None:
        opener = {"gzip": gzip.open, "bzip2": bz2.open, "xz": lzma.open}[compression]
        try:
            with opener(path, "rb") as handle:
                inner = handle.read(_TAR_MAGIC_AT + 8)
        except (OSError, EOFError, lzma.LZMAError, zlib.error):
            inner = b""
        if inner[_TAR_MAGIC_AT:_TAR_MAGIC_AT + 5] == b"ustar":
            return "tar"
        found = f"a {compression}-compressed file that holds no tar archive"
    else:
        found = _what_it_is(head)
    named = f" named {name}" if name else ""
    raise ArchiveRefusedError(
        f"{what} served {found}{named}, {os.path.getsize(path):,} bytes, not a model archive; "
        "expected a zip or a tar (plain, .gz, .bz2 or .xz) holding a model directory; "
        "nothing of it was kept.")


def _what_it_is(head):
    """What a file that is no archive looks like, from its first bytes."""
    stripped = head.lstrip()
    if head.startswith(b"\x89HDF\r\n\x1a\n"):
        return "an HDF5 file (a weights file alone?)"
    if head.startswith(b"(\xb5/\xfd"):
        return "a zstd-compressed file (not read here)"
    if stripped[:1] in (b"{", b"["):
        return "a JSON document"
    if stripped[:1] == b"<":
        return "an HTML or XML document"
    if not head:
        return "an empty file"
    return f"a file starting with bytes {head[:8].hex(' ')}"


def unpack_archive(path, destination, kind, what, name=None):
    """Unpacks the archive `path` into the existing folder `destination`.

    Args:
        path: the archive file.
        destination: the folder to unpack into (the caller's staging folder).
        kind: `"zip"` or `"tar"` (`archive_kind`).
        what: the model's name, for the error lines.
        name: the archive's own name, for the error lines (default: `path`'s).

    Returns:
        list of the files written, relative to `destination`, in archive order.

    Raises:
        ArchiveRefusedError: a member refused (module docstring); what was written before
            it stays in `destination`, which the caller removes.
        ArchiveDamagedError: the archive cannot be read to its end.
        StorageError: no room for the members (sizes a zip states), or a storage fault.
    """
    if kind not in ("zip", "tar"):
        raise ValueError(f"Expected kind 'zip' or 'tar'. Received: kind={kind!r}")
    destination = os.path.realpath(destination)
    shown = name or os.path.basename(path)
    try:
        if kind == "zip":
            return _unpack_zip(path, destination, what, shown)
        return _unpack_tar(path, destination, what, shown)
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, lzma.LZMAError, zlib.error,
            OSError) as error:
        if isinstance(error, OSError) and (error.errno is not None
                                           or isinstance(error, ArchiveDamagedError)):
            raise  # a storage fault (the caller's guard names it), not a damaged archive
        raise ArchiveDamagedError(f"the archive of {what} ({shown}) cannot be "
                                  f"read to its end ({type(error).__name__}: {error}); nothing "
                                  "of it was kept; run the same command again to download it "
                                  "afresh.") from None


def _unpack_zip(path, destination, what, shown):
    written = []
    with zipfile.ZipFile(path) as archive:
        members = archive.infolist()
        check_free_space(destination, sum(m.file_size for m in members),
                         f"the unpacked model {what}")
        for member in members:
            mode = member.external_attr >> 16
            if stat.S_ISLNK(mode):
                _refuse(what, shown, member.filename, "is a symbolic link")
            target = _target(destination, member.filename, what, shown)
            if member.is_dir():
                if target is not None:  # None: `./`, the archive's own folder
                    os.makedirs(target, exist_ok=True)
                continue
            if target is None:
                _refuse(what, shown, member.filename, "names no file")
            with archive.open(member) as source:
                _write(source, target, member.filename, what, shown)
            written.append(os.path.relpath(target, destination))
    return written


def _unpack_tar(path, destination, what, shown):
    written = []
    with tarfile.open(path, "r:*") as archive:
        for member in archive:  # read one member at a time: never the whole listing first
            if member.isdir():
                target = _target(destination, member.name, what, shown)
                if target is not None:  # None: `./`, the archive's own folder
                    os.makedirs(target, exist_ok=True)
                continue
            if not member.isreg():
                kind = ("is a symbolic link" if member.issym() else
                        "is a hard link" if member.islnk() else
                        "is a device or FIFO, not a regular file")
                _refuse(what, shown, member.name, kind)
            target = _target(destination, member.name, what, shown)
            if target is None:
                _refuse(what, shown, member.name, "names no file")
            source = archive.extractfile(member)
            with source:
                _write(source, target, member.name, what, shown)
            written.append(os.path.relpath(target, destination))
    return written


def _target(destination, name, what, shown):
    """Where member `name` goes, or None for the archive's own folder (`.`, `./`); refused
    when absolute, with `..`, an empty or a `.` step past a leading `./`, or outside."""
    normalised = name.replace("\\", "/")
    if not normalised or normalised.startswith("/") or (len(normalised) > 1
                                                         and normalised[1] == ":"):
        _refuse(what, shown, name, "is an absolute path")
    relative = normalised[2:] if normalised.startswith("./") else normalised
    relative = relative[:-1] if relative.endswith("/") else relative
    if relative in ("", "."):
        return None  # the archive's own folder (TF Hub's and Kaggle's archives list `./`)
    parts = relative.split("/")
    if ".." in parts:
        _refuse(what, shown, name, "climbs out with '..'")
    if "" in parts or "." in parts:
        _refuse(what, shown, name, "has an empty or '.' step inside its path")
    target = os.path.join(destination, *parts)
    parent = os.path.realpath(os.path.dirname(target))
    if parent != destination and not parent.startswith(destination + os.sep):
        _refuse(what, shown, name, "would land outside the model's folder")
    return target


def _write(source, target, name, what, shown):
    os.makedirs(os.path.dirname(target), exist_ok=True)
    try:
        handle = open(target, "xb")
    except FileExistsError:
        _refuse(what, shown, name, "appears twice (it would overwrite a member)")
    with handle:
        shutil.copyfileobj(source, handle, _CHUNK)


def _refuse(what, shown, name, reason):
    raise ArchiveRefusedError(
        f"refused to unpack the archive of {what} ({shown}): member "
        f"{name!r} {reason}; a model archive holds regular files and folders inside its own "
        "folder only, so nothing of it was kept (use the model's published archive).")
