"""A model counts as downloaded or cached only when its files state what its catalog entry
states (LSTM and projection sizes, output size, highway layers, parameters): a mirror or a
cache holding another model under a catalog name is one line, and nothing of it stays."""

import json
import os

import pytest

import model_mirror
from keras_elmo.pretrained.model_cache import MANIFEST_FILE
from keras_elmo.pretrained.resolve import resolve_model

SMALL_WEIGHTS, SMALL_OPTIONS = model_mirror.SMALL_WEIGHTS, model_mirror.SMALL_OPTIONS


@pytest.fixture(scope="module")
def mirror_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("mirror")
    model_mirror.write_mirror(str(directory), ["elmo-small", "efml-zhs"])
    return directory


@pytest.fixture(scope="module")
def other_model_dir(tmp_path_factory):
    """A 384/128 model at elmo-small's paths (the catalog's elmo-small is 1024/128)."""
    import keras_elmo

    directory = tmp_path_factory.mktemp("other")
    options = keras_elmo.BiLMOptions.tiny(lstm_units=384, projection_dim=128)
    model = model_mirror.tiny_published_model(str(directory / "model"), options=options)
    for path, source in ((SMALL_OPTIONS, model[0]), (SMALL_WEIGHTS, model[1])):
        target = directory / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(open(source, "rb").read())
    return directory


@pytest.fixture
def served(mirror_dir, tmp_path, monkeypatch):
    with model_mirror.serving(mirror_dir, tmp_path / "cache", monkeypatch) as server:
        yield server


def _left_in_cache(tmp_path):
    root = tmp_path / "cache" / "models"
    return sorted(os.path.relpath(os.path.join(d, n), root) for d, _, names in os.walk(root)
                  for n in names if ".locks" not in d)


def test_a_mirror_serving_another_model_under_a_catalog_name_is_one_line(
        served, other_model_dir, tmp_path, monkeypatch):
    monkeypatch.delenv("KERAS_ELMO_CATALOG", raising=False)  # the package's: 1024/128
    with model_mirror.MirrorServer(other_model_dir) as other:
        monkeypatch.setenv("KERAS_ELMO_MIRROR", other.url)
        with pytest.raises(ValueError) as raised:
            resolve_model("elmo-small")
    line = str(raised.value)
    assert line == (
        f"elmo-small as served by {other.url}{SMALL_WEIGHTS} is another model than the catalog "
        "names: the catalog states lstm_dim 1024, parameters_millions 13.6; its files say "
        "lstm_dim 384, parameters_millions 1.78; nothing of it was kept; check what that URL "
        "serves (a mirror, KERAS_ELMO_MIRROR, must hold the catalog's files at their paths) "
        "or the entry (KERAS_ELMO_CATALOG).")
    assert _left_in_cache(tmp_path) == []
    assert os.listdir(tmp_path / "cache" / "models" / ".partial") == []


def test_an_archive_of_another_model_is_refused_the_same_way(served, tmp_path, monkeypatch):
    monkeypatch.delenv("KERAS_ELMO_CATALOG", raising=False)  # efml-zhs: 4096/512
    with pytest.raises(ValueError) as raised:
        resolve_model("efml-zhs")
    line = str(raised.value)
    assert line.startswith(f"efml-zhs as served by {served.url}/zhs.model.tar.bz2 is another "
                           "model than the catalog names: the catalog states lstm_dim 4096, "
                           "projection_dim 512, output_dim 1024; its files say lstm_dim 32, "
                           "projection_dim 16, output_dim 32; nothing of it was kept;"), line
    assert _left_in_cache(tmp_path) == []


@pytest.mark.parametrize("manifest", ["as written now", "of an older version (no facts)"])
def test_a_cached_copy_of_another_model_is_one_line_and_removed(served, tmp_path, monkeypatch,
                                                                manifest):
    cached = resolve_model("elmo-small").model_dir  # the stand-ins' catalog: it fits
    if manifest != "as written now":
        path = os.path.join(cached, MANIFEST_FILE)
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        data.pop("facts", None)
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(data, handle)
    monkeypatch.delenv("KERAS_ELMO_CATALOG", raising=False)  # the package's: 1024/128
    requests = len(served.requests)
    with pytest.raises(ValueError) as raised:
        resolve_model("elmo-small")
    assert str(raised.value) == (
        f"the cached model elmo-small ({cached}) is another model than the catalog names: the "
        "catalog states lstm_dim 1024, projection_dim 128, output_dim 256, parameters_millions "
        "13.6; its files say lstm_dim 12, projection_dim 8, output_dim 16, parameters_millions "
        "0.0059; it was removed from the cache; run the same command again to download the "
        "catalog's model.")
    assert not os.path.exists(cached) and _left_in_cache(tmp_path) == []
    assert len(served.requests) == requests  # refused from the cache, nothing downloaded


def test_a_model_that_fits_its_entry_records_what_its_files_state(served, tmp_path):
    cached = resolve_model("elmo-small").model_dir
    with open(os.path.join(cached, MANIFEST_FILE), encoding="utf-8") as handle:
        facts = json.load(handle)["facts"]
    assert facts == {"lstm_dim": 12, "projection_dim": 8, "output_dim": 16, "highway_layers": 1,
                     "parameters_millions": pytest.approx(0.005896)}
