"""The catalog of published models: every entry well formed and every fact sourced, the
documents' tables generated from it, a user's catalog over it (one line per mistake), the
nearest names of an unknown one, and the environment variables read in one place."""

import json
import os
import urllib.parse

import pytest

from keras_elmo.pretrained import settings
from keras_elmo.pretrained.catalog import (CATALOG_FILE, CatalogError, UnknownModelError,
                                           load_catalog, mirrored_url)
from keras_elmo.pretrained.catalog_schema import FORMATS, archive_url_kind
from keras_elmo.pretrained.catalog_table import document_tables, markdown_table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: Fact fields -> the `sources` group that must cite them when they are not null.
FACT_GROUPS = {"lstm_dim": "sizes", "projection_dim": "sizes", "highway_layers": "sizes",
               "parameters_millions": "sizes", "output_dim": "output_dim",
               "training_data": "training_data", "licence": "licence",
               "archive_contents": "archive_contents"}
#: The 44 languages of ELMoForManyLangs' NLPL releases (ids 136-179) and simplified Chinese.
EFML_CODES = ("ar bg ca cs cu da de el en es et eu fa fi fr ga gl grc he hi hr hu id it ja ko "
              "la lv nl nb nn pl pt ro ru sk sl sv tr ug uk ur vi zht zhs").split()
#: The models of the other publishers, by family (None: an entry of its own), and format.
OTHERS = {
    "tfhub-google": (["tfhub-elmo-1", "tfhub-elmo-2", "tfhub-elmo-3"], "tfhub-module"),
    "deeppavlov": (["deeppavlov-elmo-ru-wiki", "deeppavlov-elmo-ru-news",
                    "deeppavlov-elmo-ru-twitter"], "tfhub-module"),
    "norelmo": (["norelmo-wiki-lemmas", "norelmo-wiki-tokens", "norelmo-30", "norelmo-100"],
                "bilm-tf"),
    None: (["polish-elmo", "embeddia-elmo-sl"], "bilm-tf"),
}
#: Hosts of the catalog that serve https (each publisher's own page says so); the others
#: (the NLPL repository, files.deeppavlov.ai, ...) are given as their publisher gives them.
HTTPS_HOSTS = {"tfhub.dev", "www.kaggle.com", "github.com", "www.clarin.si",
               "s3-us-west-2.amazonaws.com", "allennlp.s3.amazonaws.com",
               "exawizardsallenlp.blob.core.windows.net"}


@pytest.fixture
def catalog(monkeypatch):
    monkeypatch.delenv("KERAS_ELMO_CATALOG", raising=False)
    return load_catalog()


def test_the_catalog_lists_the_published_models(catalog):
    names = [entry.name for entry in catalog]
    assert names[:4] == ["elmo-small", "elmo-medium", "elmo-original", "elmo-5.5b"]
    assert {"elmo-pubmed", "elmo-pt-wikipedia", "elmo-pt-brwac", "elmo-ja"} <= set(names)
    assert sorted(n[len("efml-"):] for n in names if n.startswith("efml-")) == sorted(EFML_CODES)
    nlpl = sorted(int(os.path.basename(e.files[0].urls[0])[:-len(".zip")]) for e in catalog
                  if e.files[0].urls[0].startswith("http://vectors.nlpl.eu/repository/11/"))
    assert nlpl == list(range(136, 180))
    small = catalog.get("elmo-small")
    assert (small.lstm_dim, small.projection_dim, small.output_dim, small.highway_layers,
            small.parameters_millions) == (1024, 128, 256, 1, 13.6)
    assert catalog.get("efml-zhs").files[0].urls[0].endswith("zhs.model.tar.bz2")
    for family, (members, fmt) in OTHERS.items():
        entries = [catalog.get(name) for name in members]
        assert [(e.family, e.format, e.layout) for e in entries] == [
            (family, fmt, "archive")] * len(members), family
    listed = 8 + len(EFML_CODES) + sum(len(members) for members, _ in OTHERS.values())
    assert len(catalog) == listed == 65
    assert {e.format for e in catalog} == set(FORMATS)
    elmo3 = catalog.get("tfhub-elmo-3")
    assert (elmo3.projection_dim, elmo3.output_dim, elmo3.lstm_dim, elmo3.main) == (
        512, 1024, None, True)
    assert elmo3.files[0].urls == (
        "https://tfhub.dev/google/elmo/3",
        "https://www.kaggle.com/api/v1/models/google/elmo/tensorFlow1/elmo/3/download")
    assert catalog.get("deeppavlov-elmo-ru-news").files[0].urls == (
        "http://files.deeppavlov.ai/deeppavlov_data/elmo_ru-news_wmt11-16_1.5M_steps.tar.gz",)
    assert [catalog.get(n).files[0].file_name for n in OTHERS["norelmo"][0]] == [
        "210.zip", "211.zip", "217.zip", "218.zip"]


