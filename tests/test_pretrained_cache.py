"""The cache as a user sees it: `keras-elmo models` lists what was cached from URLs, lock
files go when nobody holds them, and an entry carries optional files (the vocabulary) that
land beside the model as in a model directory."""

import dataclasses
import fcntl
import json
import os
import shutil
import threading
import time

import pytest

import model_mirror
from keras_elmo.cli.main import main
from keras_elmo.formats.model_files import resolve_model_files
from keras_elmo.pretrained.http_download import DownloadError
from keras_elmo.pretrained.model_cache import MANIFEST_FILE
from keras_elmo.pretrained.resolve import resolve_model

SMALL_WEIGHTS, SMALL_OPTIONS = model_mirror.SMALL_WEIGHTS, model_mirror.SMALL_OPTIONS
VOCAB = "/tickets/vocab.txt"
VOCAB_TEXT = "<S>\n</S>\n<UNK>\nthe\ncat\nsat\n"


@pytest.fixture(scope="module")
def mirror_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("mirror")
    model_mirror.write_mirror(str(directory), ["elmo-small", "efml-zhs"])
    (directory / VOCAB.lstrip("/")).parent.mkdir(parents=True)
    (directory / VOCAB.lstrip("/")).write_text(VOCAB_TEXT, encoding="utf-8")
    return directory


@pytest.fixture
def served(mirror_dir, tmp_path, monkeypatch):
    with model_mirror.serving(mirror_dir, tmp_path / "cache", monkeypatch) as server:
        yield server


def _root(tmp_path):
    return tmp_path / "cache" / "models"


def _user_catalog(tmp_path, monkeypatch, url, vocabulary):
    entry = {"language": "en", "layout": "options+weights", "files": [
        {"role": "options", "urls": [url + SMALL_OPTIONS]},
        {"role": "weights", "urls": [url + SMALL_WEIGHTS]}, vocabulary]}
    path = tmp_path / "my_catalog.json"
    path.write_text(json.dumps({"models": {"my-elmo": entry}}), encoding="utf-8")
    monkeypatch.setenv("KERAS_ELMO_CATALOG", str(path))


def test_models_lists_what_was_cached_from_urls(served, tmp_path, capsys):
    pair = resolve_model(options_file=served.url + SMALL_OPTIONS,
                         weight_file=served.url + SMALL_WEIGHTS).weight_file
    archive = resolve_model(served.url + "/zhs.model.tar.bz2").model_dir
    keys = [os.path.relpath(path, _root(tmp_path)).split(os.sep)[0] for path in (pair, archive)]
    code = main(["models"])
    out = capsys.readouterr().out
    assert code == 0
    assert f"65 models, 0 cached in {_root(tmp_path)}; 2 more cached from URLs (below)" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines()
            if line.startswith("  url-")}
    assert sorted(rows) == sorted(keys)
    assert rows[keys[0]][-2:] == [served.url + SMALL_OPTIONS, served.url + SMALL_WEIGHTS]
    assert rows[keys[1]][-1] == served.url + "/zhs.model.tar.bz2"
    code = main(["models", "--language", "zh"])  # a language: the catalog's models only
    assert "url-" not in capsys.readouterr().out


def test_no_lock_file_stays_after_a_download_or_a_failed_attempt(served, tmp_path):
    resolve_model("elmo-small")
    served.faults["/zhs.model.tar.bz2"] = ("status", 404)
    served.faults["/zhs.model.tar.xz"] = ("status", 404)
    with pytest.raises(DownloadError):
        resolve_model("efml-zhs")
    assert os.listdir(_root(tmp_path) / ".locks") == []


