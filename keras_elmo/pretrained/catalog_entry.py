"""A model of the catalog as Python sees it: `CatalogEntry` and its `ModelFile`s.

The fields are catalog.json's (`keras_elmo.pretrained.catalog_schema` checks and reads
them); `with_mirror` gives the entry as `KERAS_ELMO_MIRROR` rewrites its URLs.

Example:
>>> file = ModelFile("archive", ("http://vectors.nlpl.eu/repository/11/144.zip",))
>>> file.file_name
'144.zip'
>>> mirrored_url(file.urls[0], "https://artifacts.example.com/elmo")
'https://artifacts.example.com/elmo/repository/11/144.zip'
"""

import dataclasses
import os
import urllib.parse


@dataclasses.dataclass(frozen=True)
class ModelFile:
    """One file of a catalog model.

    Attributes:
        role: `"options"`, `"weights"` (layout options+weights) or `"archive"`; or an
            extra file beside the model (`"vocabulary"`: its vocab.txt).
        urls: tuple of http(s) URLs of the same file, the primary first.
        size: int bytes, or None when no source gives it.
        sha256: str, 64 lowercase hex digits, or None when no source gives it.
        optional: bool, the model is whole without it (an extra file missing upstream is
            skipped, not an error).
        sources: dict, `"size"` / `"sha256"` -> reference keys of the source stating it.
    """

    role: str
    urls: tuple
    size: int = None
    sha256: str = None
    optional: bool = False
    sources: dict = dataclasses.field(default_factory=dict, compare=False)

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
        files: tuple of `ModelFile`, in the order of `ROLES[layout]`, then the extra files
            (`EXTRA_ROLES`: the vocabulary) that land in the model directory.
        lstm_dim, projection_dim, output_dim, highway_layers: ints; parameters_millions.
        title, language_name, training_data, licence, source_page, note: str.
        format: `"bilm-tf"`, `"elmoformanylangs"` or `"tfhub-module"` (`FORMATS`).
        archive_contents: str, what the archive holds as its publisher states it (the
            folder and file names: `norelmo/options.json, model.hdf5`), or None.
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
    archive_contents: str = None
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
