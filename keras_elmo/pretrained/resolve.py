"""A model named wherever a model goes: a directory, a catalog name or a URL, made local.

`resolve_model(model_dir, options_file, weight_file)` returns the local paths of what the
caller was given; every loader and command calls it before reading a model:

- a path that exists (a directory or a file) is used as it is: a local directory wins over
  a catalog name of the same spelling; a local model archive (`*.tar.gz`, `*.zip`: a TF
  Hub module's download, say) is unpacked into the cache once and checked as a download;
- an http(s) URL as the model is a model archive (`*.zip`, `*.tar.*`), fetched and
  unpacked into the cache (`keras_elmo.pretrained.fetch`);
- `options_file` and `weight_file` as two http(s) URLs (AllenNLP's habit) are fetched into
  the cache as one model; a URL and a local file together are refused; with
  `KERAS_ELMO_MIRROR` set, a URL is looked for on the mirror first, then fetched as given;
- any other word without a `/` is a catalog name (`keras-elmo models` lists them): fetched
  into the cache once, checked at every later use; an unknown one is one line listing the
  nearest names;
- anything else is left as it is, for `resolve_model_files` to name what is missing.

Example:
>>> resolve_model("runs/small").model_dir  # a local directory: itself  # doctest: +SKIP
'runs/small'
>>> resolve_model("efml-zhs").model_dir  # doctest: +SKIP
'/home/me/.keras/models/keras-elmo/efml-zhs/zhs.model'
"""

import dataclasses
import os
import re

from keras_elmo.pretrained import settings
from keras_elmo.pretrained.catalog import NAME_PATTERN, load_catalog
from keras_elmo.pretrained.archives import archive_kind
from keras_elmo.pretrained.fetch import fetch
from keras_elmo.pretrained.fetch_plan import (plan_for_archive_file, plan_for_archive_url,
                                              plan_for_entry, plan_for_file_urls)

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


@dataclasses.dataclass(frozen=True)
class ResolvedModel:
    """Local paths of a model (`resolve_model`).

    Attributes:
        model_dir, options_file, weight_file: as the caller gave them, or the cache's
            paths of a name or URL (None where not given).
        given: what the caller gave for the model (a name, a URL, a path), or None.
        remote: whether it was a name or a URL (a worker elsewhere fetches it itself).
        cached: whether the paths are the download cache's (a name, a URL, a local
            archive), whose files the cache checked at this use.
    """

    model_dir: str = None
    options_file: str = None
    weight_file: str = None
    given: str = None
    remote: bool = False
    cached: bool = False


def is_url(text):
    """Whether `text` is written as a URL (`scheme://...`).

    Example:
    >>> is_url("https://example.org/144.zip"), is_url("runs/small")
    (True, False)
    """
    return isinstance(text, str) and _URL.match(text) is not None


def resolve_model(model_dir=None, options_file=None, weight_file=None, progress=True,
                  catalog=None):
    """The local `ResolvedModel` of a model given by directory, name or URL (module
    docstring).

    Args:
        model_dir: a model directory, a catalog name or the URL of a model archive.
        options_file, weight_file: instead of `model_dir`, two files or two URLs.
        progress: bool, progress lines on stderr while downloading.
        catalog: the `Catalog` to look names up in (default `load_catalog()`).

    Raises:
        UnknownModelError: a name that is no catalog name (the nearest ones listed).
        ValueError: a URL that names no archive, a URL scheme other than http(s), a URL
            and a file mixed.
        OfflineError, DownloadError, ...: see `keras_elmo.pretrained.fetch.fetch`.
    """
    if model_dir is not None and options_file is None and weight_file is None:
        text = os.fspath(model_dir)
        if os.path.isfile(text) and _is_archive_file(text):
            return ResolvedModel(model_dir=fetch(plan_for_archive_file(text), progress=progress,
                                                 offline=False), given=text, cached=True)
        if os.path.exists(text):
            return ResolvedModel(model_dir=model_dir, given=text)
        if is_url(text):
            plan = plan_for_archive_url(_http(text), settings.mirror())
            return ResolvedModel(model_dir=fetch(plan, progress=progress), given=text,
                                 remote=True, cached=True)
        if NAME_PATTERN.fullmatch(text.lower()):
            entry = (catalog or load_catalog()).get(text.lower())
            path = fetch(plan_for_entry(entry, settings.mirror()), progress=progress)
            return ResolvedModel(model_dir=path, given=text, remote=True, cached=True)
        return ResolvedModel(model_dir=model_dir, given=text)
    if model_dir is None and (is_url(options_file) or is_url(weight_file)):
        if not (is_url(options_file) and is_url(weight_file)):
            raise ValueError("options_file and weight_file (--options and --weights on the "
                             "command line) go together as two URLs or two files; received "
                             f"options_file={options_file!r:.200} and "
                             f"weight_file={weight_file!r:.200}.")
        plan = plan_for_file_urls(_http(options_file), _http(weight_file), settings.mirror())
        path = fetch(plan, progress=progress)
        from keras_elmo.formats.model_files import OPTIONS_FILE, WEIGHTS_FILE

        return ResolvedModel(options_file=os.path.join(path, OPTIONS_FILE),
                             weight_file=os.path.join(path, WEIGHTS_FILE), remote=True,
                             cached=True)
    return ResolvedModel(model_dir, options_file, weight_file,
                         given=None if model_dir is None else os.fspath(model_dir))


