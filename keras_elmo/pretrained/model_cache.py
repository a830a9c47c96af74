"""The model cache: one folder per model, complete or absent, and what was downloaded.

    CACHE/NAME/                        one model (a catalog name, or url-<hash> for a URL)
    CACHE/NAME/.keras-elmo-cache.json  its manifest, written last: the source (a name, or
                                       the URLs given), each download (URL, size, sha256),
                                       what the model's files state (its sizes: `facts`)
                                       and every file's size, sha256 and stat
    CACHE/NAME/[SUBDIR/]               the model directory (an archive's may be a subfolder)
    CACHE/.partial/NAME/               downloads under way or interrupted (resumed later)
    CACHE/.locks/NAME.lock             the download lock (`download_lock`)

A folder counts as cached only with its manifest, which the fetcher writes into the staging
folder after the model passed its checks, just before the folder is moved into place in one
rename (`keras_elmo.process.atomic_file.atomic_directory`). The manifest records each file's
size and sha256, and its stat at landing (size, mtime, ctime, inode). At every later use each
file is checked against the manifest (`verify_cached`): its stat, and its sha256 only when
the stat differs (or `keras-elmo models verify NAME` asks); a file changed or missing since
is one `CacheChangedError` line. Standard library only.

Example:
>>> folder = cached_model_dir("~/.keras/models/keras-elmo", "elmo-small")  # doctest: +SKIP
"""

import contextlib
import json
import os
import stat

from keras_elmo.pretrained.http_download import file_sha256

MANIFEST_FILE = ".keras-elmo-cache.json"
#: The folder of partial downloads, inside the cache.
PARTIAL_DIR = ".partial"
_FORMAT = "keras-elmo model cache"


class CacheChangedError(OSError):
    """A cached model whose files changed since they were downloaded (exit 75 once
    downloaded afresh)."""

    exit_code = 75


def read_manifest(folder):
    """The manifest of a cached model folder, or None when it has none (not cached)."""
    try:
        with open(os.path.join(folder, MANIFEST_FILE), encoding="utf-8") as handle:
            manifest = json.load(handle)
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("format") != _FORMAT or not isinstance(
            manifest.get("files"), dict):
        return None
    return manifest


def cached_model_dir(root, key, files=None):
    """The model directory of `key` in the cache `root`, or None when it is not cached.

    Args:
        files: the catalog's `ModelFile`s of the model: one whose stated size or sha256
            differs from what was downloaded makes the cached copy stale (None: not cached).
    """
    folder = os.path.join(os.path.expanduser(root), key)
    manifest = read_manifest(folder)
    if manifest is None:
        return None
    downloads = {d.get("role"): d for d in manifest.get("downloads", [])}
    for file in files or ():
        got = downloads.get(file.role, {})
        if file.optional and got.get("absent"):
            continue  # an optional file that was missing upstream: the model is whole
        if (file.sha256 and got.get("sha256") != file.sha256) or (
                file.size and got.get("size") != file.size):
            return None
    return os.path.normpath(os.path.join(folder, manifest.get("model_dir", ".")))


def verify_cached(root, key, label=None, full=False, locked=False):
    """Checks every file of a cached model against its manifest; returns what it did.

    A file whose size, mtime, ctime and inode are those recorded at landing is taken as it
    was (no read: the check costs a `stat` a file); one whose stat differs, one without a
    stat record (a manifest of an older version), and every file when `full`, is hashed.
    A file that hashes as recorded gets its new stat recorded (a copied or touched cache is
    hashed once, not at every use); the manifest is rewritten in one rename, under the
    model's download lock when it is free (held by the caller: `locked`), and not at all
    when the cache cannot be written.

    Why all four: a write in place changes the mtime and the ctime; `os.utime` can put the
    mtime back, but it sets the ctime, which no call sets back; a file replaced by another
    (a rename onto it, a copy) has another inode.

    Args:
        root, key: the cache folder and the model's folder name.
        label: how the line names the model (default `key`).
        full: bool, hash every file (`keras-elmo models verify`).
        locked: bool, the caller holds the model's download lock.

    Returns:
        dict: `files` (count), `bytes` (their size), `hashed` (files read), `hashed_bytes`.

    Raises:
        CacheChangedError: a file is missing or differs (one line: which, what was
            expected, what to do).

    Example:
    >>> verify_cached("~/.keras/models/keras-elmo", "elmo-small")  # doctest: +SKIP
    {'files': 2, 'bytes': 374434792, 'hashed': 0, 'hashed_bytes': 0}
    """
    folder = os.path.join(os.path.expanduser(root), key)
    manifest = read_manifest(folder) or {"files": {}}
    summary = {"files": 0, "bytes": 0, "hashed": 0, "hashed_bytes": 0}
    restated = {}
    for name, record in sorted(manifest["files"].items()):
        path = os.path.join(folder, name)
        try:
            now = os.stat(path)
        except OSError:
            now = None
        summary["files"] += 1
        problem = None
        if now is None or not stat.S_ISREG(now.st_mode):
            problem = f"is missing; expected {record.get('size')} bytes as downloaded"
        elif now.st_size != record.get("size"):
            problem = (f"is {now.st_size} bytes; expected {record.get('size')} bytes as "
                       "downloaded")
        elif full or record.get("stat") != stat_record(now):
            digest = file_sha256(path)
            summary["hashed"] += 1
            summary["hashed_bytes"] += now.st_size
            if digest != record.get("sha256"):
                problem = (f"has sha256 {digest[:16]}...; expected "
                           f"{str(record.get('sha256'))[:16]}... as downloaded")
            elif record.get("stat") != stat_record(now):
                restated[name] = stat_record(now)
        summary["bytes"] += record.get("size") or 0
        if problem:
            download = manifest.get("source", {}).get("download")
            how = (f"download it afresh with `keras-elmo models download {download} --force`"
                   if download else f"remove {folder} and run the same command again")
            raise CacheChangedError(f"the cached model {label or key} ({folder}) changed since "
                                    f"it was downloaded: {name} {problem}; {how}.")
    if restated:
        _record_stats(root, key, folder, manifest, restated, locked)
    return summary


