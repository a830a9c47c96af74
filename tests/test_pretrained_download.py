"""Published models by name, fetched from a local mirror (no network): the cache, resume,
retries and mirrors, checksums, offline use, the lock, and one line for each failure.

Every test serves tiny stand-ins at the upstream paths (`model_mirror`) on 127.0.0.1 and
points `KERAS_ELMO_MIRROR` at them; the server counts the requests."""

import errno
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import model_mirror
from keras_elmo.pretrained.catalog import UnknownModelError
from keras_elmo.pretrained.fetch import OfflineError
from keras_elmo.pretrained.http_download import BadURLError, DownloadError
from keras_elmo.pretrained.model_cache import MANIFEST_FILE, CacheChangedError
from keras_elmo.pretrained.model_check import ModelCheckError
from keras_elmo.pretrained.resolve import download_model, resolve_model

SMALL_WEIGHTS, SMALL_OPTIONS = model_mirror.SMALL_WEIGHTS, model_mirror.SMALL_OPTIONS


@pytest.fixture(scope="module")
def mirror_dir(tmp_path_factory):
    """The stand-ins of a few catalog models, written once for the module."""
    directory = tmp_path_factory.mktemp("mirror")
    model_mirror.write_mirror(str(directory), ["elmo-small", "elmo-original", "efml-zhs",
                                               "efml-en"])
    return directory


@pytest.fixture
def served(mirror_dir, tmp_path, monkeypatch):
    """A server of the module's mirror, KERAS_ELMO_MIRROR and a fresh KERAS_ELMO_CACHE."""
    with model_mirror.serving(mirror_dir, tmp_path / "cache", monkeypatch) as server:
        yield server


def _cache(tmp_path):
    return tmp_path / "cache" / "models"


def _left_in_cache(tmp_path):
    """Every file under the cache but the lock files (which block nobody)."""
    root = _cache(tmp_path)
    return sorted(os.path.relpath(os.path.join(d, n), root) for d, _, names in os.walk(root)
                  for n in names if ".locks" not in d)


def _user_catalog(tmp_path, monkeypatch, entry, name="my-elmo"):
    path = tmp_path / "my_catalog.json"
    path.write_text(json.dumps({"models": {name: entry}}), encoding="utf-8")
    monkeypatch.setenv("KERAS_ELMO_CATALOG", str(path))
    return path


def _pair(urls_options, urls_weights, sha256=None, size=None):
    return {"language": "en", "layout": "options+weights", "files": [
        {"role": "options", "urls": urls_options, "size": None, "sha256": None},
        {"role": "weights", "urls": urls_weights, "size": size, "sha256": sha256}]}


def test_a_name_loads_and_embeds_as_the_same_files_given_as_a_directory(served, mirror_dir):
    import keras_elmo

    by_name = keras_elmo.load_bilm("elmo-small")
    by_dir = keras_elmo.load_bilm(str(mirror_dir / ".tiny_model"))
    ids = keras_elmo.batch_to_ids([["The", "cat", "sat"], ["Hello"]])
    np.testing.assert_array_equal(by_name(ids)["layers"], by_dir(ids)["layers"])
    efml = keras_elmo.load_bilm("efml-zhs")
    reference = keras_elmo.load_bilm(model_mirror.EFML_FIXTURE)
    sentences = [["北京", "欢迎", "你"], ["the", "cat"]]
    np.testing.assert_array_equal(efml(efml.batch_to_ids(sentences))["layers"],
                                  reference(reference.batch_to_ids(sentences))["layers"])
    by_preset = keras_elmo.BiLM.from_preset("elmo-small")
    np.testing.assert_array_equal(by_preset(ids)["layers"], by_dir(ids)["layers"])
    tokens = [["The", "cat", "sat"], ["Hello", "", ""]]
    elmo = keras_elmo.ElmoLayer.from_preset("elmo-small", num_output_representations=2)
    np.testing.assert_array_equal(
        elmo(np.array(tokens, object))[1],
        keras_elmo.ElmoLayer(by_dir, num_output_representations=2)(np.array(tokens, object))[1])
    embedder = keras_elmo.ElmoEmbedder("efml-en")
    np.testing.assert_array_equal(
        embedder.embed_sentence(["the", "cat"]),
        keras_elmo.ElmoEmbedder(model_mirror.EFML_FIXTURE).embed_sentence(["the", "cat"]))


