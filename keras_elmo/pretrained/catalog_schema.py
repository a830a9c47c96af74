"""catalog.json's schema: one model entry (and one catalog file) read and checked.

An entry takes the fields of its `family` (the catalog's `families`) overlaid with its own,
then every field is checked; a wrong one is one `CatalogError` line naming the file, the
entry, the field, what was received and what was expected (docs/pretrained.md lists the
fields).

Example:
>>> entry = parse_entry("my-elmo", {"language": "en", "layout": "archive",
...     "files": [{"role": "archive", "urls": ["https://example.org/my.tar.xz"]}]})
>>> entry.layout, entry.files[0].file_name
('archive', 'my.tar.xz')
>>> parse_entry("my-elmo", {"language": "en", "layout": "zip", "files": []})
Traceback (most recent call last):
...
keras_elmo.pretrained.catalog_schema.CatalogError: ...layout is 'zip'; expected one of ['options+weights', 'archive'].
>>> archive_url_kind("https://tfhub.dev/google/elmo/3", "tfhub-module")
'tar'
"""

import json
import re
import urllib.parse

from keras_elmo.pretrained.archives import archive_kind
from keras_elmo.pretrained.catalog_entry import CatalogEntry, ModelFile

SCHEMA_VERSION = 1
#: A model name: what a cache folder may be called, and never a path.
NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
LAYOUTS = ("options+weights", "archive")
#: What the files hold: bilm-tf's published pair (options JSON + HDF5 weights, or a folder of
#: them in an archive), an ELMoForManyLangs model directory, or a TF1 Hub module (a tar.gz of
#: `tfhub_module.pb`, `saved_model.pb` and `variables/`).
FORMATS = ("bilm-tf", "elmoformanylangs", "tfhub-module")
#: Hosts that serve a TF1 Hub module as a tar.gz at a URL with no archive name: TF Hub's
#: handles (`?tf-hub-format=compressed` appended by the downloader) and Kaggle Models'
#: download URLs (`/api/v1/models/OWNER/MODEL/FRAMEWORK/VARIATION/VERSION/download`).
HUB_HOSTS = ("tfhub.dev", "www.kaggle.com", "kaggle.com")
#: The roles of a layout's files, in the order they are fetched.
ROLES = {"options+weights": ("options", "weights"), "archive": ("archive",)}
#: Files an entry may list after its layout's, each once, landing in the model directory
#: (`"vocabulary"`: vocab.txt, the token cache of `embed` and the words of `--init-from`).
EXTRA_ROLES = ("vocabulary",)
_SHA256 = re.compile(r"[0-9a-f]{64}")
_INT_FIELDS = ("lstm_dim", "projection_dim", "output_dim", "highway_layers")
_TEXT_FIELDS = ("title", "format", "language_name", "training_data", "licence",
                "source_page", "note", "archive_contents")
_ENTRY_FIELDS = {"family", "language", "layout", "main", "parameters_millions", "files",
                 "sources", *_INT_FIELDS, *_TEXT_FIELDS}
_FILE_FIELDS = {"role", "urls", "size", "sha256", "optional", "sources"}
#: The facts of a file that its `sources` may cite.
_FILE_FACTS = ("size", "sha256")


class CatalogError(ValueError):
    """A catalog file that does not follow the schema (one line: file, entry, field)."""


def read_catalog_file(path, where):
    """The JSON object of a catalog file, its top level checked (`"models"`,
    `"references"`, `"families"`, `"schema_version"`)."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CatalogError(f"{where}: not a JSON file ({error}); expected a catalog "
                           "object with \"models\".") from None
    if not isinstance(data, dict) or not isinstance(data.get("models"), dict):
        raise CatalogError(f"{where}: has no \"models\" object; expected "
                           "{\"models\": {NAME: {...}}, ...}.")
    version = data.get("schema_version", SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        raise CatalogError(f"{where}: schema_version is {version!r}; expected "
                           f"{SCHEMA_VERSION}.")
    for key in ("references", "families"):
        value = data.get(key, {})
        if not isinstance(value, dict) or (key == "families" and not all(
                isinstance(v, dict) for v in value.values())):
            raise CatalogError(f"{where}: {key!r} must be an object of "
                               f"{'strings' if key == 'references' else 'objects'}; received "
                               f"{value!r:.80}.")
    return data


def parse_entries(data, where, families):
    """`{name: CatalogEntry}` of a read catalog file's `models`."""
    entries = {}
    for name, fields in data["models"].items():
        entries[name] = parse_entry(name, fields, families, where)
    return entries


