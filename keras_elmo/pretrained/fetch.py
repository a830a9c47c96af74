"""Fetching a model into the cache, once: `fetch(plan)` carries out a
`keras_elmo.pretrained.fetch_plan.FetchPlan` (what to fetch: a catalog entry, a URL, a local
archive) and returns the local model directory:

1. cached (its manifest there): every file checked against the manifest (its stat; its
   sha256 only when the stat changed: `model_cache.verify_cached`), and what the model's
   files state (sizes, parameters) against what the catalog entry states, no network; a
   cached copy of another model is removed, in one line;
2. offline (`KERAS_ELMO_OFFLINE=1`): one line saying what is missing;
3. else, under the model's download lock (a second process waits, then finds it cached):
   each file downloaded (`http_download.download`: resumed, retried, next mirror, size and
   sha256 checked where stated) into this process's own `.part` file in
   `CACHE/.partial/KEY/` (`_own_part`: two writers whose lock failed never splice one file;
   an ended writer's is taken over and resumed), moved (options.json,
   weights.hdf5) or unpacked (`archives.unpack_archive`, its kind told by its first bytes)
   into a staging folder; the model
   found in it and checked as loading will read it, and against the sizes its catalog entry
   states (`model_check`); the entry's extra files (vocab.txt) moved beside it, an optional
   one skipped when missing upstream; the manifest written;
   the staging folder renamed into place (`atomic_directory`). Any failure removes the
   staging folder, so the cache holds the model complete or not at all; only an
   interrupted download's `.part` file stays, to be resumed.

Example:
>>> plan = fetch_plan.plan_for_entry(load_catalog().get("elmo-small"))  # doctest: +SKIP
>>> fetch(plan)  # doctest: +SKIP
'/home/me/.keras/models/keras-elmo/elmo-small'
"""

import contextlib
import hashlib
import os
import re
import urllib.parse

from keras_elmo.formats.model_files import OPTIONS_FILE, VOCAB_FILE, WEIGHTS_FILE
from keras_elmo.process.atomic_file import atomic_directory, remove_quietly
from keras_elmo.process.file_lock import holder_gone, host_name
from keras_elmo.process.storage_errors import storage_guard
from keras_elmo.pretrained import settings
from keras_elmo.pretrained.archives import sniff_archive_kind, unpack_archive
from keras_elmo.pretrained.catalog_schema import EXTRA_ROLES
from keras_elmo.pretrained.download_lock import download_lock
from keras_elmo.pretrained.fetch_plan import FILE_SCHEME
from keras_elmo.pretrained.http_download import download
from keras_elmo.pretrained.model_cache import (PARTIAL_DIR, cached_model_dir, read_manifest,
                                               verify_cached, write_manifest)
from keras_elmo.pretrained.model_check import (ModelMismatchError, check_model_dir,
                                               check_stated_facts, find_model_dir)

#: Where each file of an options/weights pair, and each extra file, goes in the model
#: directory.
_FILE_NAMES = {"options": OPTIONS_FILE, "weights": WEIGHTS_FILE, "vocabulary": VOCAB_FILE}


class OfflineError(ValueError):
    """Downloads are off and the model is not in the cache."""


