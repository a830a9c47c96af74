"""`keras-elmo models` and model names on the command line: the listing, `models download`,
`embed NAME`, `embed --runner NAME` (each worker fetches into its own cache), and each bad
input as one line on stderr with exit 2 (the user's mistake) or 75 (a rerun may succeed),
nothing half-written in the cache."""

import os

import pytest

import model_mirror
import small_filesystem
from keras_elmo.cli.main import main

SMALL_WEIGHTS, SMALL_OPTIONS = model_mirror.SMALL_WEIGHTS, model_mirror.SMALL_OPTIONS


@pytest.fixture(scope="module")
def mirror_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("mirror")
    model_mirror.write_mirror(str(directory), ["elmo-small", "efml-zhs"])
    return directory


@pytest.fixture
def served(mirror_dir, tmp_path, monkeypatch):
    """The module's mirror served, a fresh cache, and a text file in the working folder."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.txt").write_text("the cat sat\n北京 欢迎 你\n", encoding="utf-8")
    with model_mirror.serving(mirror_dir, tmp_path / "cache", monkeypatch) as server:
        yield server


def _run(capsys, *argv):
    """`(exit code, stdout, stderr lines)` of `keras-elmo ARGV` in this process."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, [line for line in err.splitlines() if line.strip()]


def _cached(tmp_path):
    root = tmp_path / "cache" / "models"
    return sorted(n for n in os.listdir(root) if not n.startswith(".")) if root.exists() else []


def test_models_lists_the_catalog_and_what_is_cached(served, tmp_path, capsys, monkeypatch):
    stand_ins = os.environ.pop("KERAS_ELMO_CATALOG")  # the package's catalog, listed
    code, out, err = _run(capsys, "models")
    monkeypatch.setenv("KERAS_ELMO_CATALOG", stand_ins)  # the stand-ins' sizes, downloaded
    lines = out.splitlines()
    assert code == 0 and err == []
    assert lines[0].split() == ["NAME", "LANGUAGE", "FORMAT", "LSTM/PROJ", "OUTPUT", "PARAMS",
                                "SIZE", "CACHED"]
    assert lines[1].split() == ["elmo-small", "en", "bilm-tf", "1024/128", "256", "13.6M", "?",
                                "no"]
    rows = {line.split()[0]: line.split() for line in lines[1:] if line.strip()}
    assert rows["tfhub-elmo-3"] == ["tfhub-elmo-3", "en", "tfhub-module", "?/512", "1024", "?",
                                    "?", "no"]
    assert rows["efml-zhs"][2] == "elmoformanylangs" and rows["norelmo-100"][2] == "bilm-tf"
    assert f"65 models, 0 cached in {tmp_path / 'cache' / 'models'}" in out
    code, out, err = _run(capsys, "models", "download", "elmo-small", "efml-zhs")
    assert code == 0 and out.splitlines() == [
        f"elmo-small: {tmp_path / 'cache' / 'models' / 'elmo-small'}",
        f"efml-zhs: {tmp_path / 'cache' / 'models' / 'efml-zhs' / 'zhs.model'}"]
    assert "downloading efml-zhs zhs.model.tar.bz2" in "\n".join(err)
    code, out, err = _run(capsys, "models", "--language", "zh")
    rows = [line.split() for line in out.splitlines()[1:3]]
    assert rows[0][:2] == ["efml-zht", "zh-Hant"] and rows[0][-1] == "no"
    assert rows[1][:2] == ["efml-zhs", "zh-Hans"] and rows[1][-1] != "no"  # its size on disk
    assert rows[0][-2:] == ["?", "no"]  # no size stated, none recorded
    assert rows[1][-3] in ("B", "kB", "MB")  # SIZE "125 kB" (recorded), CACHED "138 kB"
    requests = len(served.requests)
    code, out, err = _run(capsys, "models", "download", "--quiet", "efml-zhs")
    assert (code, out.strip(), err) == (
        0, str(tmp_path / "cache" / "models" / "efml-zhs" / "zhs.model"), [])
    assert len(served.requests) == requests
    code, _, err = _run(capsys, "models", "--language", "xx")
    assert code == 2 and len(err) == 1 and "no model of language 'xx'; expected one of" in err[0]