def _unsourced(entry, references):
    """What `entry` states without citing a source among `references` (empty: all cited).

    A fact of the entry cites its group in the entry's `sources`; a file's stated size or
    sha256 cites it in the file's own `sources` (`{"size": [KEY], "sha256": [KEY]}`)."""
    problems = []
    cited = {key for keys in entry.sources.values() for key in keys}
    cited |= {key for file in entry.files for keys in file.sources.values() for key in keys}
    problems += [f"{entry.name} cites the unknown reference {key!r}"
                 for key in sorted(cited - set(references))]
    if not entry.sources.get("urls"):
        problems.append(f"{entry.name}: its urls cite no source")
    for field, group in FACT_GROUPS.items():
        if getattr(entry, field) is not None and not entry.sources.get(group):
            problems.append(f"{entry.name}.{field} cites no source (sources[{group!r}])")
    for file in entry.files:
        for field in ("size", "sha256"):
            if getattr(file, field) is not None and not file.sources.get(field):
                problems.append(f"{entry.name} {file.role}.{field} cites no source")
    return problems


def test_every_fact_cites_a_source_and_nothing_is_made_up(catalog):
    with open(CATALOG_FILE, encoding="utf-8") as handle:
        references = json.load(handle)["references"]
    for entry in catalog:
        assert _unsourced(entry, references) == []
        for file in entry.files:
            assert all(url.startswith(("http://", "https://")) for url in file.urls)
        if entry.output_dim is not None and entry.projection_dim is not None:
            assert entry.output_dim == 2 * entry.projection_dim, entry.name


def test_every_reference_is_cited_and_every_url_is_as_its_publisher_serves_it(catalog):
    """No reference stands unused; a host that serves https is given as https; a TF Hub
    handle or Kaggle download URL only for a TF Hub module; the primary URL first, then the
    mirrors of the same file (the TF Hub handle before Kaggle's copy it redirects to)."""
    with open(CATALOG_FILE, encoding="utf-8") as handle:
        references = json.load(handle)["references"]
    cited = {key for entry in catalog for keys in entry.sources.values() for key in keys}
    cited |= {key for entry in catalog for file in entry.files
              for keys in file.sources.values() for key in keys}
    assert sorted(set(references) - cited) == []
    for entry in catalog:
        for file in entry.files:
            hosts = [urllib.parse.urlsplit(url).hostname for url in file.urls]
            for url, host in zip(file.urls, hosts):
                if host in HTTPS_HOSTS:
                    assert url.startswith("https://"), url
                if file.role == "archive":
                    kind = archive_url_kind(url, entry.format)
                    assert kind == archive_url_kind(url, None) or (
                        entry.format == "tfhub-module" and kind == "tar"), url
            if entry.format == "tfhub-module" and "www.kaggle.com" in hosts:
                assert hosts.index("tfhub.dev") < hosts.index("www.kaggle.com"), entry.name
            assert len(set(file.urls)) == len(file.urls), entry.name


