"""A local mirror of the published models for tests: tiny stand-ins at the upstream paths,
served over HTTP on 127.0.0.1 with ranges, ETags, a request log and faults on demand.

`write_mirror(directory, names)` writes, for each catalog model named, a tiny stand-in at
the path of each of its URLs (what `KERAS_ELMO_MIRROR=http://127.0.0.1:PORT` turns them
into): a tiny random published model (`BiLMOptions.tiny()`) for an options/weights pair, and
for an archive the ELMoForManyLangs fixture `tests/fixtures/efml/tiny_zip` packed as the
archive's name says (zip with the files at its top, as the NLPL repository's; tar.* with
one `NAME.model/` folder, as HIT-SCIR's); an archive of format bilm-tf holds the tiny
published model under the names its entry's `archive_contents` gives (`options.json`,
`model.hdf5`; `slovenian/...` in a tar); a TF Hub module (format tfhub-module) is the
fixture module of its publisher's naming (`TFHUB_FIXTURES`) packed as tfhub.dev and Kaggle
serve one: a tar.gz whose entries start `./`. The stand-ins are not the catalog's models, whose
sizes the download checks against the entry's, so `write_mirror` also writes the stand-ins'
catalog (`STAND_IN_CATALOG`): the entries named, each stating its stand-in's sizes. A
`MirrorServer(directory)` serves that folder and, while it runs, points `KERAS_ELMO_CATALOG`
at the folder's stand-ins' catalog (when it has one):

    with MirrorServer(tmp_path / "mirror") as server:
        os.environ["KERAS_ELMO_MIRROR"] = server.url
        server.requests            # [(path, Range header or None), ...]
        server.faults["/x.hdf5"] = ("cut", 1000)   # first answer stops after 1000 bytes
        server.faults["/x.hdf5"] = ("status", 404) # or ("status", 503, {"Retry-After":
                                                   # "1"}, 1): the first answer only,
                                                   # ("html",), ("hang", seconds),
                                                   # ("slow", seconds) before the body

Example:
    write_mirror("mirror", ["elmo-small", "efml-zhs"])
"""

import contextlib
import functools
import hashlib
import http.server
import io
import json
import os
import re
import tarfile
import threading
import time
import urllib.parse
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_CATALOG_VARIABLE = "KERAS_ELMO_CATALOG"
EFML_FIXTURE = os.path.join(ROOT, "tests", "fixtures", "efml", "tiny_zip")
#: Where the mirror holds `elmo-small`'s weights and options (its catalog URLs' paths).
SMALL_WEIGHTS = ("/allennlp/models/elmo/2x1024_128_2048cnn_1xhighway/"
                 "elmo_2x1024_128_2048cnn_1xhighway_weights.hdf5")
SMALL_OPTIONS = SMALL_WEIGHTS.replace("_weights.hdf5", "_options.json")
#: The stand-ins' catalog, in the mirror's folder (a name no catalog URL's path has).
STAND_IN_CATALOG = ".catalog.json"
#: The fixture TF1 Hub modules, by the catalog family whose variable names they follow.
TFHUB_FIXTURES = {"tfhub-google": os.path.join(ROOT, "tests", "fixtures", "tfhub", "google_elmo"),
                  "deeppavlov": os.path.join(ROOT, "tests", "fixtures", "tfhub",
                                             "deeppavlov_elmo")}
#: The EFML fixture files an archive holds (the others are the fixture's test data).
EFML_FILES = ("char.dic", "cnn_50_100_512_4096_sample.json", "config.json", "encoder.pkl",
              "token_embedder.pkl", "word.dic")


def tiny_published_model(directory, seed=7, options=None):
    """Writes a tiny random published model (options.json, weights.hdf5) into `directory`
    (Keras and TensorFlow load in this process); `options` default `BiLMOptions.tiny()`."""
    import keras

    import keras_elmo

    keras.utils.set_random_seed(seed)
    options = options or keras_elmo.BiLMOptions.tiny()
    keras_elmo.save_published(keras_elmo.BiLM(options), directory)
    return os.path.join(directory, "options.json"), os.path.join(directory, "weights.hdf5")