def test_a_second_use_makes_no_request_and_the_files_are_the_mirrors(served, mirror_dir,
                                                                     tmp_path):
    first = resolve_model("elmo-small").model_dir
    assert served.paths() == [SMALL_OPTIONS, SMALL_WEIGHTS]
    assert resolve_model("elmo-small").model_dir == first == str(_cache(tmp_path) / "elmo-small")
    assert download_model("elmo-small") == first
    assert len(served.requests) == 2  # the cache only, checked against its manifest
    with open(os.path.join(first, "weights.hdf5"), "rb") as handle:
        assert handle.read() == (mirror_dir / SMALL_WEIGHTS.lstrip("/")).read_bytes()
    manifest = json.loads((_cache(tmp_path) / "elmo-small" / MANIFEST_FILE).read_text())
    assert [d["url"] for d in manifest["downloads"]] == [served.url + SMALL_OPTIONS,
                                                         served.url + SMALL_WEIGHTS]
    assert sorted(manifest["files"]) == ["options.json", "weights.hdf5"]
    assert _left_in_cache(tmp_path) == ["elmo-small/.keras-elmo-cache.json",
                                        "elmo-small/options.json", "elmo-small/weights.hdf5"]


def test_a_transfer_cut_in_the_middle_resumes_with_a_range_request(served, mirror_dir,
                                                                   tmp_path, capfd):
    served.faults[SMALL_WEIGHTS] = ("cut", 20000)
    path = resolve_model("elmo-small").model_dir
    weights = [r for r in served.requests if r[0] == SMALL_WEIGHTS]
    assert weights == [(SMALL_WEIGHTS, None), (SMALL_WEIGHTS, "bytes=20000-")]
    with open(os.path.join(path, "weights.hdf5"), "rb") as handle:
        assert handle.read() == (mirror_dir / SMALL_WEIGHTS.lstrip("/")).read_bytes()
    assert "resuming at 20 kB" in capfd.readouterr().err


def test_an_interrupted_download_resumes_in_the_next_process(served, mirror_dir, tmp_path):
    """A `.part` file left by a killed process (its record beside it) is continued."""
    data = (mirror_dir / SMALL_WEIGHTS.lstrip("/")).read_bytes()
    partial = _cache(tmp_path) / ".partial" / "elmo-small"
    partial.mkdir(parents=True)
    (partial / "weights.part").write_bytes(data[:30000])
    etag = '"' + __import__("hashlib").sha256(data).hexdigest()[:16] + '"'
    (partial / "weights.part.json").write_text(json.dumps(
        {"url": served.url + SMALL_WEIGHTS, "etag": etag, "last_modified": None}))
    path = resolve_model("elmo-small").model_dir
    assert (SMALL_WEIGHTS, "bytes=30000-") in served.requests
    with open(os.path.join(path, "weights.hdf5"), "rb") as handle:
        assert handle.read() == data
    assert not partial.exists()


def test_a_checksum_mismatch_is_one_line_and_nothing_stays(served, tmp_path, monkeypatch):
    _user_catalog(tmp_path, monkeypatch, _pair([served.url + SMALL_OPTIONS],
                                               [served.url + SMALL_WEIGHTS], sha256="0" * 64))
    with pytest.raises(DownloadError) as raised:
        resolve_model("my-elmo")
    line = str(raised.value)
    assert "\n" not in line and raised.value.exit_code == 75
    assert f"the catalog states {'0' * 64}" in line and "changed upstream (removed)" in line
    assert _left_in_cache(tmp_path) == []


def test_a_stated_size_that_differs_goes_to_the_next_url(served, tmp_path, monkeypatch):
    _user_catalog(tmp_path, monkeypatch, _pair([served.url + SMALL_OPTIONS],
                                               [served.url + SMALL_WEIGHTS], size=10))
    with pytest.raises(DownloadError, match="the catalog states 10 bytes"):
        resolve_model("my-elmo")
    assert _left_in_cache(tmp_path) == []


def test_a_404_on_the_primary_falls_to_the_mirror(served, tmp_path, monkeypatch):
    _user_catalog(tmp_path, monkeypatch, _pair(
        ["https://gone.example.org/x_options.json", served.url + SMALL_OPTIONS],
        ["https://gone.example.org/x_weights.hdf5", served.url + SMALL_WEIGHTS]))
    monkeypatch.delenv("KERAS_ELMO_MIRROR")  # the entry's own URLs, the first a 404 here
    served.faults["/x_weights.hdf5"] = ("status", 404)
    with model_mirror.MirrorServer(tmp_path) as gone:  # serves nothing: every path a 404
        entry = json.loads((tmp_path / "my_catalog.json").read_text())
        for file in entry["models"]["my-elmo"]["files"]:
            file["urls"][0] = file["urls"][0].replace("https://gone.example.org", gone.url)
        (tmp_path / "my_catalog.json").write_text(json.dumps(entry))
        path = resolve_model("my-elmo").model_dir
        assert gone.paths() == ["/x_options.json", "/x_weights.hdf5"]
    assert served.paths() == [SMALL_OPTIONS, SMALL_WEIGHTS]
    manifest = json.loads((_cache(tmp_path) / "my-elmo" / MANIFEST_FILE).read_text())
    assert [d["url"] for d in manifest["downloads"]] == [served.url + SMALL_OPTIONS,
                                                         served.url + SMALL_WEIGHTS]
    assert os.path.isfile(os.path.join(path, "weights.hdf5"))