def test_a_stated_sha256_or_size_needs_a_source_of_its_own(tmp_path):
    """A checksum a public source states may enter the catalog, citing that source; one
    that cites none is made up."""
    weights = {"role": "weights", "urls": ["https://a.example/w.hdf5"], "size": 12,
               "sha256": "ab" * 32, "sources": {"sha256": ["ours"], "size": ["ours"]}}
    entry = {"language": "en", "layout": "options+weights", "sources": {"urls": ["ours"]},
             "files": [{"role": "options", "urls": ["https://a.example/o.json"]}, weights]}
    path = tmp_path / "mine.json"
    references = {"ours": "our release notes"}
    path.write_text(json.dumps({"references": references, "models": {"x": entry}}),
                    encoding="utf-8")
    catalog = load_catalog(user_file=str(path))
    assert _unsourced(catalog.get("x"), catalog.references) == []
    del weights["sources"]["sha256"]
    path.write_text(json.dumps({"references": references, "models": {"x": entry}}),
                    encoding="utf-8")
    catalog = load_catalog(user_file=str(path))
    assert _unsourced(catalog.get("x"), catalog.references) == [
        "x weights.sha256 cites no source"]


def test_the_documents_tables_are_the_catalogs():
    catalog = load_catalog(user_file="")
    for document, expected in (("README.md", ["main"]), ("docs/pretrained.md", ["all"])):
        with open(os.path.join(ROOT, document), encoding="utf-8") as handle:
            text = handle.read()
        tables = document_tables(text)
        assert [which for which, _, _ in tables] == expected, document
        for which, start, end in tables:
            assert text[start:end].rstrip("\n") == markdown_table(catalog, which), (
                f"{document}'s table differs from catalog.json: run python -m "
                "keras_elmo.pretrained.catalog_table README.md docs/pretrained.md")
    assert markdown_table(catalog, "all").count("\n") == len(catalog) + 1


def test_a_user_catalog_adds_and_replaces_entries(tmp_path, monkeypatch):
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({
        "references": {"ours": "our wiki"},
        "models": {
            "elmo-small": {"family": "allennlp", "language": "en", "title": "ours",
                           "files": [{"role": "options", "urls": ["https://a.example/o.json"]},
                                     {"role": "weights", "urls": ["https://a.example/w.hdf5"],
                                      "size": 12, "sha256": "AB" * 32}]},
            "my-model": {"language": "de", "layout": "archive", "sources": {"urls": ["ours"]},
                         "files": [{"role": "archive", "urls": ["https://a.example/m.tar.xz"]}]}
        }}), encoding="utf-8")
    monkeypatch.setenv("KERAS_ELMO_CATALOG", str(path))
    catalog = load_catalog()
    small = catalog.get("elmo-small")
    assert small.title == "ours" and small.source_page == "https://allennlp.org/elmo"
    assert small.files[1].sha256 == "ab" * 32 and small.files[1].size == 12
    assert catalog.get("my-model").layout == "archive" and "efml-zhs" in catalog
    assert catalog.files == (CATALOG_FILE, str(path))