def efml_archive_bytes(name):
    """The EFML fixture as the archive `name` (`144.zip`, `zhs.model.tar.bz2`) holds it."""
    if name.endswith(".zip"):
        return _efml_archive("zip", None)
    return _efml_archive(name.rsplit(".", 1)[-1], name.split(".tar")[0])


@functools.lru_cache(maxsize=None)
def _efml_archive(compression, folder):
    """The fixture as a zip (files at its top) or a tar with one `folder`."""
    buffer = io.BytesIO()
    if compression == "zip":
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for file in EFML_FILES:
                archive.write(os.path.join(EFML_FIXTURE, file), file)
        return buffer.getvalue()
    mode = {"bz2": "w:bz2", "xz": "w:xz", "gz": "w:gz"}.get(compression, "w")
    with tarfile.open(fileobj=buffer, mode=mode) as archive:
        for file in EFML_FILES:
            archive.add(os.path.join(EFML_FIXTURE, file), f"{folder}/{file}")
    return buffer.getvalue()


def tfhub_archive_bytes(module_dir):
    """The TF1 Hub module `module_dir` as tfhub.dev (`?tf-hub-format=compressed`) and Kaggle
    Models serve one: a tar.gz of `./`, `./tfhub_module.pb`, `./variables/...`."""
    if not os.path.isfile(os.path.join(module_dir, "tfhub_module.pb")):
        raise FileNotFoundError(f"{module_dir}: no tfhub_module.pb; expected a fixture TF1 Hub "
                                "module (tests/fixtures/tfhub).")
    return _tfhub_archive(os.path.realpath(module_dir))


@functools.lru_cache(maxsize=None)
def _tfhub_archive(module_dir):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        archive.add(module_dir, ".", recursive=False)
        for folder, folders, files in sorted(os.walk(module_dir)):
            folders.sort()
            relative = os.path.relpath(folder, module_dir)
            for name in folders + sorted(files):
                path = os.path.join(folder, name)
                archive.add(path, "./" + os.path.normpath(os.path.join(relative, name)),
                            recursive=False)
    return buffer.getvalue()


def published_archive_bytes(model, name, contents):
    """The tiny published model `model` (options.json, weights.hdf5) as the archive `name`
    holds it, under the names of `contents` (an entry's `archive_contents`: the `*.json` and
    `*.hdf5` it names, folders included)."""
    names = re.findall(r"[\w./-]+\.(?:json|hdf5)", contents or "")
    json_name = next((n for n in names if n.endswith(".json")), "options.json")
    hdf5_name = next((n for n in names if n.endswith(".hdf5")), "weights.hdf5")
    members = ((os.path.join(model, "options.json"), json_name),
               (os.path.join(model, "weights.hdf5"), hdf5_name))
    buffer = io.BytesIO()
    if name.endswith(".zip"):
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for source, member in members:
                archive.write(source, member)
        return buffer.getvalue()
    mode = {"bz2": "w:bz2", "xz": "w:xz", "gz": "w:gz"}.get(name.rsplit(".", 1)[-1], "w")
    with tarfile.open(fileobj=buffer, mode=mode) as archive:
        for source, member in members:
            archive.add(source, member)
    return buffer.getvalue()


def mirror_path(url):
    """The path a catalog URL has on the mirror (`KERAS_ELMO_MIRROR` keeps paths)."""
    return urllib.parse.urlsplit(url).path.lstrip("/")


