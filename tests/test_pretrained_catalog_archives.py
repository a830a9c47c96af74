"""The catalog's archives of the published pair and its TF Hub modules, as the local mirror
serves their stand-ins: each bilm-tf archive lands under the folder and file names its entry's
`archive_contents` states (NorELMo's options.json + model.hdf5, EMBEDDIA's
slovenian/slovenian-elmo-weights.hdf5) and is found and checked as a model; a TF Hub module's
stand-in is a tar.gz of `./` entries, as tfhub.dev and Kaggle serve one."""

import io
import os
import tarfile
import zipfile

import pytest

import model_mirror
from keras_elmo.pretrained.catalog import load_catalog
from keras_elmo.pretrained.resolve import resolve_model

PAIR_ARCHIVES = {"polish-elmo": (["options.json", "weights.hdf5"], "."),
                 "norelmo-100": (["model.hdf5", "options.json"], "."),
                 "embeddia-elmo-sl": (["slovenian/options.json",
                                       "slovenian/slovenian-elmo-weights.hdf5"], "slovenian")}
MODULES = ["tfhub-elmo-3", "deeppavlov-elmo-ru-news"]


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    directory = tmp_path_factory.mktemp("mirror")
    written = model_mirror.write_mirror(str(directory), [*PAIR_ARCHIVES, *MODULES],
                                        catalog=load_catalog(user_file=""))
    return directory, written


def _members(data):
    if data[:2] == b"PK":
        return sorted(zipfile.ZipFile(io.BytesIO(data)).namelist())
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        return sorted(archive.getnames())


def test_a_pair_archive_holds_the_names_its_entry_states(mirror):
    _, written = mirror
    for name, (members, _) in PAIR_ARCHIVES.items():
        assert _members(written[name]["archive"]) == members, name


def test_a_tfhub_stand_in_is_a_tar_gz_of_dot_entries(mirror):
    _, written = mirror
    for name in MODULES:
        data = written[name]["archive"]
        assert data[:2] == b"\x1f\x8b", name  # gzip
        members = _members(data)
        assert members[0] == "." and all(m == "." or m.startswith("./") for m in members)
        assert {"./tfhub_module.pb", "./saved_model.pb", "./variables/variables.index"} <= set(
            members), name
    google, kaggle = load_catalog(user_file="").get("tfhub-elmo-3").files[0].urls
    directory, _ = mirror
    for url in (google, kaggle):  # the same module at both paths
        path = directory / model_mirror.mirror_path(url)
        assert path.read_bytes() == written["tfhub-elmo-3"]["archive"]


def test_a_pair_archive_is_downloaded_found_and_checked(mirror, tmp_path, monkeypatch):
    directory, _ = mirror
    with model_mirror.serving(directory, tmp_path / "cache", monkeypatch):
        for name, (members, folder) in PAIR_ARCHIVES.items():
            model_dir = resolve_model(name).model_dir
            root = os.path.join(tmp_path, "cache", "models", name)
            assert os.path.relpath(model_dir, root) == folder, name
            landed = sorted(n for n in os.listdir(model_dir) if not n.startswith("."))
            assert landed == sorted(os.path.basename(m) for m in members), name