def stat_record(status):
    """What the manifest keeps of a file's `os.stat` result: size, mtime, ctime, inode.

    Example:
    >>> sorted(stat_record(os.stat("/dev/null")))
    ['ctime_ns', 'inode', 'mtime_ns', 'size']
    """
    return {"size": status.st_size, "mtime_ns": status.st_mtime_ns,
            "ctime_ns": status.st_ctime_ns, "inode": status.st_ino}


def _record_stats(root, key, folder, manifest, restated, locked):
    """Rewrites the manifest of `folder` with the new stat records `restated` (file ->
    record), when the manifest on disk is still `manifest` and the cache can be written."""
    from keras_elmo.process.atomic_file import atomic_writer
    from keras_elmo.pretrained.download_lock import download_lock

    try:
        with (contextlib.nullcontext(True) if locked else
              download_lock(os.path.expanduser(root), key, announce=False,
                            blocking=False)) as held:
            if not held or read_manifest(folder) != manifest:
                return  # another process is replacing the model, or did it already
            files = {name: ({**record, "stat": restated[name]} if name in restated else record)
                     for name, record in manifest["files"].items()}
            with atomic_writer(os.path.join(folder, MANIFEST_FILE),
                               what="the manifest of a cached model") as handle:
                json.dump({**manifest, "files": files}, handle, indent=1, ensure_ascii=False)
                handle.write("\n")
    except OSError:
        pass  # a read-only cache: hashed again at the next use, which is all it costs


def write_manifest(staging, key, source, downloads, model_dir, facts=None):
    """Writes the manifest of a complete, checked model into its staging folder.

    Args:
        staging: the folder about to become `CACHE/key`.
        source: dict, what the model was fetched for (`{"name": ...}` or `{"urls": ...}`,
            and `"download"`: the argument of `keras-elmo models download` that refetches it).
        downloads: list of dicts, one per file downloaded (role, url, size, sha256; an
            optional file missing upstream: role, `"url": None` and why, `"absent"`).
        model_dir: the model directory, relative to `staging` (`"."` or a subfolder).
        facts: dict, what the model's files state (`model_check.check_model_dir`).
    """
    files = {}
    for directory, _, names in os.walk(staging):
        for name in names:
            path = os.path.join(directory, name)
            relative = os.path.relpath(path, staging)
            if relative != MANIFEST_FILE:
                status = os.stat(path)
                files[relative.replace(os.sep, "/")] = {"size": status.st_size,
                                                        "sha256": file_sha256(path),
                                                        "stat": stat_record(status)}
    manifest = {"format": _FORMAT, "key": key, "source": source, "downloads": downloads,
                "model_dir": model_dir, "facts": facts, "files": files}
    with open(os.path.join(staging, MANIFEST_FILE), "w", encoding="utf-8") as handle:
        json.dump(manifest, handle, indent=1, ensure_ascii=False)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())


def cached_size(root, key):
    """Bytes the cached model `key` takes on disk (its manifest's files), or None."""
    manifest = read_manifest(os.path.join(os.path.expanduser(root), key))
    if manifest is None:
        return None
    return sum(record.get("size", 0) for record in manifest["files"].values())


def cached_keys(root):
    """The folder names of the models cached in `root` (those with a manifest), sorted."""
    root = os.path.expanduser(root)
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    return [name for name in names if not name.startswith(".")
            and read_manifest(os.path.join(root, name)) is not None]


def source_urls(manifest):
    """The URLs a cached model was fetched from: those given (`source["urls"]`), else (a
    manifest of an older version) those that served its files."""
    urls = manifest.get("source", {}).get("urls")
    if urls:
        return list(urls)
    return [d["url"] for d in manifest.get("downloads", []) if d.get("url")]
