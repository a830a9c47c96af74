"""A cached model is checked by its files' stat at every use and hashed only when the stat
changed (or `keras-elmo models verify` asks): what is recorded at landing, what a second use
reads, a file changed behind the cache's back (mtime touched, or put back with `os.utime`:
the ctime tells), a copied file (new inode: hashed once, then recorded), an old manifest
without stat records, and the `verify` action's lines and exit status."""

import hashlib
import json
import os
import shutil

import pytest

import model_mirror
from keras_elmo.cli.main import main
from keras_elmo.pretrained import model_cache
from keras_elmo.pretrained.model_cache import MANIFEST_FILE, CacheChangedError
from keras_elmo.pretrained.resolve import resolve_model


mirror_dir, served = model_mirror.served_fixtures(["elmo-small"])


@pytest.fixture
def hashed(monkeypatch):
    """The files `model_cache` hashes, in order."""
    seen = []
    real = model_cache.file_sha256

    def counting(path):
        seen.append(os.path.basename(path))
        return real(path)

    monkeypatch.setattr(model_cache, "file_sha256", counting)
    return seen


def _manifest(model_dir):
    with open(os.path.join(model_dir, MANIFEST_FILE), encoding="utf-8") as handle:
        return json.load(handle)


def _sha(path):
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def test_landing_records_each_files_stat_and_a_second_use_hashes_nothing(served, hashed):
    path = resolve_model("elmo-small").model_dir
    files = _manifest(path)["files"]
    assert sorted(files) == ["options.json", "weights.hdf5"]
    for name, record in files.items():
        status = os.stat(os.path.join(path, name))
        assert record["stat"] == {"size": status.st_size, "mtime_ns": status.st_mtime_ns,
                                  "ctime_ns": status.st_ctime_ns, "inode": status.st_ino}
    hashed.clear()
    assert resolve_model("elmo-small").model_dir == path
    assert hashed == []


def test_same_size_new_content_and_a_touched_mtime_is_caught(served, tmp_path):
    path = resolve_model("elmo-small").model_dir
    weights = os.path.join(path, "weights.hdf5")
    expected = _sha(weights)
    with open(weights, "r+b") as handle:
        handle.seek(2000)
        handle.write(b"\xff\xfe\xfd\xfc")
    with pytest.raises(CacheChangedError) as raised:
        resolve_model("elmo-small")
    line = str(raised.value)
    assert "\n" not in line
    assert line == (f"the cached model elmo-small ({tmp_path / 'cache' / 'models' / 'elmo-small'})"
                    f" changed since it was downloaded: weights.hdf5 has sha256 "
                    f"{_sha(weights)[:16]}...; expected {expected[:16]}... as downloaded; "
                    "download it afresh with `keras-elmo models download elmo-small --force`.")


def test_new_content_with_the_mtime_put_back_is_caught_by_the_ctime(served):
    path = resolve_model("elmo-small").model_dir
    weights = os.path.join(path, "weights.hdf5")
    recorded = _manifest(path)["files"]["weights.hdf5"]["stat"]
    with open(weights, "r+b") as handle:
        handle.seek(3000)
        handle.write(b"\x01\x02\x03\x04")
    os.utime(weights, ns=(recorded["mtime_ns"], recorded["mtime_ns"]))
    status = os.stat(weights)
    # what a size + mtime check sees is unchanged; the inode too (written in place)
    assert (status.st_size, status.st_mtime_ns, status.st_ino) == (
        recorded["size"], recorded["mtime_ns"], recorded["inode"])
    assert status.st_ctime_ns != recorded["ctime_ns"]
    with pytest.raises(CacheChangedError, match="weights.hdf5 has sha256 .* as downloaded"):
        resolve_model("elmo-small")


def test_a_file_replaced_by_an_identical_copy_is_hashed_once_then_recorded(served, hashed,
                                                                          tmp_path):
    """A new inode (a restored backup, `cp` then `mv`): hashed, found intact, its new stat
    recorded; the next use hashes nothing."""
    path = resolve_model("elmo-small").model_dir
    weights = os.path.join(path, "weights.hdf5")
    copy = tmp_path / "copy.hdf5"
    shutil.copyfile(weights, copy)
    os.replace(copy, weights)
    hashed.clear()
    resolve_model("elmo-small")
    assert hashed == ["weights.hdf5"]
    assert _manifest(path)["files"]["weights.hdf5"]["stat"]["inode"] == os.stat(weights).st_ino
    hashed.clear()
    resolve_model("elmo-small")
    assert hashed == []


def test_an_old_manifest_without_stat_records_is_hashed_once_then_recorded(served, hashed):
    path = resolve_model("elmo-small").model_dir
    manifest = _manifest(path)
    for record in manifest["files"].values():
        del record["stat"]
    with open(os.path.join(path, MANIFEST_FILE), "w", encoding="utf-8") as handle:
        json.dump(manifest, handle)
    hashed.clear()
    resolve_model("elmo-small")  # no error
    assert sorted(hashed) == ["options.json", "weights.hdf5"]
    assert all("stat" in r for r in _manifest(path)["files"].values())
    hashed.clear()
    resolve_model("elmo-small")
    assert hashed == []


def test_a_read_only_cache_is_hashed_and_not_written(served, hashed, monkeypatch):
    """Recording the new stat needs the lock and a rename; a cache that cannot be written
    is still checked, hashed at each use, with no error."""
    path = resolve_model("elmo-small").model_dir
    os.utime(os.path.join(path, "options.json"))  # a touched file: stat differs
    before = _manifest(path)

    def read_only(*args, **kwargs):
        raise PermissionError(13, "Read-only file system")

    monkeypatch.setattr("keras_elmo.process.atomic_file.atomic_writer", read_only)
    hashed.clear()
    resolve_model("elmo-small")
    assert hashed == ["options.json"]
    assert _manifest(path) == before


def test_models_verify_rehashes_in_full_and_names_each_model(served, hashed, capsys):
    path = resolve_model("elmo-small").model_dir
    capsys.readouterr()
    hashed.clear()
    assert main(["models", "verify", "elmo-small"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and out[0].startswith("elmo-small: intact, 2 files, ")
    assert out[0].endswith(f" ({path})")
    assert sorted(hashed) == ["options.json", "weights.hdf5"]  # in full, stat unchanged

    weights = os.path.join(path, "weights.hdf5")
    with open(weights, "r+b") as handle:
        handle.seek(500)
        handle.write(b"\x00\x00\x00\x07")
    assert main(["models", "verify", "elmo-small", "elmo-original"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2
    assert out[0].startswith("elmo-small: the cached model elmo-small (")
    assert "weights.hdf5 has sha256 " in out[0] and out[0].endswith("--force`.")
    assert out[1].startswith("elmo-original: not in the cache (")
    assert out[1].endswith("expected a model downloaded there "
                           "(`keras-elmo models download elmo-original`).")


def test_models_verify_of_an_unknown_name_is_one_line(served, capsys):
    assert main(["models", "verify", "elmo-smal"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown model 'elmo-smal'" in err
