"""The catalog of published ELMo models: `catalog.json` (data, not code), read and checked.

`catalog.json` beside this module lists each model under a short stable name (`elmo-small`,
`efml-zhs`, ...) with its language, sizes, training data, licence, source page, files (each
with its URLs, primary first, and its size and sha256 where a public source gives them) and
the references every fact comes from (its `sources`). An entry takes the fields of its
`family` (`families`), overlaid with its own. `KERAS_ELMO_CATALOG=FILE` names a catalog of
the same schema whose entries add to or replace the package's, name by name.

Every field is checked where the file is read; a wrong one is one `CatalogError` line
naming the file, the entry, the field, what was received and what was expected.

Example:
>>> catalog = load_catalog()
>>> entry = catalog.get("elmo-small")
>>> entry.language, entry.lstm_dim, entry.projection_dim, [f.role for f in entry.files]
('en', 1024, 128, ['options', 'weights'])
"""

import dataclasses
import difflib
import json
import os
import re
import urllib.parse

from keras_elmo.pretrained.archives import archive_kind
from keras_elmo.pretrained.settings import CATALOG_VARIABLE

#: The package's catalog file.
CATALOG_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "catalog.json")
SCHEMA_VERSION = 1
#: A model name: what a cache folder may be called, and never a path.
NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
LAYOUTS = ("options+weights", "archive")
#: The roles of a layout's files, in the order they are fetched.
ROLES = {"options+weights": ("options", "weights"), "archive": ("archive",)}
_SHA256 = re.compile(r"[0-9a-f]{64}")
_INT_FIELDS = ("lstm_dim", "projection_dim", "output_dim", "highway_layers")
_TEXT_FIELDS = ("title", "format", "language_name", "training_data", "licence",
                "source_page", "note")
_ENTRY_FIELDS = {"family", "language", "layout", "main", "parameters_millions", "files",
                 "sources", *_INT_FIELDS, *_TEXT_FIELDS}
_FILE_FIELDS = {"role", "urls", "size", "sha256"}
#: Words of a name that say nothing about which model it is.
_COMMON_WORDS = {"model", "models", "elmo", "efml"}


class CatalogError(ValueError):
    """A catalog file that does not follow the schema (one line: file, entry, field)."""


class UnknownModelError(ValueError):
    """A name that is no model of the catalog; the line lists the nearest names."""


@dataclasses.dataclass(frozen=True)
class ModelFile:
    """One file of a catalog model.

    Attributes:
        role: `"options"`, `"weights"` (layout options+weights) or `"archive"`.
        urls: tuple of http(s) URLs of the same file, the primary first.
        size: int bytes, or None when no source gives it.
        sha256: str, 64 lowercase hex digits, or None when no source gives it.
    """

    role: str
    urls: tuple
    size: int = None
    sha256: str = None

    @property
    def file_name(self):
        """The primary URL's last path segment (`elmo_..._weights.hdf5`, `144.zip`)."""
        return os.path.basename(urllib.parse.urlsplit(self.urls[0]).path) or self.role


@dataclasses.dataclass(frozen=True)
class CatalogEntry:
    """One model of the catalog (fields as in catalog.json; None where no source gives it).

    Attributes:
        name: the short stable name (`elmo-small`).
        language: BCP 47 code (`en`, `zh-Hans`); language_name: in English.
        layout: `"options+weights"` (two files) or `"archive"` (a zip or tar holding a
            model directory: ELMoForManyLangs' files, or options.json + weights.hdf5).
        files: tuple of `ModelFile`, in the order of `ROLES[layout]`.
        lstm_dim, projection_dim, output_dim, highway_layers: ints; parameters_millions.
        title, format, language_name, training_data, licence, source_page, note: str.
        main: bool, listed in the README's short table.
        sources: dict, fact group -> reference keys (the catalog's `references`).
    """

    name: str
    language: str
    layout: str
    files: tuple
    title: str = None
    format: str = None
    language_name: str = None
    main: bool = False
    lstm_dim: int = None
    projection_dim: int = None
    output_dim: int = None
    highway_layers: int = None
    parameters_millions: float = None
    training_data: str = None
    licence: str = None
    source_page: str = None
    note: str = None
    family: str = None
    sources: dict = dataclasses.field(default_factory=dict, compare=False)

    def with_mirror(self, mirror):
        """This entry with every URL's scheme and host replaced by `mirror` (a base URL
        whose own path, if any, goes in front of theirs); duplicates dropped."""
        if not mirror:
            return self
        files = []
        for file in self.files:
            urls = tuple(dict.fromkeys(mirrored_url(url, mirror) for url in file.urls))
            files.append(dataclasses.replace(file, urls=urls))
        return dataclasses.replace(self, files=tuple(files))


def mirrored_url(url, mirror):
    """`url` with its scheme and host replaced by `mirror`'s, its path kept.

    Example:
    >>> mirrored_url("https://s3-us-west-2.amazonaws.com/allennlp/x.json", "http://m:8080/elmo")
    'http://m:8080/elmo/allennlp/x.json'
    """
    parts = urllib.parse.urlsplit(url)
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    return mirror.rstrip("/") + "/" + path.lstrip("/")