def fetch(plan, root=None, force=False, progress=True, offline=None, timeout=None):
    """The local model directory of `plan`, downloaded into the cache unless there.

    Args:
        plan: `FetchPlan`.
        root: the cache folder (default `settings.cache_root()`).
        force: download afresh even when cached (the cached copy is replaced when the new
            one is complete).
        progress: bool, progress lines on stderr while downloading.
        offline: bool, the cache only (default `settings.is_offline()`).
        timeout: seconds a server may stay silent (default `settings.timeout_seconds()`).

    Returns:
        str, the model directory (options.json + weights.hdf5, or ELMoForManyLangs').

    Raises:
        OfflineError: offline and not cached.
        CacheChangedError: the cached copy changed since it was downloaded.
        DownloadError / BadURLError / ArchiveRefusedError / ArchiveDamagedError /
        ModelCheckError / StorageError: one line each; nothing of the model is kept.
    """
    root = os.path.expanduser(root or settings.cache_root())
    offline = settings.is_offline() if offline is None else offline
    timeout = settings.timeout_seconds() if timeout is None else timeout
    if not force:
        cached = _cached(root, plan)
        if cached is not None:
            return cached
    if offline:
        variable = settings.offline_variable()
        how = (f"with `keras-elmo models download {plan.download}`" if plan.download
               else "(the same command fetches it)")
        raise OfflineError(
            f"{variable}={os.environ.get(variable)} (the cache only) and {plan.label} is not "
            f"in the cache ({os.path.join(root, plan.key)}); download it where there is a "
            f"network {how} into the same cache ({settings.CACHE_VARIABLE}), or unset "
            f"{variable}.")
    with download_lock(root, plan.key, announce=progress):
        if not force:  # another process may have fetched it while this one waited
            cached = _cached(root, plan, locked=True)
            if cached is not None:
                return cached
        return _download(plan, root, progress, timeout)


def _cached(root, plan, locked=False):
    """The model directory of `plan` in the cache, its files checked against the manifest
    and what they state against the catalog entry; None when it is not cached.

    Raises:
        CacheChangedError: a file changed since it was downloaded.
        ModelMismatchError: another model than the entry states; the cached copy is removed
            first (under the model's download lock, taken unless `locked`).
    """
    cached = cached_model_dir(root, plan.key, plan.files)
    if cached is None:
        return None
    verify_cached(root, plan.key, plan.label, locked=locked)
    if plan.stated:
        facts = (read_manifest(os.path.join(root, plan.key)).get("facts")
                 or check_model_dir(cached, plan.label))  # a manifest of an older version
        try:
            check_stated_facts(facts, plan.stated, f"the cached model {plan.label} ({cached})",
                               "it was removed from the cache; run the same command again "
                               "to download the catalog's model")
        except ModelMismatchError:
            with (contextlib.nullcontext() if locked else
                  download_lock(root, plan.key, announce=False)):
                _remove_folder(os.path.join(root, plan.key))
            raise
    return cached


def _remove_folder(folder):
    """Removes a cached model's folder: first out of its name in one rename, then its files."""
    with storage_guard(folder, "the model cache", then=settings.CACHE_THEN):
        if not os.path.isdir(folder):
            return
        retired = os.path.join(os.path.dirname(folder),
                               f".{os.path.basename(folder)}.{os.getpid()}.removed")
        os.replace(folder, retired)
    remove_quietly(retired)


def _download(plan, root, progress, timeout):
    """Downloads, unpacks, checks and moves the model into `root/plan.key` (held lock)."""
    folder = os.path.join(root, plan.key)
    partial = os.path.join(root, PARTIAL_DIR, plan.key)
    with storage_guard(root, "the model cache", then=settings.CACHE_THEN):
        os.makedirs(partial, exist_ok=True)
        try:
            model_dir = _download_into(plan, folder, partial, progress, timeout)
        except BaseException:
            with contextlib.suppress(OSError):
                os.rmdir(partial)  # only when empty: an interrupted .part file stays
            raise
    with contextlib.suppress(OSError):
        os.rmdir(partial)  # only when empty: another writer's .part file stays
    return os.path.normpath(os.path.join(folder, model_dir))