def test_embed_takes_a_name(served, tmp_path, capsys):
    import h5py

    code, out, err = _run(capsys, "embed", "elmo-small", "in.txt", "out.hdf5", "--top")
    assert code == 0, err
    with h5py.File(tmp_path / "out.hdf5", "r") as handle:
        assert handle["0"].shape == (3, 16)
    assert served.paths() == [SMALL_OPTIONS, SMALL_WEIGHTS]


def test_embed_runner_passes_the_name_and_each_worker_fetches_it(served, tmp_path, capsys,
                                                                 monkeypatch):
    from keras_elmo.embedding import beam_pipeline
    from keras_elmo.embedding.beam_worker import EmbeddingSettings, EmbeddingWorker

    pytest.importorskip("apache_beam")
    captured = {}

    def run_pipeline(input_pattern, output_dir, settings, options, **kwargs):
        captured["settings"] = settings
        raise ValueError("stopped here")

    monkeypatch.setattr(beam_pipeline, "run_pipeline", run_pipeline)
    code, _, err = _run(capsys, "embed", "efml-zhs", "in.txt", "shards", "--runner",
                        "DirectRunner", "--num-workers", "1")
    assert code == 2 and "stopped here" in err[-1]
    settings = captured["settings"]
    assert (settings.model_dir, settings.options_file, settings.weight_file) == (
        "efml-zhs", None, None)  # the name: no path of this machine
    monkeypatch.setenv("KERAS_ELMO_CACHE", str(tmp_path / "worker_cache"))  # another machine
    worker = EmbeddingWorker(EmbeddingSettings(model_dir="efml-zhs", output_format="top"))
    assert worker.embedder.bilm.output_dim == 32
    assert os.path.isdir(tmp_path / "worker_cache" / "models" / "efml-zhs" / "zhs.model")


@pytest.mark.parametrize("argv, fault, code, expected", [
    (["embed", "elmo-smal", "in.txt", "out.hdf5"], None, 2,
     "keras-elmo embed: error: unknown model 'elmo-smal': it is neither a directory nor a name "
     "of the catalog; nearest names: elmo-small, "),
    (["embed", "in.txt", "out.hdf5", "--options", "{url}" + SMALL_OPTIONS, "--weights",
      "{url}" + SMALL_WEIGHTS], {SMALL_WEIGHTS: ("html",)}, 2,
     "keras-elmo embed: error: cannot download elmo_2x1024_128_2048cnn_1xhighway_weights.hdf5: "
     "{url}" + SMALL_WEIGHTS + ": answers an HTML page (text/html), not the file; check the URL"),
    (["embed", "elmo-small", "in.txt", "out.hdf5"], {SMALL_OPTIONS: ("hang", 3)}, 75,
     "keras-elmo embed: error: cannot download elmo-small "
     "elmo_2x1024_128_2048cnn_1xhighway_options.json: {url}" + SMALL_OPTIONS + ": no answer from "
     "{host} within 0.2 s (KERAS_ELMO_DOWNLOAD_TIMEOUT) (3 attempts); run the same command again "
     "later"),
    (["models", "download", "efml-zhs"], {"/zhs.model.tar.bz2": ("status", 404),
                                          "/zhs.model.tar.xz": ("status", 503)}, 75,
     "keras-elmo models: error: cannot download efml-zhs zhs.model.tar.bz2: "
     "{url}/zhs.model.tar.bz2: 404 Not Found; {url}/zhs.model.tar.xz: 503 Service "
     "Unavailable (3 attempts); run the same command again later (a partial download "
     "resumes), or set KERAS_ELMO_MIRROR to a mirror that holds the file."),
    (["export", "http://127.0.0.1:9/model.hdf5", "out"], None, 2,
     "keras-elmo export: error: the model URL http://127.0.0.1:9/model.hdf5 names no archive"),
])
def test_bad_input_is_one_line_with_its_exit_code(served, tmp_path, capsys, monkeypatch, argv,
                                                  fault, code, expected):
    monkeypatch.setenv("KERAS_ELMO_DOWNLOAD_TIMEOUT", "0.2")
    served.faults.update(fault or {})
    host = served.url.split("//")[1]
    got, out, err = _run(capsys, *[a.format(url=served.url) for a in argv])
    assert got == code, err
    assert [line for line in err if line.startswith("keras-elmo")] == err[-1:], err
    line = err[-1]
    assert line.startswith(expected.format(url=served.url, host=host)), line
    assert _cached(tmp_path) == [] and not (tmp_path / "out.hdf5").exists()


