"""The model cache: one folder per model, complete or absent, and what was downloaded.

    CACHE/NAME/                        one model (a catalog name, or url-<hash> for a URL)
    CACHE/NAME/.keras-elmo-cache.json  its manifest, written last: the source (a name, or
                                       the URLs given), each download (URL, size, sha256),
                                       what the model's files state (its sizes: `facts`)
                                       and every file's size and sha256
    CACHE/NAME/[SUBDIR/]               the model directory (an archive's may be a subfolder)
    CACHE/.partial/NAME/               downloads under way or interrupted (resumed later)
    CACHE/.locks/NAME.lock             the download lock (`download_lock`)

A folder counts as cached only with its manifest, which the fetcher writes into the staging
folder after the model passed its checks, just before the folder is moved into place in one
rename (`keras_elmo.process.atomic_file.atomic_directory`). At every later use each file's
size and sha256 are checked against the manifest (`verify_cached`): a file changed or
missing since is one `CacheChangedError` line. Standard library only.

Example:
>>> folder = cached_model_dir("~/.keras/models/keras-elmo", "elmo-small")  # doctest: +SKIP
"""

import json
import os

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


def verify_cached(root, key, label=None):
    """Checks every file of a cached model against its manifest (size, then sha256).

    Raises:
        CacheChangedError: a file is missing or differs (one line: which, and what to do).
    """
    folder = os.path.join(os.path.expanduser(root), key)
    manifest = read_manifest(folder) or {"files": {}}
    for name, record in sorted(manifest["files"].items()):
        path = os.path.join(folder, name)
        problem = None
        if not os.path.isfile(path):
            problem = "is missing"
        elif os.path.getsize(path) != record.get("size"):
            problem = f"is {os.path.getsize(path)} bytes, {record.get('size')} when downloaded"
        elif file_sha256(path) != record.get("sha256"):
            problem = "has another sha256 than when downloaded"
        if problem:
            download = manifest.get("source", {}).get("download")
            how = (f"download it afresh with `keras-elmo models download {download} --force`"
                   if download else f"remove {folder} and run the same command again")
            raise CacheChangedError(f"the cached model {label or key} ({folder}) changed since "
                                    f"it was downloaded: {name} {problem}; {how}.")


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
                files[relative.replace(os.sep, "/")] = {"size": os.path.getsize(path),
                                                        "sha256": file_sha256(path)}
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
