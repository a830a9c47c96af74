"""What to fetch into the cache: `FetchPlan`, and the plan of each way a model is named.

A plan names the model's cache folder (`key`), its layout and its files' URLs: a catalog
entry (`plan_for_entry`: the mirror replaces its hosts), the URL of a model archive
(`plan_for_archive_url`; tfhub.dev and Kaggle handles fetched as TF Hub's resolver fetches
them), a local model archive (`plan_for_archive_file`) or the URLs of an options/weights
pair (`plan_for_file_urls`): the mirror's copy first, then the URL as given. The cache
folder of a URL depends on the URL only, not on the mirror. `keras_elmo.pretrained.fetch`
carries a plan out.

Example:
>>> plan_for_archive_url("https://tfhub.dev/google/elmo/3").files[0].urls
('https://tfhub.dev/google/elmo/3?tf-hub-format=compressed',)
"""

import dataclasses
import hashlib
import os
import urllib.parse

from keras_elmo.pretrained.archives import archive_kind, sniff_archive_kind
from keras_elmo.pretrained.catalog import CatalogEntry, ModelFile, mirrored_url
from keras_elmo.pretrained.model_check import STATED_FACTS


@dataclasses.dataclass(frozen=True)
class FetchPlan:
    """What `fetch` fetches.

    Attributes:
        key: the model's folder in the cache (a catalog name, or `url-<hash>`).
        label: how the lines name it.
        layout: `"options+weights"` or `"archive"`.
        files: tuple of `ModelFile` (URLs as they will be tried).
        download: the argument of `keras-elmo models download` that refetches it (None for
            an options/weights pair of URLs: the command that named them fetches them).
        user_given: the URLs are the user's own (a 404 or an HTML answer is their mistake).
        stated: dict, what the catalog entry states of the model (`STATED_FACTS` -> value),
            which its files must state too; empty for URLs.
        source_urls: tuple, the URLs as the user gave them (the manifest keeps them).
    """

    key: str
    label: str
    layout: str
    files: tuple
    download: str
    user_given: bool = False
    stated: dict = dataclasses.field(default_factory=dict, compare=False)
    source_urls: tuple = ()


def plan_for_entry(entry, mirror=None):
    """The plan of a catalog entry, its URLs through `mirror` (a base URL) if given.

    Example:
    >>> from keras_elmo.pretrained.catalog import load_catalog
    >>> plan = plan_for_entry(load_catalog().get("efml-en"), "http://mirror.local")
    >>> plan.key, plan.files[0].urls
    ('efml-en', ('http://mirror.local/repository/11/144.zip',))
    """
    if not isinstance(entry, CatalogEntry):
        raise ValueError(f"Expected a CatalogEntry. Received: {type(entry).__name__}")
    entry = entry.with_mirror(mirror)
    stated = {key: getattr(entry, key) for key in STATED_FACTS
              if getattr(entry, key) is not None}
    return FetchPlan(entry.name, entry.name, entry.layout, entry.files, entry.name,
                     stated=stated)


def plan_for_archive_url(url, mirror=None):
    """The plan of a model archive given by its URL, tried through `mirror` first when one is
    given (`_through_mirror`).

    The URL names an archive (`*.zip`, `*.tar`, `*.tar.gz`, `*.tgz`, `*.tar.bz2`, `*.tar.xz`)
    or no file extension at all: a tfhub.dev or Kaggle Models handle (fetched, as TF Hub's
    own resolver does, with `?tf-hub-format=compressed` added to its query) or Kaggle's
    download URL (`.../api/v1/models/OWNER/MODEL/FRAMEWORK/VARIATION/VERSION/download`).
    What arrives is told by its first bytes (`archives.sniff_archive_kind`).

    Raises:
        ValueError: the URL names a file that is no archive (`weights.hdf5`).

    Example:
    >>> plan_for_archive_url("https://tfhub.dev/google/elmo/3").files[0].urls
    ('https://tfhub.dev/google/elmo/3?tf-hub-format=compressed',)
    """
    parts = urllib.parse.urlsplit(url)
    last = parts.path.rstrip("/").rsplit("/", 1)[-1]
    if archive_kind(parts.path) is None and "." in last:
        raise ValueError(f"the model URL {url} names no archive; expected a *.zip, *.tar, "
                         "*.tar.gz, *.tgz, *.tar.bz2 or *.tar.xz holding a model directory, or "
                         "a URL with no file extension (a tfhub.dev handle, Kaggle's download "
                         "URL); for the two published files give both URLs: options_file=URL, "
                         "weight_file=URL in Python (load_bilm, BiLM.from_weights), --options "
                         "URL --weights URL on the command line.")
    name = last if archive_kind(parts.path) else f"{parts.netloc}{parts.path}"
    return FetchPlan(_url_key(url), name, "archive",
                     (ModelFile("archive", _through_mirror(_compressed_handle(url), mirror)),),
                     url, user_given=True, source_urls=(url,))