class Catalog:
    """The models by name (`entries`), with `get(name)` naming the nearest names of a
    missing one.

    Args:
        entries: dict name -> `CatalogEntry`.
        references: dict key -> the public source it stands for.
        files: the catalog files read, in order (the package's, then the user's).
    """

    def __init__(self, entries, references, files):
        self.entries = dict(entries)
        self.references = dict(references)
        self.files = tuple(files)

    def __contains__(self, name):
        return name in self.entries

    def __iter__(self):
        return iter(self.entries.values())

    def __len__(self):
        return len(self.entries)

    def get(self, name):
        """The entry called `name`.

        Raises:
            UnknownModelError: no such name; the line lists the nearest names.
        """
        if name in self.entries:
            return self.entries[name]
        raise UnknownModelError(f"unknown model {name!r}: it is neither a directory nor a "
                                f"name of the catalog; {self.nearest_text(name)}")

    def nearest(self, name, count=5):
        """The names most like `name`: those sharing a word with it or with their
        language (`zhs.model` -> `efml-zhs`, `german` -> `efml-de`), then the closest
        spellings."""
        lowered = name.lower()
        words = {w for w in re.split(r"[^a-z0-9]+", lowered) if len(w) > 1} - _COMMON_WORDS
        sharing = [n for n, e in self.entries.items()
                   if words & set(re.split(r"[^a-z0-9]+", " ".join(
                       (n, e.language.lower(), (e.language_name or "").lower()))))]
        close = difflib.get_close_matches(lowered, list(self.entries), n=count, cutoff=0.5)
        return list(dict.fromkeys(close[:1] + sharing + close))[:count]

    def nearest_text(self, name):
        """`"nearest names: a, b; ..."`, the advice of an unknown name."""
        near = self.nearest(name)
        listed = f"nearest names: {', '.join(near)}" if near else "no name is close"
        return (f"{listed}; `keras-elmo models` lists all {len(self.entries)} (a model "
                "directory that exists is read as a directory).")


def load_catalog(user_file=None):
    """The package's catalog with the user's (`user_file`, else `$KERAS_ELMO_CATALOG`) over it.

    Raises:
        CatalogError: a catalog file that does not follow the schema (one line).
        FileNotFoundError: the user's catalog file does not exist.
    """
    files = [CATALOG_FILE]
    user_file = user_file if user_file is not None else os.environ.get(CATALOG_VARIABLE)
    data = _read(CATALOG_FILE, "the package's catalog")
    references, families = dict(data.get("references", {})), dict(data.get("families", {}))
    entries = _entries(data, CATALOG_FILE, families)
    if user_file:
        where = f"{CATALOG_VARIABLE} {user_file}"
        if not os.path.isfile(user_file):
            raise FileNotFoundError(f"{where}: no such file; expected a JSON catalog of the "
                                    "schema of keras_elmo/pretrained/catalog.json (or unset "
                                    f"{CATALOG_VARIABLE}).")
        user = _read(user_file, where)
        references.update(user.get("references", {}))
        families.update(user.get("families", {}))
        entries.update(_entries(user, where, families))
        files.append(user_file)
    return Catalog(entries, references, files)


def _read(path, where):
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


def _entries(data, where, families):
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
    if not isinstance(merged.get("main", False), bool):
        raise CatalogError(f"{at}.main is {merged['main']!r}; expected true or false.")
    if not all(isinstance(k, str) and isinstance(v, list) and all(isinstance(s, str) for s in v)
               for k, v in sources.items()):
        raise CatalogError(f"{at}.sources is {sources!r:.80}; expected an object of lists of "
                           "reference keys.")
    files = _files(merged.get("files"), layout, at)
    values = {key: merged.get(key) for key in _INT_FIELDS + _TEXT_FIELDS}
    return CatalogEntry(name=name, language=merged["language"], layout=layout, files=files,
                        main=merged.get("main", False),
                        parameters_millions=millions, family=family, sources=sources,
                        **values)


def _files(files, layout, at):
    roles = ROLES[layout]
    if not isinstance(files, list) or [f.get("role") if isinstance(f, dict) else f
                                       for f in files] != list(roles):
        received = [f.get("role") if isinstance(f, dict) else f for f in files] \
            if isinstance(files, list) else files
        raise CatalogError(f"{at}.files must list the roles {list(roles)} in that order for "
                           f"layout {layout!r}; received {received!r:.80}.")
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
        if layout == "archive":
            for url in urls:
                if archive_kind(urllib.parse.urlsplit(url).path) is None:
                    raise CatalogError(f"{where}.urls has {url!r}; expected an archive named "
                                       "*.zip, *.tar, *.tar.gz, *.tgz, *.tar.bz2 or *.tar.xz.")
        size, sha256 = file.get("size"), file.get("sha256")
        if size is not None and (isinstance(size, bool) or not isinstance(size, int)
                                 or size < 1):
            raise CatalogError(f"{where}.size is {size!r}; expected bytes (an int >= 1) or "
                               "null.")
        if sha256 is not None and not (isinstance(sha256, str)
                                       and _SHA256.fullmatch(sha256.lower())):
            raise CatalogError(f"{where}.sha256 is {sha256!r:.80}; expected 64 hex digits or "
                               "null.")
        parsed.append(ModelFile(file["role"], tuple(urls), size,
                                sha256.lower() if sha256 else None))
    return tuple(parsed)


def _is_http_url(url):
    if not isinstance(url, str):
        return False
    parts = urllib.parse.urlsplit(url)
    return parts.scheme in ("http", "https") and bool(parts.netloc)
