"""What a download keeps and what it refuses: a partial file of an older version is not
resumed into a file of two versions, a stated sha256 that fits is accepted, and a URL
serving another file falls through to the next URL."""

import hashlib
import json
import os

import numpy as np
import pytest

import model_mirror
from keras_elmo.pretrained.http_download import download
from keras_elmo.pretrained.model_cache import MANIFEST_FILE
from keras_elmo.pretrained.resolve import resolve_model

SMALL_WEIGHTS, SMALL_OPTIONS = model_mirror.SMALL_WEIGHTS, model_mirror.SMALL_OPTIONS


@pytest.fixture(scope="module")
def mirror_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("mirror")
    model_mirror.write_mirror(str(directory), ["elmo-small"])
    return directory


@pytest.fixture
def served(mirror_dir, tmp_path, monkeypatch):
    with model_mirror.serving(mirror_dir, tmp_path / "cache", monkeypatch) as server:
        yield server


def _etag(data):
    """The mirror's ETag of `data` (`model_mirror.MirrorServer`)."""
    return '"' + hashlib.sha256(data).hexdigest()[:16] + '"'


def _user_catalog(tmp_path, monkeypatch, weight_urls, sha256=None, size=None):
    entry = {"language": "en", "layout": "options+weights", "files": [
        {"role": "options", "urls": [weight_urls[-1].replace(SMALL_WEIGHTS, SMALL_OPTIONS)]},
        {"role": "weights", "urls": weight_urls, "size": size, "sha256": sha256}]}
    path = tmp_path / "my_catalog.json"
    path.write_text(json.dumps({"models": {"my-elmo": entry}}), encoding="utf-8")
    monkeypatch.setenv("KERAS_ELMO_CATALOG", str(path))


def test_a_part_of_a_file_changed_upstream_is_replaced_by_the_whole_new_file(tmp_path):
    """`.part` holds the old version's first bytes and its ETag: `If-Range` makes the server
    send the new version whole (200), never its tail after the old head (206)."""
    rng = np.random.default_rng(0)
    old, new = rng.bytes(100_000), rng.bytes(100_000)
    served = tmp_path / "served"
    served.mkdir()
    (served / "weights.hdf5").write_bytes(new)  # changed upstream since the partial download
    part = tmp_path / "weights.part"
    part.write_bytes(old[:30_000])
    with model_mirror.MirrorServer(served) as server:
        url = server.url + "/weights.hdf5"
        (tmp_path / "weights.part.json").write_text(json.dumps(
            {"url": url, "etag": _etag(old), "last_modified": None}))
        result = download([url], str(part), "weights.hdf5", progress=False)
        assert server.requests == [("/weights.hdf5", "bytes=30000-")]  # a resume was asked
    assert part.read_bytes() == new  # and the whole new file came
    assert (result.size, result.sha256) == (len(new), hashlib.sha256(new).hexdigest())
    assert not (tmp_path / "weights.part.json").exists()


def test_a_stated_sha256_that_fits_is_accepted_and_kept(served, mirror_dir, tmp_path,
                                                        monkeypatch):
    data = (mirror_dir / SMALL_WEIGHTS.lstrip("/")).read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    _user_catalog(tmp_path, monkeypatch, [served.url + SMALL_WEIGHTS], sha256=digest.upper(),
                  size=len(data))
    path = resolve_model("my-elmo").model_dir
    with open(os.path.join(path, "weights.hdf5"), "rb") as handle:
        assert handle.read() == data
    with open(os.path.join(path, MANIFEST_FILE), encoding="utf-8") as handle:
        weights = json.load(handle)["downloads"][1]
    assert (weights["sha256"], weights["size"]) == (digest, len(data))
    requests = len(served.requests)
    assert resolve_model("my-elmo").model_dir == path  # cached: the stated sha256 fits
    assert len(served.requests) == requests


def test_a_first_url_serving_another_file_falls_through_to_the_next(served, mirror_dir, tmp_path,
                                                                   monkeypatch, capfd):
    data = (mirror_dir / SMALL_WEIGHTS.lstrip("/")).read_bytes()
    stale = tmp_path / "stale"
    (stale / SMALL_WEIGHTS.lstrip("/")).parent.mkdir(parents=True)
    (stale / SMALL_WEIGHTS.lstrip("/")).write_bytes(data[:-4] + b"\0\0\0\0")  # same size
    with model_mirror.MirrorServer(stale) as first:
        _user_catalog(tmp_path, monkeypatch, [first.url + SMALL_WEIGHTS,
                                              served.url + SMALL_WEIGHTS],
                      sha256=hashlib.sha256(data).hexdigest())
        monkeypatch.delenv("KERAS_ELMO_MIRROR")  # the entry's own URLs, in order
        path = resolve_model("my-elmo").model_dir
        assert first.paths() == [SMALL_WEIGHTS]
    assert served.paths() == [SMALL_OPTIONS, SMALL_WEIGHTS]
    with open(os.path.join(path, "weights.hdf5"), "rb") as handle:
        assert handle.read() == data
    with open(os.path.join(path, MANIFEST_FILE), encoding="utf-8") as handle:
        assert json.load(handle)["downloads"][1]["url"] == served.url + SMALL_WEIGHTS