def test_a_lock_file_nobody_holds_goes_and_a_held_one_stays(served, tmp_path):
    locks = _root(tmp_path) / ".locks"
    locks.mkdir(parents=True)
    (locks / "efml-en.lock").write_text('{"pid": 1, "host": "gone"}\n')  # its holder killed
    held = os.open(locks / "elmo-original.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(held, fcntl.LOCK_EX)  # a download under way (another open file: flock's unit)
    try:
        resolve_model("elmo-small")
        assert os.listdir(locks) == ["elmo-original.lock"]
    finally:
        os.close(held)


def test_a_process_that_waited_holds_the_lock_on_the_file_that_stays(tmp_path):
    """The holder removes its lock file on release; one that waited on the removed file
    locks the path's new file, so a third process cannot take the lock at the same time."""
    from keras_elmo.pretrained.download_lock import download_lock

    seen = []

    def waiter():
        with download_lock(str(tmp_path), "m", announce=False) as path:
            third = os.open(path, os.O_RDWR | os.O_CREAT)
            try:
                fcntl.flock(third, fcntl.LOCK_EX | fcntl.LOCK_NB)
                seen.append("a third process took it too")
            except BlockingIOError:
                seen.append("held")
            finally:
                os.close(third)

    with download_lock(str(tmp_path), "m", announce=False):
        thread = threading.Thread(target=waiter)
        thread.start()
        time.sleep(0.3)  # the waiter opened the lock file and waits on it
    thread.join(10)
    assert seen == ["held"]
    assert os.listdir(tmp_path / ".locks") == []


def test_an_entrys_vocabulary_lands_beside_the_model_as_in_a_directory(served, mirror_dir,
                                                                      tmp_path, monkeypatch,
                                                                      capsys):
    _user_catalog(tmp_path, monkeypatch, served.url,
                  {"role": "vocabulary", "urls": [served.url + VOCAB], "optional": True})
    cached = resolve_model("my-elmo").model_dir
    with open(os.path.join(cached, "vocab.txt"), encoding="utf-8") as handle:
        assert handle.read() == VOCAB_TEXT
    directory = tmp_path / "as_a_directory"
    shutil.copytree(mirror_dir / ".tiny_model", directory)
    shutil.copy(mirror_dir / VOCAB.lstrip("/"), directory / "vocab.txt")

    def names(files):
        return {key: value and os.path.basename(value)
                for key, value in dataclasses.asdict(files).items()}

    assert names(resolve_model_files(cached)) == names(resolve_model_files(directory))
    assert resolve_model_files(cached).vocab_file == os.path.join(cached, "vocab.txt")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.txt").write_text("the cat sat\n", encoding="utf-8")
    code = main(["embed", "my-elmo", "in.txt", "out.hdf5", "--top"])
    out = capsys.readouterr().out
    assert code == 0 and "; token cache 6 tokens, " in out  # embed NAME finds vocab.txt


def test_an_optional_file_missing_upstream_leaves_the_model_whole(served, tmp_path,
                                                                 monkeypatch):
    missing = served.url + "/tickets/missing_vocab.txt"
    _user_catalog(tmp_path, monkeypatch, served.url,
                  {"role": "vocabulary", "urls": [missing], "optional": True})
    cached = resolve_model("my-elmo").model_dir
    assert sorted(os.listdir(cached)) == [MANIFEST_FILE, "options.json", "weights.hdf5"]
    with open(os.path.join(cached, MANIFEST_FILE), encoding="utf-8") as handle:
        downloads = json.load(handle)["downloads"]
    assert downloads[-1] == {"role": "vocabulary", "url": None, "absent": f"{missing}: 404 "
                             "Not Found"}
    requests = len(served.requests)
    assert resolve_model("my-elmo").model_dir == cached and len(served.requests) == requests
    _user_catalog(tmp_path, monkeypatch, served.url,  # declared required: its absence fails
                  {"role": "vocabulary", "urls": [missing]})
    shutil.rmtree(cached)
    with pytest.raises(DownloadError, match=r"^cannot download my-elmo missing_vocab.txt: "):
        resolve_model("my-elmo")
    assert not os.path.exists(cached)