def plan_for_archive_file(path):
    """The plan of a local model archive (`elmo_3.tar.gz`, a TF Hub module's download):
    unpacked into the cache once, under a key of its path, size and modification time
    (a changed archive is unpacked afresh), and checked as a download is.

    Raises:
        ValueError: the file is no archive by its first bytes (one line).

    Example:
    >>> plan_for_archive_file("3.tar.gz").layout  # doctest: +SKIP
    'archive'
    """
    path = os.path.abspath(os.fspath(path))
    sniff_archive_kind(path, f"the model file {path}", os.path.basename(path))
    stat = os.stat(path)
    key = "file-" + hashlib.sha256(
        f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}".encode()).hexdigest()[:16]
    return FetchPlan(key, os.path.basename(path), "archive",
                     (ModelFile("archive", (FILE_SCHEME + path,)),), path, user_given=True,
                     source_urls=(path,))


#: The scheme of a local file among a plan's URLs (`plan_for_archive_file`).
FILE_SCHEME = "file://"


#: Hosts whose model handles serve the model's archive with `?tf-hub-format=compressed`
#: (TF Hub's `HttpCompressedFileResolver`), and the path each handle starts with.
_HANDLE_HOSTS = {"tfhub.dev": "/", "www.tfhub.dev": "/", "www.kaggle.com": "/models/",
                 "kaggle.com": "/models/"}


def _compressed_handle(url):
    """`url` with `tf-hub-format=compressed` added to its query when it is a tfhub.dev or
    Kaggle Models handle (any other query kept); other URLs as they are.

    Example:
    >>> _compressed_handle("https://tfhub.dev/google/elmo/3?a=1")
    'https://tfhub.dev/google/elmo/3?a=1&tf-hub-format=compressed'
    """
    parts = urllib.parse.urlsplit(url)
    start = _HANDLE_HOSTS.get(parts.netloc.lower())
    if start is None or not parts.path.startswith(start) or "tf-hub-format=" in parts.query:
        return url
    query = "&".join(q for q in (parts.query, "tf-hub-format=compressed") if q)
    return urllib.parse.urlunsplit(parts._replace(query=query))


def cache_key(model, root):
    """The folder of the cache `root` that holds `model`: a catalog name, the URL of a model
    archive, or a folder's own name as `keras-elmo models` lists it (`url-<hash>`).

    Raises:
        UnknownModelError: no such name (the nearest names listed).

    Example:
    >>> cache_key("https://tfhub.dev/google/elmo/3", "/tmp/cache")
    'url-2254369506f2d795'
    """
    from keras_elmo.pretrained.catalog import load_catalog

    text = os.fspath(model)
    if text.startswith(("http://", "https://")):
        return plan_for_archive_url(text).key
    if text.startswith("url-") and os.path.isdir(os.path.join(os.path.expanduser(root), text)):
        return text
    return load_catalog().get(text.lower()).name


def plan_for_file_urls(options_url, weights_url, mirror=None):
    """The plan of a published pair given by their URLs (AllenNLP's `options_file` and
    `weight_file`), tried through `mirror` first when one is given."""
    files = (ModelFile("options", _through_mirror(options_url, mirror)),
             ModelFile("weights", _through_mirror(weights_url, mirror)))
    name = os.path.basename(urllib.parse.urlsplit(weights_url).path) or "weights"
    return FetchPlan(_url_key(options_url, weights_url), name, "options+weights", files,
                     None, user_given=True, source_urls=(options_url, weights_url))


def _through_mirror(url, mirror):
    """`(the mirror's copy, url)`: a URL the user gave is looked for on the mirror (which
    keeps its path) first, then fetched as given; `(url,)` without a mirror."""
    if not mirror:
        return (url,)
    return tuple(dict.fromkeys((mirrored_url(url, mirror), url)))


def _url_key(*urls):
    """`url-` and 16 hex digits of the URLs' sha256: their cache folder."""
    return "url-" + hashlib.sha256("\n".join(urls).encode("utf-8")).hexdigest()[:16]