def _download_into(plan, folder, partial, progress, timeout):
    """The downloads of `_download` into a staging folder renamed to `folder`; returns
    the model directory relative to it."""
    downloads = []
    with atomic_directory(folder, replace=os.path.exists(folder),
                          what=f"the model {plan.label}") as staging:
        for file in plan.files:
            if file.role in EXTRA_ROLES:
                continue  # beside the model, once it is found and checked
            part = _fetch_file(plan, file, partial, progress, timeout, downloads)
            if file.role == "archive":
                try:
                    served = downloads[-1]
                    name = (served.get("filename")
                            or os.path.basename(urllib.parse.urlsplit(served["url"]).path))
                    kind = sniff_archive_kind(part, f"the model URL {served['url']}",
                                              served.get("filename"))
                    unpack_archive(part, staging, kind, plan.label, name=name)
                finally:
                    remove_quietly(part)  # the unpacked files are what is kept
            else:
                os.replace(part, os.path.join(staging, _FILE_NAMES[file.role]))
        model_dir = find_model_dir(staging, plan.label)
        facts = check_model_dir(os.path.join(staging, model_dir), plan.label)
        check_stated_facts(
            facts, plan.stated, f"{plan.label} as served by {downloads[-1]['url']}",
            "nothing of it was kept; check what that URL serves (a mirror, "
            f"{settings.MIRROR_VARIABLE}, must hold the catalog's files at their paths) or "
            f"the entry ({settings.CATALOG_VARIABLE})")
        for file in plan.files:
            if file.role in EXTRA_ROLES:
                part = _fetch_file(plan, file, partial, progress, timeout, downloads)
                if part is not None:
                    os.replace(part, os.path.join(staging, model_dir, _FILE_NAMES[file.role]))
        source = ({"urls": list(plan.source_urls)} if plan.source_urls
                  else {"name": plan.key})
        write_manifest(staging, plan.key, {**source, "download": plan.download}, downloads,
                       model_dir, facts)
    return model_dir


def _fetch_file(plan, file, partial, progress, timeout, downloads):
    """Downloads `file` into `partial`, recording it in `downloads`; returns its `.part`
    path, or None for an optional file missing upstream (recorded as absent)."""
    part = _own_part(partial, file.role)
    if file.urls[0].startswith(FILE_SCHEME):  # a local archive: copied, hashed on the way
        source = file.urls[0][len(FILE_SCHEME):]
        digest = hashlib.sha256()
        with open(source, "rb") as reader, open(part, "wb") as writer:
            for block in iter(lambda: reader.read(1 << 20), b""):
                digest.update(block)
                writer.write(block)
        downloads.append({"role": file.role, "url": source, "size": os.path.getsize(part),
                          "sha256": digest.hexdigest(),
                          "filename": os.path.basename(source)})
        return part
    what = file.file_name if plan.user_given else f"{plan.label} {file.file_name}"
    result = download(file.urls, part, what, size=file.size, sha256=file.sha256,
                      timeout=timeout, progress=progress, user_given=plan.user_given,
                      optional=file.optional)
    if result.absent is not None:
        downloads.append({"role": file.role, "url": None, "absent": result.absent})
        return None
    downloads.append({"role": file.role, "url": result.url, "size": result.size,
                      "sha256": result.sha256,
                      **({"filename": result.filename} if result.filename else {})})
    return part


def _own_part(partial, role):
    """This process's `.part` file of `role` in `partial`: `ROLE.<pid>@<host>.part`, one a
    writer, so that two writers whose lock failed (a network filesystem) never write into one
    file. A `.part` file of a writer that has ended (`file_lock.holder_gone`; the older
    naming `ROLE.part` too) is taken over by one rename, its record with it, and resumes; a
    live writer's is left alone."""
    own = os.path.join(partial, f"{role}.{os.getpid()}@{host_name()}.part")
    if os.path.exists(own):
        return own
    pattern = re.compile(re.escape(role) + r"(?:\.(?P<pid>\d+)@(?P<host>[^@/]+))?\.part")
    try:
        names = sorted(os.listdir(partial))
    except OSError:
        return own
    for name in names:
        found = pattern.fullmatch(name)
        path = os.path.join(partial, name)
        if found is None or path == own:
            continue
        try:
            gone = found.group("pid") is None or holder_gone(
                int(found.group("pid")), found.group("host"), mtime=os.path.getmtime(path))
        except OSError:
            continue  # taken over by another process meanwhile
        if not gone:
            continue
        if os.path.exists(own):  # one taken over already: the others are dropped
            remove_quietly(path)
            remove_quietly(path + ".json")
            continue
        try:
            os.rename(path, own)
        except OSError:
            continue  # another process took it first
        try:
            os.rename(path + ".json", own + ".json")
        except OSError:
            remove_quietly(own + ".json")  # no record: `download` starts it afresh
    return own