def test_offline_without_the_model_is_one_line(served, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("KERAS_ELMO_OFFLINE", "1")
    code, _, err = _run(capsys, "neighbors", "efml-zhs", "北京 欢迎 你", "--word", "北京",
                        "--corpus", "in.txt")
    assert code == 2 and err == [
        "keras-elmo neighbors: error: KERAS_ELMO_OFFLINE=1 (the cache only) and efml-zhs is not "
        f"in the cache ({tmp_path / 'cache' / 'models' / 'efml-zhs'}); download it where there "
        "is a network with `keras-elmo models download efml-zhs` into the same cache "
        "(KERAS_ELMO_CACHE), or unset KERAS_ELMO_OFFLINE."]
    assert served.requests == []


def test_a_bad_variable_is_one_line(served, capsys, monkeypatch):
    monkeypatch.setenv("KERAS_ELMO_MIRROR", "artifacts.example")
    code, _, err = _run(capsys, "models", "download", "elmo-small")
    assert code == 2 and err == [
        "keras-elmo models: error: KERAS_ELMO_MIRROR='artifacts.example' is not a mirror URL; "
        "expected http(s)://HOST[:PORT][/PATH], whose path goes in front of each catalog URL's "
        "path."]


@pytest.mark.skipif(small_filesystem.unavailable() is not None,
                    reason=str(small_filesystem.unavailable()))
def test_a_full_disk_and_a_read_only_cache_are_the_storage_line(served, tmp_path, capsys,
                                                                 monkeypatch):
    from keras_elmo.process.file_lock import host_name  # this process's .part file

    with small_filesystem.small_filesystem(tmp_path / "disk", size_kib=1024) as disk:
        monkeypatch.setenv("KERAS_ELMO_CACHE", disk.path)
        disk.leave_free(24 * 1024)
        code, _, err = _run(capsys, "models", "download", "elmo-small")
        assert code == 75 and len(err) == 3, err  # options' two progress lines, then it
        assert err[-1].startswith(
            "keras-elmo models: error: cannot write elmo-small "
            "elmo_2x1024_128_2048cnn_1xhighway_weights.hdf5 "
            f"({disk.path}/models/.partial/elmo-small/weights.{os.getpid()}@{host_name()}.part):"
            " no space left on device "
            "(needs at least 48 kB, ")
        assert "free " in err[-1] and err[-1].endswith(
            "run the same command again (KERAS_ELMO_CACHE=DIR puts the model cache elsewhere).")
        assert [e for e in disk.entries() if not e.startswith("models/.")] == ["models"]
        disk.remove_filler()
        disk.remount("ro")
        try:
            code, _, err = _run(capsys, "models", "download", "efml-zhs")
        finally:
            disk.remount("rw")
        assert code == 75 and err == [
            f"keras-elmo models: error: cannot write the model cache ({disk.path}/models): "
            "read-only file system; nothing of it was kept; make that filesystem writable (or "
            "write elsewhere) and run the same command again (KERAS_ELMO_CACHE=DIR puts the "
            "model cache elsewhere)."]


def test_a_refused_archive_is_one_line_and_nothing_stays(served, tmp_path, capsys, monkeypatch):
    import io
    import tarfile

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:bz2") as archive:
        info = tarfile.TarInfo("zhs.model/../../../escaped.txt")
        info.size = 5
        archive.addfile(info, io.BytesIO(b"owned"))
    evil = tmp_path / "evil"
    evil.mkdir()
    (evil / "zhs.model.tar.bz2").write_bytes(buffer.getvalue())
    with model_mirror.MirrorServer(evil) as server:
        monkeypatch.setenv("KERAS_ELMO_MIRROR", server.url)
        code, _, err = _run(capsys, "models", "download", "efml-zhs")
    assert code == 2 and err[-1] == (
        "keras-elmo models: error: refused to unpack the archive of efml-zhs "
        "(zhs.model.tar.bz2): member 'zhs.model/../../../escaped.txt' climbs out with '..'; "
        "a model archive holds regular files and folders inside its own folder only, so "
        "nothing of it was kept (use the model's published archive).")
    assert not any(name == "escaped.txt" for _, _, names in os.walk(tmp_path) for name in names)
    assert _cached(tmp_path) == []
    assert os.listdir(tmp_path / "cache" / "models" / ".partial") == []