def test_the_catalogs_second_url_serves_when_the_first_is_missing(served):
    """elmo-original's primary (path /allennlp/models/...) is missing on this mirror; its
    second URL (the virtual-hosted bucket, path /models/...) serves it."""
    primary = ("/allennlp/models/elmo/2x4096_512_2048cnn_2xhighway/"
               "elmo_2x4096_512_2048cnn_2xhighway_weights.hdf5")
    served.faults[primary] = ("status", 404)
    resolve_model("elmo-original")
    assert served.paths()[1:] == [primary, primary[len("/allennlp"):]]


def test_offline_with_and_without_the_model_cached(served, tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_ELMO_OFFLINE", "1")
    with pytest.raises(OfflineError) as raised:
        resolve_model("efml-zhs")
    line = str(raised.value)
    assert line.startswith("KERAS_ELMO_OFFLINE=1 (the cache only) and efml-zhs is not in the "
                           "cache") and "`keras-elmo models download efml-zhs`" in line
    assert served.requests == [] and _left_in_cache(tmp_path) == []
    monkeypatch.setenv("KERAS_ELMO_OFFLINE", "0")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # ours wins when set
    cached = resolve_model("efml-zhs").model_dir
    monkeypatch.delenv("KERAS_ELMO_OFFLINE")  # HF_HUB_OFFLINE=1 alone: offline too
    requests = len(served.requests)
    assert resolve_model("efml-zhs").model_dir == cached
    assert len(served.requests) == requests
    with pytest.raises(OfflineError, match=r"^HF_HUB_OFFLINE=1 \(the cache only\)"):
        resolve_model("efml-en")


def test_an_archive_unpacks_its_model_directory(served, tmp_path):
    zhs = resolve_model("efml-zhs").model_dir
    assert zhs == str(_cache(tmp_path) / "efml-zhs" / "zhs.model")
    en = resolve_model("efml-en").model_dir  # the NLPL zips: files at the top
    assert en == str(_cache(tmp_path) / "efml-en")
    assert sorted(os.listdir(zhs)) == sorted(model_mirror.EFML_FILES)
    assert not any(name.endswith((".part", ".zip", ".bz2")) for name in _left_in_cache(tmp_path))


def test_truncated_weights_are_refused_before_they_count_as_cached(served, mirror_dir,
                                                                   tmp_path, monkeypatch):
    data = (mirror_dir / SMALL_WEIGHTS.lstrip("/")).read_bytes()
    truncated = tmp_path / "truncated"
    (truncated / SMALL_WEIGHTS.lstrip("/")).parent.mkdir(parents=True)
    (truncated / SMALL_WEIGHTS.lstrip("/")).write_bytes(data[:len(data) // 2])
    (truncated / SMALL_OPTIONS.lstrip("/")).write_bytes(
        (mirror_dir / SMALL_OPTIONS.lstrip("/")).read_bytes())
    with model_mirror.MirrorServer(truncated) as server:
        monkeypatch.setenv("KERAS_ELMO_MIRROR", server.url)
        with pytest.raises(ModelCheckError) as raised:
            resolve_model("elmo-small")
    line = str(raised.value)
    assert "\n" not in line and raised.value.exit_code == 75
    assert line.startswith("the download of elmo-small is not a readable model: weight file ")
    assert "truncated file" in line and "nothing of it was kept" in line
    assert _left_in_cache(tmp_path) == []


def test_a_cached_file_changed_since_its_download_is_one_line(served, tmp_path):
    import hashlib

    path = resolve_model("elmo-small").model_dir
    weights = os.path.join(path, "weights.hdf5")
    before = hashlib.sha256(open(weights, "rb").read()).hexdigest()
    with open(weights, "r+b") as handle:
        handle.seek(100)
        handle.write(b"\0\1\2")
    after = hashlib.sha256(open(weights, "rb").read()).hexdigest()
    with pytest.raises(CacheChangedError) as raised:
        resolve_model("elmo-small")
    assert str(raised.value) == (
        f"the cached model elmo-small ({_cache(tmp_path) / 'elmo-small'}) changed since it was "
        f"downloaded: weights.hdf5 has sha256 {after[:16]}...; expected {before[:16]}... as "
        "downloaded; download it afresh with `keras-elmo models download elmo-small --force`.")
    assert download_model("elmo-small", force=True) == path
    assert resolve_model("elmo-small").model_dir == path  # whole again


def test_urls_as_allennlp_passes_them(served, tmp_path):
    local = resolve_model(options_file=served.url + SMALL_OPTIONS,
                          weight_file=served.url + SMALL_WEIGHTS)
    assert local.remote and os.path.basename(os.path.dirname(local.weight_file)).startswith(
        "url-")
    assert os.path.isfile(local.options_file) and os.path.isfile(local.weight_file)
    archive = resolve_model(served.url + "/zhs.model.tar.bz2")
    assert archive.model_dir.endswith("zhs.model") and archive.remote
    with pytest.raises(ValueError, match="go together as two URLs or two files"):
        resolve_model(options_file=served.url + SMALL_OPTIONS, weight_file="weights.hdf5")
    with pytest.raises(ValueError, match="names no archive; expected a \\*.zip"):
        resolve_model(served.url + SMALL_WEIGHTS)
    with pytest.raises(ValueError, match="has the scheme 's3'; expected http or https"):
        resolve_model("s3://bucket/model.zip")


def test_a_url_given_by_hand_is_looked_for_on_the_mirror_first(served, tmp_path, mirror_dir):
    s3 = "https://s3-us-west-2.amazonaws.com"
    local = resolve_model(options_file=s3 + SMALL_OPTIONS, weight_file=s3 + SMALL_WEIGHTS)
    assert served.paths() == [SMALL_OPTIONS, SMALL_WEIGHTS]  # the mirror's copies
    with model_mirror.MirrorServer(mirror_dir) as elsewhere:  # not on the mirror: as given
        served.faults["/zhs.model.tar.bz2"] = ("status", 404)
        archive = resolve_model(elsewhere.url + "/zhs.model.tar.bz2")
        assert elsewhere.paths() == ["/zhs.model.tar.bz2"]
    assert served.paths()[-1] == "/zhs.model.tar.bz2" and archive.model_dir.endswith("zhs.model")
    again = resolve_model(options_file=s3 + SMALL_OPTIONS, weight_file=s3 + SMALL_WEIGHTS)
    assert again == local and len(served.requests) == 3  # cached under the URLs' own key


def test_urls_offline_and_changed_say_what_to_do(served, tmp_path, monkeypatch):
    pair = {"options_file": served.url + SMALL_OPTIONS, "weight_file": served.url + SMALL_WEIGHTS}
    monkeypatch.setenv("KERAS_ELMO_OFFLINE", "1")
    with pytest.raises(OfflineError, match=r"download it where there is a network \(the same "
                                           r"command fetches it\) into the same cache"):
        resolve_model(**pair)
    monkeypatch.delenv("KERAS_ELMO_OFFLINE")
    weights = resolve_model(**pair).weight_file
    with open(weights, "ab") as handle:
        handle.write(b"more")
    with pytest.raises(CacheChangedError, match=r"weights.hdf5 is \d+ bytes; expected \d+ "
                                                r"bytes as downloaded; remove .*"
                                                r"url-[0-9a-f]{16} and run "
                                                r"the same command again.$"):
        resolve_model(**pair)


def test_a_url_answering_html_instead_of_the_file(served, tmp_path, monkeypatch):
    served.faults[SMALL_WEIGHTS] = ("html",)
    with pytest.raises(BadURLError) as raised:  # the user's own URL: exit 2
        resolve_model(options_file=served.url + SMALL_OPTIONS,
                      weight_file=served.url + SMALL_WEIGHTS)
    assert str(raised.value) == (
        f"cannot download elmo_2x1024_128_2048cnn_1xhighway_weights.hdf5: "
        f"{served.url}{SMALL_WEIGHTS}: answers "
        "an HTML page (text/html), not the file; check the URL (it must serve the file itself, "
        "not a page about it).")
    with pytest.raises(DownloadError, match="answers an HTML page"):  # a catalog URL: exit 75
        resolve_model("elmo-small")
    assert _left_in_cache(tmp_path) == []


def test_a_server_that_never_answers_is_a_named_timeout(served, tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_ELMO_DOWNLOAD_TIMEOUT", "0.3")
    served.faults[SMALL_OPTIONS] = ("hang", 3)
    with pytest.raises(DownloadError) as raised:
        resolve_model("elmo-small")
    host = served.url.split("//")[1]
    assert str(raised.value) == (
        f"cannot download elmo-small elmo_2x1024_128_2048cnn_1xhighway_options.json: "
        f"{served.url}{SMALL_OPTIONS}: no answer from {host} within 0.3 s "
        "(KERAS_ELMO_DOWNLOAD_TIMEOUT) (3 attempts); run the same command again later (a "
        "partial download resumes), or set KERAS_ELMO_MIRROR to a mirror that holds the file.")
    assert served.paths() == [SMALL_OPTIONS] * 3 and _left_in_cache(tmp_path) == []


def test_a_dead_host_goes_to_the_next_url_at_once(served, tmp_path, monkeypatch):
    import socket

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}"
    _user_catalog(tmp_path, monkeypatch, _pair([dead + "/o.json"], [dead + "/w.hdf5"]))
    monkeypatch.delenv("KERAS_ELMO_MIRROR")
    with pytest.raises(DownloadError, match=r"/o.json: 127.0.0.1:\d+ refused the connection; "):
        resolve_model("my-elmo")


def test_an_unknown_name_lists_the_nearest_names(served):
    with pytest.raises(UnknownModelError) as raised:
        resolve_model("zhs.model")
    assert str(raised.value).startswith("unknown model 'zhs.model': it is neither a directory "
                                        "nor a name of the catalog; nearest names: efml-zhs;")
    with pytest.raises(UnknownModelError, match="nearest names: elmo-small, "):
        download_model("elmo-smal")
    assert served.requests == []


def test_a_local_directory_wins_over_a_name(served, tmp_path, monkeypatch, mirror_dir):
    import shutil

    monkeypatch.chdir(tmp_path)
    shutil.copytree(mirror_dir / ".tiny_model", tmp_path / "elmo-small")
    assert resolve_model("elmo-small").model_dir == "elmo-small"
    assert served.requests == []


def test_a_cache_that_cannot_be_written_is_the_storage_line(served, tmp_path, monkeypatch):
    from keras_elmo.process.storage_errors import StorageError

    real = os.makedirs

    def refuse(path, *args, **kwargs):
        if str(path).startswith(str(tmp_path / "cache")):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "makedirs", refuse)
    with pytest.raises(StorageError) as raised:
        resolve_model("elmo-small")
    root = _cache(tmp_path)
    assert str(raised.value) == (
        f"cannot write the model cache ({root}): permission denied; nothing of it was kept; "
        f"allow writing in {root.parent} (or write elsewhere) and run the same command again "
        "(KERAS_ELMO_CACHE=DIR puts the model cache elsewhere).")
    assert raised.value.exit_code == 75 and served.requests == []


_RACER = textwrap.dedent("""
    import os, sys, time
    from keras_elmo.pretrained.resolve import resolve_model
    barrier, me = sys.argv[1], sys.argv[2]
    open(os.path.join(barrier, me), "w").close()  # past the imports: ready
    while len(os.listdir(barrier)) < 2:  # both are, however slow the machine
        time.sleep(0.005)
    print(resolve_model("efml-zhs").model_dir)
    import keras_elmo
    bilm = keras_elmo.load_bilm("efml-zhs")
    print(bilm.output_dim)
""")


@pytest.mark.slow
def test_two_processes_racing_for_a_model_download_it_once_and_both_load(served, tmp_path):
    served.faults["/zhs.model.tar.bz2"] = ("slow", 0.5)
    barrier = tmp_path / "ready"
    barrier.mkdir()
    racers = [subprocess.Popen([sys.executable, "-c", _RACER, str(barrier), str(n)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for n in range(2)]
    outputs = [racer.communicate(timeout=300) for racer in racers]
    assert [racer.returncode for racer in racers] == [0, 0], [err[-2000:] for _, err in outputs]
    directories = {out.split()[0] for out, _ in outputs}
    assert directories == {str(_cache(tmp_path) / "efml-zhs" / "zhs.model")}
    assert [out.split()[1] for out, _ in outputs] == ["32", "32"]  # the fixture's 2P
    assert served.paths() == ["/zhs.model.tar.bz2"]  # one download
    waited = [err for _, err in outputs if "keras-elmo: waiting for pid" in err]
    assert len(waited) == 1 and "which is downloading efml-zhs" in waited[0]