def write_mirror(directory, names, catalog=None):
    """Writes the stand-ins of the catalog models `names` under `directory` (module
    docstring); returns `{name: {role: bytes written}}`."""
    from keras_elmo.pretrained.catalog import load_catalog

    catalog = catalog or load_catalog()
    written = {}
    model = os.path.join(directory, ".tiny_model")
    if not os.path.isdir(model):
        tiny_published_model(model)
    for name in names:
        entry = catalog.get(name)
        written[name] = {}
        for file in entry.files:
            if file.role == "archive" and entry.format == "tfhub-module":
                data = tfhub_archive_bytes(TFHUB_FIXTURES[entry.family])
                content = {url: data for url in file.urls}
            elif file.role == "archive" and entry.format == "bilm-tf":
                content = {url: published_archive_bytes(
                    model, os.path.basename(mirror_path(url)), entry.archive_contents)
                           for url in file.urls}
            elif file.role == "archive":
                content = {url: efml_archive_bytes(os.path.basename(mirror_path(url)))
                           for url in file.urls}
            else:
                extension = "json" if file.role == "options" else "hdf5"
                source = os.path.join(model, f"{file.role}.{extension}")
                with open(source, "rb") as handle:
                    data = handle.read()
                content = {url: data for url in file.urls}
            for url, data in content.items():
                path = os.path.join(directory, mirror_path(url))
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "wb") as handle:
                    handle.write(data)
            written[name][file.role] = next(iter(content.values()))
    _write_stand_in_catalog(directory, [catalog.get(name) for name in names], model)
    return written


def _write_stand_in_catalog(directory, entries, model):
    """Adds `entries` to the stand-ins' catalog in `directory`, each stating the sizes of
    its stand-in (`model` for an options/weights pair, the EFML fixture for an archive)."""
    from keras_elmo.pretrained.model_check import check_model_dir

    facts = {"options+weights": check_model_dir(model, "the stand-in"),
             "archive": check_model_dir(EFML_FIXTURE, "the stand-in")}
    # An archive of the published pair holds the tiny model; a TF Hub module's stand-in
    # states no sizes (the module reader's own tests check its shapes).
    facts["bilm-tf archive"] = facts["options+weights"]
    facts["tfhub-module archive"] = {}
    path = os.path.join(directory, STAND_IN_CATALOG)
    models = {}
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as handle:
            models = json.load(handle)["models"]
    for entry in entries:
        fields = {key: getattr(entry, key) for key in (
            "title", "format", "language_name", "main", "training_data", "licence",
            "source_page", "note", "archive_contents")}
        files = [{"role": f.role, "urls": list(f.urls), "size": f.size, "sha256": f.sha256,
                  "optional": f.optional} for f in entry.files]
        models[entry.name] = {"language": entry.language, "layout": entry.layout,
                              **fields, **facts.get(f"{entry.format} {entry.layout}",
                                                    facts[entry.layout]), "files": files}
    with open(path, "w", encoding="utf-8") as handle:
        json.dump({"models": models}, handle, indent=1, ensure_ascii=False)


class MirrorServer:
    """Serves `directory` on 127.0.0.1 (module docstring); a context manager.

    Attributes:
        url: `http://127.0.0.1:PORT`.
        requests: list of `(path, Range header or None)`, in order.
        targets: list of the request targets as sent (path and query), in order.
        faults: dict path -> fault: `("cut", n)` the first answer sends n bytes then closes,
            `("status", code)`, `("status", code, headers)` with those headers
            (`{"Retry-After": "1"}`), `("status", code, headers, times)` for the first
            `times` requests only, `("html",)` an HTML page, `("hang", seconds)` no answer,
            `("slow", seconds)` the headers, then a pause before the body.
    """

    def __init__(self, directory):
        self.directory = os.fspath(directory)
        self._catalog = os.path.join(self.directory, STAND_IN_CATALOG)
        self._catalog_before = None
        self.requests = []
        self.targets = []
        self.faults = {}
        self._cut_done = set()
        self._status_count = {}
        handler = _handler(self)
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self):
        if os.path.isfile(self._catalog):  # the stand-ins' sizes (module docstring)
            self._catalog_before = (os.environ.get(_CATALOG_VARIABLE),)
            os.environ[_CATALOG_VARIABLE] = self._catalog
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()
        if self._catalog_before is not None:
            before, = self._catalog_before
            if before is None:
                os.environ.pop(_CATALOG_VARIABLE, None)
            else:
                os.environ[_CATALOG_VARIABLE] = before

    def paths(self):
        """The paths requested, in order."""
        return [path for path, _ in self.requests]