@pytest.mark.parametrize("entry, expected", [
    ({"language": "en", "layout": "zip", "files": []},
     "models['x'].layout is 'zip'; expected one of ['options+weights', 'archive']."),
    ({"language": "en", "layout": "archive", "files": [{"role": "archive", "urls": []}]},
     "models['x'].files[0].urls is []; expected a non-empty list of http(s) URLs"),
    ({"language": "en", "layout": "archive",
      "files": [{"role": "archive", "urls": ["https://a.example/model.hdf5"]}]},
     "models['x'].files[0].urls has 'https://a.example/model.hdf5'; expected an archive"),
    ({"language": "en", "layout": "options+weights",
      "files": [{"role": "weights", "urls": ["https://a/w"]}]},
     "models['x'].files must list the roles ['options', 'weights'] in that order"),
    ({"language": "en", "layout": "archive",
      "files": [{"role": "archive", "urls": ["ftp://a/m.zip"]}]},
     "expected a non-empty list of http(s) URLs"),
    ({"language": "en", "layout": "archive", "files": [
        {"role": "archive", "urls": ["https://a/m.zip"], "sha256": "123"}]},
     "models['x'].files[0].sha256 is '123'; expected 64 hex digits or null."),
    ({"language": "en", "layout": "archive", "lstm_dim": "big", "files": [
        {"role": "archive", "urls": ["https://a/m.zip"]}]},
     "models['x'].lstm_dim is 'big'; expected an int >= 0 or null."),
    ({"language": "en", "layout": "archive", "colour": "red", "files": []},
     "models['x'] has unknown field(s) ['colour']"),
    ({"layout": "archive", "files": []}, "models['x'].language is None; expected a language code"),
    ({"language": "en", "layout": "archive", "files": [
        {"role": "archive", "urls": ["https://a/m.zip"]},
        {"role": "readme", "urls": ["https://a/README"]}]},
     "then each of ['vocabulary'] at most once; received ['archive', 'readme']."),
    ({"language": "en", "layout": "archive", "files": [
        {"role": "archive", "urls": ["https://a/m.zip"], "optional": True}]},
     "models['x'].files[0].optional is True; expected true or false, and false for the "
     "'archive' layout's own files."),
    ({"language": "en", "layout": "archive", "files": [
        {"role": "archive", "urls": ["https://a/m.zip"], "sources": {"urls": ["a"]}}]},
     "models['x'].files[0].sources is {'urls': ['a']}; expected an object of lists of "
     "reference keys under ['size', 'sha256']."),
    ({"family": "nope", "language": "en"}, "models['x'].family is 'nope'; expected one of"),
    ({"language": "en", "layout": "archive", "format": "onnx", "files": [
        {"role": "archive", "urls": ["https://a/m.zip"]}]},
     "models['x'].format is 'onnx'; expected one of ['bilm-tf', 'elmoformanylangs', "
     "'tfhub-module'] or null."),
    ({"language": "en", "layout": "options+weights", "format": "tfhub-module", "files": [
        {"role": "options", "urls": ["https://a/o.json"]},
        {"role": "weights", "urls": ["https://a/w.hdf5"]}]},
     "models['x'].layout is 'options+weights'; expected 'archive' for format 'tfhub-module'"),
    ({"language": "en", "layout": "archive", "format": "bilm-tf", "files": [
        {"role": "archive", "urls": ["https://tfhub.dev/google/elmo/3"]}]},
     "models['x'].files[0].urls has 'https://tfhub.dev/google/elmo/3'; expected an archive "
     "named *.zip, *.tar, *.tar.gz, *.tgz, *.tar.bz2 or *.tar.xz."),
    ({"language": "en", "layout": "archive", "format": "tfhub-module", "files": [
        {"role": "archive", "urls": ["https://www.kaggle.com/models/google/elmo"]}]},
     "or, for format 'tfhub-module', a tfhub.dev handle or a Kaggle Models download URL."),
])
def test_a_user_catalog_that_breaks_the_schema_is_one_line(tmp_path, monkeypatch, entry,
                                                           expected):
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"models": {"x": entry}}), encoding="utf-8")
    monkeypatch.setenv("KERAS_ELMO_CATALOG", str(path))
    with pytest.raises(CatalogError) as raised:
        load_catalog()
    line = str(raised.value)
    assert line.startswith(f"KERAS_ELMO_CATALOG {path}: ") and expected in line, line
    assert "\n" not in line