def parse_entry(name, fields, families=None, where="the catalog"):
    """A checked `CatalogEntry` of one catalog object (its family's fields under its own).

    Raises:
        CatalogError: one line naming `where`, the entry and the field.
    """
    at = f"{where}: models[{name!r}]"
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise CatalogError(f"{where}: model name {name!r} is not allowed; expected lowercase "
                           "letters, digits, '.', '_' or '-' (at most 64, no '/').")
    if not isinstance(fields, dict):
        raise CatalogError(f"{at} must be an object; received {fields!r:.80}.")
    merged = {}
    family = fields.get("family")
    if family is not None:
        if family not in (families or {}):
            raise CatalogError(f"{at}.family is {family!r}; expected one of "
                               f"{sorted(families or {})}.")
        merged.update(families[family])
    sources = {**merged.get("sources", {}), **fields.get("sources", {})}
    merged.update(fields)
    merged["sources"] = sources
    unknown = sorted(set(merged) - _ENTRY_FIELDS)
    if unknown:
        raise CatalogError(f"{at} has unknown field(s) {unknown}; expected some of "
                           f"{sorted(_ENTRY_FIELDS)}.")
    layout = merged.get("layout")
    if layout not in LAYOUTS:
        raise CatalogError(f"{at}.layout is {layout!r}; expected one of {list(LAYOUTS)}.")
    if not isinstance(merged.get("language"), str) or not merged["language"]:
        raise CatalogError(f"{at}.language is {merged.get('language')!r}; expected a language "
                           "code such as 'en' or 'zh-Hans'.")
    for key in _INT_FIELDS:
        value = merged.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < 0):
            raise CatalogError(f"{at}.{key} is {value!r}; expected an int >= 0 or null.")
    millions = merged.get("parameters_millions")
    if millions is not None and (isinstance(millions, bool) or not isinstance(
            millions, (int, float)) or millions <= 0):
        raise CatalogError(f"{at}.parameters_millions is {millions!r}; expected a number > 0 "
                           "or null.")
    for key in _TEXT_FIELDS:
        if merged.get(key) is not None and not isinstance(merged[key], str):
            raise CatalogError(f"{at}.{key} is {merged[key]!r:.60}; expected a string or null.")
    fmt = merged.get("format")
    if fmt is not None and fmt not in FORMATS:
        raise CatalogError(f"{at}.format is {fmt!r}; expected one of {list(FORMATS)} or null.")
    if fmt == "tfhub-module" and layout != "archive":
        raise CatalogError(f"{at}.layout is {layout!r}; expected 'archive' for format "
                           "'tfhub-module' (a TF1 Hub module comes as one tar.gz).")
    if not isinstance(merged.get("main", False), bool):
        raise CatalogError(f"{at}.main is {merged['main']!r}; expected true or false.")
    if not all(isinstance(k, str) and isinstance(v, list) and all(isinstance(s, str) for s in v)
               for k, v in sources.items()):
        raise CatalogError(f"{at}.sources is {sources!r:.80}; expected an object of lists of "
                           "reference keys.")
    files = _files(merged.get("files"), layout, at, fmt)
    values = {key: merged.get(key) for key in _INT_FIELDS + _TEXT_FIELDS}
    return CatalogEntry(name=name, language=merged["language"], layout=layout, files=files,
                        main=merged.get("main", False),
                        parameters_millions=millions, family=family, sources=sources,
                        **values)