def _handler(mirror):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet
            pass

        def do_GET(self):  # noqa: N802 - http.server's name
            path = urllib.parse.urlsplit(self.path).path
            mirror.requests.append((path, self.headers.get("Range")))
            mirror.targets.append(self.path)
            fault = mirror.faults.get(path)
            if fault and fault[0] == "hang":
                time.sleep(fault[1])
                self.close_connection = True
                return
            if fault and fault[0] == "status" and _status_due(mirror, path, fault):
                return self._plain(fault[1], b"no such file\n",
                                   headers=fault[2] if len(fault) > 2 else None)
            if fault and fault[0] == "html":
                return self._plain(200, b"<!DOCTYPE html><html><body>Sign in</body></html>",
                                   "text/html; charset=utf-8")
            local = os.path.normpath(os.path.join(mirror.directory, path.lstrip("/")))
            if not local.startswith(mirror.directory + os.sep) or not os.path.isfile(local):
                return self._plain(404, b"not found\n")
            with open(local, "rb") as handle:
                data = handle.read()
            etag = '"' + hashlib.sha256(data).hexdigest()[:16] + '"'
            start = 0
            ranged = self.headers.get("Range")
            if_range = self.headers.get("If-Range")
            if ranged and ranged.startswith("bytes=") and (if_range in (None, etag)):
                start = int(ranged[len("bytes="):].split("-")[0])
            if start >= len(data) and start:
                return self._plain(416, b"")
            body = data[start:]
            self.send_response(206 if start else 200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("ETag", etag)
            if start:
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            self.end_headers()
            if fault and fault[0] == "slow":
                time.sleep(fault[1])
            if fault and fault[0] == "cut" and path not in mirror._cut_done:
                mirror._cut_done.add(path)
                self.wfile.write(body[:fault[1]])
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(body)

        def _plain(self, code, body, content_type="text/plain", headers=None):
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


def _status_due(mirror, path, fault):
    """Whether a `("status", code[, headers[, times]])` fault answers this request: always,
    or for the first `times` requests of `path` only (then the file is served)."""
    if len(fault) < 4:
        return True
    mirror._status_count[path] = mirror._status_count.get(path, 0) + 1
    return mirror._status_count[path] <= fault[3]


#: The variables of keras_elmo.pretrained a test starts without.
_VARIABLES = ("KERAS_ELMO_OFFLINE", "HF_HUB_OFFLINE", "KERAS_ELMO_CATALOG",
              "KERAS_ELMO_DOWNLOAD_TIMEOUT")


@contextlib.contextmanager
def serving(directory, cache_dir, monkeypatch):
    """A test's mirror: `MirrorServer(directory)` running, `KERAS_ELMO_MIRROR` at it,
    `KERAS_ELMO_CACHE` at `cache_dir`, the other variables unset and the retries' backoff
    short; yields the server."""
    from keras_elmo.pretrained import http_download

    monkeypatch.setenv("KERAS_ELMO_CACHE", str(cache_dir))
    for variable in _VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setattr(http_download, "BACKOFF_SECONDS", 0.01)
    with MirrorServer(directory) as server:
        monkeypatch.setenv("KERAS_ELMO_MIRROR", server.url)
        yield server


def served_fixtures(names, extra=None):
    """`(mirror_dir, served)`: the pytest fixtures most download tests use. `mirror_dir`
    (module scope) holds the stand-ins of the catalog models `names` (and what
    `extra(directory)` adds); `served` serves it with a fresh cache (`serving`).

    Example:
        mirror_dir, served = model_mirror.served_fixtures(["elmo-small"])
    """
    import pytest

    @pytest.fixture(scope="module")
    def mirror_dir(tmp_path_factory):
        directory = tmp_path_factory.mktemp("mirror")
        write_mirror(str(directory), names)
        if extra is not None:
            extra(directory)
        return directory

    @pytest.fixture
    def served(mirror_dir, tmp_path, monkeypatch):
        with serving(mirror_dir, tmp_path / "cache", monkeypatch) as server:
            yield server

    return mirror_dir, served


def left_in_cache(tmp_path):
    """Every file under a test's cache (`tmp_path/cache/models`) but the lock files."""
    root = os.path.join(tmp_path, "cache", "models")
    return sorted(os.path.relpath(os.path.join(d, n), root) for d, _, names in os.walk(root)
                  for n in names if ".locks" not in d)