def test_a_user_catalog_file_itself_wrong(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_ELMO_CATALOG", str(tmp_path / "missing.json"))
    with pytest.raises(FileNotFoundError, match="missing.json: no such file; expected a JSON"):
        load_catalog()
    (tmp_path / "bad.json").write_text("{not json", encoding="utf-8")
    monkeypatch.setenv("KERAS_ELMO_CATALOG", str(tmp_path / "bad.json"))
    with pytest.raises(CatalogError, match="bad.json: not a JSON file"):
        load_catalog()
    (tmp_path / "bad.json").write_text('{"models": {"Bad Name": {}}}', encoding="utf-8")
    with pytest.raises(CatalogError, match="model name 'Bad Name' is not allowed"):
        load_catalog()
    (tmp_path / "bad.json").write_text('{"schema_version": 2, "models": {}}', encoding="utf-8")
    with pytest.raises(CatalogError, match="schema_version is 2; expected 1"):
        load_catalog()


def test_an_unknown_name_lists_the_nearest_names(catalog):
    for name, nearest in (("zhs.model", ["efml-zhs"]), ("german", ["efml-de"]),
                          ("elmo-smal", ["elmo-small"]), ("chinese", ["efml-zht", "efml-zhs"])):
        assert catalog.nearest(name)[:len(nearest)] == nearest, name
    with pytest.raises(UnknownModelError) as raised:
        catalog.get("elmo-smal")
    assert str(raised.value).startswith(
        "unknown model 'elmo-smal': it is neither a directory nor a name of the catalog; "
        "nearest names: elmo-small, ")
    assert str(raised.value).endswith(f"`keras-elmo models` lists all {len(catalog)} (a model "
                                      "directory that exists is read as a directory).")


@pytest.mark.parametrize("url, fmt, kind", [
    ("https://tfhub.dev/google/elmo/3", "tfhub-module", "tar"),
    ("https://www.kaggle.com/api/v1/models/google/elmo/tensorFlow1/elmo/3/download",
     "tfhub-module", "tar"),
    ("https://tfhub.dev/google/elmo/3", "bilm-tf", None),
    ("https://www.kaggle.com/models/google/elmo/TensorFlow1/elmo/3", "tfhub-module", None),
    ("https://example.org/hub/elmo/3", "tfhub-module", None),
    ("http://files.deeppavlov.ai/deeppavlov_data/elmo_ru-wiki_600k_steps.tar.gz",
     "tfhub-module", "tar"),
    ("http://vectors.nlpl.eu/repository/20/218.zip", None, "zip"),
])
def test_how_an_archive_url_is_read(url, fmt, kind):
    assert archive_url_kind(url, fmt) == kind


def test_a_mirror_keeps_the_paths(catalog):
    assert mirrored_url("https://s3-us-west-2.amazonaws.com/allennlp/m/w.hdf5",
                        "http://127.0.0.1:8000/") == "http://127.0.0.1:8000/allennlp/m/w.hdf5"
    original = catalog.get("elmo-original").with_mirror("https://art.example/elmo")
    assert original.files[1].urls == (
        "https://art.example/elmo/allennlp/models/elmo/2x4096_512_2048cnn_2xhighway/"
        "elmo_2x4096_512_2048cnn_2xhighway_weights.hdf5",
        "https://art.example/elmo/models/elmo/2x4096_512_2048cnn_2xhighway/"
        "elmo_2x4096_512_2048cnn_2xhighway_weights.hdf5")
    zhs = catalog.get("efml-zhs").with_mirror("https://art.example")
    assert zhs.files[0].urls == ("https://art.example/zhs.model.tar.bz2",
                                 "https://art.example/zhs.model.tar.xz")  # duplicates dropped


def test_the_environment_variables():
    assert settings.cache_root({"KERAS_ELMO_CACHE": "/c", "KERAS_HOME": "/k"}) == "/c/models"
    assert settings.cache_root({"KERAS_HOME": "/k"}) == "/k/models/keras-elmo"
    assert settings.cache_root({}).endswith(os.path.join(".keras", "models", "keras-elmo"))
    assert settings.is_offline({"KERAS_ELMO_OFFLINE": "yes"}) is True
    assert settings.is_offline({"KERAS_ELMO_OFFLINE": "0", "HF_HUB_OFFLINE": "1"}) is False
    assert settings.is_offline({"HF_HUB_OFFLINE": "1"}) is True
    assert settings.is_offline({"KERAS_ELMO_OFFLINE": ""}) is False
    with pytest.raises(ValueError, match="KERAS_ELMO_OFFLINE='maybe' is not understood"):
        settings.is_offline({"KERAS_ELMO_OFFLINE": "maybe"})
    assert settings.mirror({"KERAS_ELMO_MIRROR": "http://m:1/x/"}) == "http://m:1/x"
    assert settings.mirror({}) is None
    with pytest.raises(ValueError, match="KERAS_ELMO_MIRROR='m.example' is not a mirror URL"):
        settings.mirror({"KERAS_ELMO_MIRROR": "m.example"})
    assert settings.timeout_seconds({}) == settings.DEFAULT_TIMEOUT_SECONDS
    assert settings.timeout_seconds({"KERAS_ELMO_DOWNLOAD_TIMEOUT": "2.5"}) == 2.5
    for bad in ("0", "-1", "soon", "inf"):
        with pytest.raises(ValueError, match="KERAS_ELMO_DOWNLOAD_TIMEOUT="):
            settings.timeout_seconds({"KERAS_ELMO_DOWNLOAD_TIMEOUT": bad})