def _files(files, layout, at, fmt=None):
    roles = ROLES[layout]
    received = [f.get("role") if isinstance(f, dict) else f for f in files] \
        if isinstance(files, list) else files
    extras = received[len(roles):] if isinstance(files, list) else []
    if not isinstance(files, list) or not all(isinstance(f, dict) for f in files) or (
            received[:len(roles)] != list(roles)) or not set(extras) <= set(EXTRA_ROLES) or (
            len(set(extras)) != len(extras)):
        raise CatalogError(f"{at}.files must list the roles {list(roles)} in that order for "
                           f"layout {layout!r}, then each of {list(EXTRA_ROLES)} at most once; "
                           f"received {received!r:.80}.")
    parsed = []
    for index, file in enumerate(files):
        where = f"{at}.files[{index}]"
        unknown = sorted(set(file) - _FILE_FIELDS)
        if unknown:
            raise CatalogError(f"{where} has unknown field(s) {unknown}; expected "
                               f"{sorted(_FILE_FIELDS)}.")
        urls = file.get("urls")
        if not isinstance(urls, list) or not urls or not all(_is_http_url(u) for u in urls):
            raise CatalogError(f"{where}.urls is {urls!r:.100}; expected a non-empty list of "
                               "http(s) URLs, the primary first.")
        if file["role"] == "archive":
            for url in urls:
                if archive_url_kind(url, fmt) is None:
                    hub = (" or, for format 'tfhub-module', a tfhub.dev handle or a Kaggle "
                           "Models download URL") if fmt == "tfhub-module" else ""
                    raise CatalogError(f"{where}.urls has {url!r}; expected an archive named "
                                       "*.zip, *.tar, *.tar.gz, *.tgz, *.tar.bz2 or *.tar.xz"
                                       f"{hub}.")
        size, sha256 = file.get("size"), file.get("sha256")
        if size is not None and (isinstance(size, bool) or not isinstance(size, int)
                                 or size < 1):
            raise CatalogError(f"{where}.size is {size!r}; expected bytes (an int >= 1) or "
                               "null.")
        if sha256 is not None and not (isinstance(sha256, str)
                                       and _SHA256.fullmatch(sha256.lower())):
            raise CatalogError(f"{where}.sha256 is {sha256!r:.80}; expected 64 hex digits or "
                               "null.")
        optional = file.get("optional", False)
        if not isinstance(optional, bool) or (optional and file["role"] in roles):
            raise CatalogError(f"{where}.optional is {optional!r}; expected true or false, and "
                               f"false for the {layout!r} layout's own files.")
        sources = file.get("sources", {})
        if not isinstance(sources, dict) or not all(
                key in _FILE_FACTS and isinstance(keys, list)
                and all(isinstance(k, str) for k in keys) for key, keys in sources.items()):
            raise CatalogError(f"{where}.sources is {sources!r:.80}; expected an object of "
                               f"lists of reference keys under {list(_FILE_FACTS)}.")
        parsed.append(ModelFile(file["role"], tuple(urls), size,
                                sha256.lower() if sha256 else None, optional, dict(sources)))
    return tuple(parsed)


def archive_url_kind(url, fmt=None):
    """`"zip"` or `"tar"`: how the archive at `url` is read, else None.

    The URL's path names the archive (`144.zip`, `zhs.model.tar.bz2`); or, for
    `fmt="tfhub-module"`, the URL is a TF Hub handle or a Kaggle Models download URL
    (`HUB_HOSTS`), which serve a TF1 Hub module as a tar.gz under no archive name.
    """
    parts = urllib.parse.urlsplit(url)
    kind = archive_kind(parts.path)
    if kind is None and fmt == "tfhub-module" and parts.hostname in HUB_HOSTS and (
            parts.hostname == "tfhub.dev" or (parts.path.startswith("/api/v1/models/")
                                              and parts.path.endswith("/download"))):
        return "tar"
    return kind


def _is_http_url(url):
    if not isinstance(url, str):
        return False
    parts = urllib.parse.urlsplit(url)
    return parts.scheme in ("http", "https") and bool(parts.netloc)