def resolve_files(model_dir=None, options_file=None, weight_file=None, progress=True):
    """The `keras_elmo.formats.model_files.ModelFiles` of a model given by directory, name
    or URL: `resolve_model`, then `resolve_model_files`. A model from the cache is marked
    `checked` (the cache checked its files at this use), so that a reader skips its own
    checksums (a TF Hub module's CRC-32C).

    Example:
    >>> resolve_files("tfhub-elmo-3").module_dir  # doctest: +SKIP
    '/home/me/.keras/models/keras-elmo/tfhub-elmo-3'
    """
    from keras_elmo.formats.model_files import resolve_model_files

    local = resolve_model(model_dir, options_file, weight_file, progress=progress)
    files = resolve_model_files(local.model_dir, local.options_file, local.weight_file)
    return dataclasses.replace(files, checked=local.cached)


def download_model(model, force=False, progress=True):
    """Fetches a catalog model (or a model archive's URL) into the cache ahead of use.

    Args:
        model: a catalog name (`keras_elmo.pretrained_models()`, `keras-elmo models`) or
            the http(s) URL of a model archive.
        force: download afresh even when cached.
        progress: bool, progress lines on stderr.

    Returns:
        str, the model directory in the cache (give it, or the name, wherever a model goes).

    Raises:
        UnknownModelError: no such name (the nearest names listed); see `resolve_model`.

    Example:
    >>> download_model("elmo-smal")
    Traceback (most recent call last):
    ...
    keras_elmo.pretrained.catalog.UnknownModelError: unknown model 'elmo-smal': ... nearest names: elmo-small, ...
    >>> path = download_model("elmo-small")  # doctest: +SKIP
    >>> bilm = keras_elmo.load_bilm("elmo-small")  # the cached copy, checked  # doctest: +SKIP
    """
    text = os.fspath(model)
    if is_url(text):
        return fetch(plan_for_archive_url(_http(text), settings.mirror()), force=force,
                     progress=progress)
    entry = load_catalog().get(text.lower())
    return fetch(plan_for_entry(entry, settings.mirror()), force=force, progress=progress)


def pretrained_models():
    """The catalog of published models: name -> `CatalogEntry` (language, sizes, training
    data, licence, source page, files), the package's catalog.json under the user's
    (`KERAS_ELMO_CATALOG`).

    Example:
    >>> models = pretrained_models()
    >>> models["efml-zhs"].language, models["efml-zhs"].layout
    ('zh-Hans', 'archive')
    >>> models["elmo-5.5b"].output_dim
    1024
    """
    return dict(load_catalog().entries)


def _is_archive_file(path):
    """Whether a local file is a model archive by its name (`*.tar.gz`, `*.zip`, ...)."""
    return archive_kind(os.path.basename(path)) is not None


def _http(url):
    """`url` when its scheme is http or https; else one line."""
    if not url.lower().startswith(("http://", "https://")):
        raise ValueError(f"the URL {url} has the scheme {url.split(':', 1)[0]!r}; expected "
                         "http or https (copy other stores to a folder or a web server "
                         "first).")
    return url
