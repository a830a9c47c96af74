"""A local mirror of the published models for tests: tiny stand-ins at the upstream paths,
served over HTTP on 127.0.0.1 with ranges, ETags, a request log and faults on demand.

`write_mirror(directory, names)` writes, for each catalog model named, a tiny stand-in at
the path of each of its URLs (what `KERAS_ELMO_MIRROR=http://127.0.0.1:PORT` turns them
into): a tiny random published model (`BiLMOptions.tiny()`) for an options/weights pair, and
for an archive the ELMoForManyLangs fixture `tests/fixtures/efml/tiny_zip` packed as the
archive's name says (zip with the files at its top, as the NLPL repository's; tar.* with
one `NAME.model/` folder, as HIT-SCIR's). The stand-ins are not the catalog's models, whose
sizes the download checks against the entry's, so `write_mirror` also writes the stand-ins'
catalog (`STAND_IN_CATALOG`): the entries named, each stating its stand-in's sizes. A
`MirrorServer(directory)` serves that folder and, while it runs, points `KERAS_ELMO_CATALOG`
at the folder's stand-ins' catalog (when it has one):

    with MirrorServer(tmp_path / "mirror") as server:
        os.environ["KERAS_ELMO_MIRROR"] = server.url
        server.requests            # [(path, Range header or None), ...]
        server.faults["/x.hdf5"] = ("cut", 1000)   # first answer stops after 1000 bytes
        server.faults["/x.hdf5"] = ("status", 404) # or ("html",), ("hang", seconds),
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
            if file.role == "archive":
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
    path = os.path.join(directory, STAND_IN_CATALOG)
    models = {}
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as handle:
            models = json.load(handle)["models"]
    for entry in entries:
        fields = {key: getattr(entry, key) for key in (
            "title", "format", "language_name", "main", "training_data", "licence",
            "source_page", "note")}
        files = [{"role": f.role, "urls": list(f.urls), "size": f.size, "sha256": f.sha256,
                  "optional": f.optional} for f in entry.files]
        models[entry.name] = {"language": entry.language, "layout": entry.layout,
                              **fields, **facts[entry.layout], "files": files}
    with open(path, "w", encoding="utf-8") as handle:
        json.dump({"models": models}, handle, indent=1, ensure_ascii=False)


class MirrorServer:
    """Serves `directory` on 127.0.0.1 (module docstring); a context manager.

    Attributes:
        url: `http://127.0.0.1:PORT`.
        requests: list of `(path, Range header or None)`, in order.
        faults: dict path -> fault: `("cut", n)` the first answer sends n bytes then closes,
            `("status", code)`, `("html",)` an HTML page, `("hang", seconds)` no answer,
            `("slow", seconds)` the headers, then a pause before the body.
    """

    def __init__(self, directory):
        self.directory = os.fspath(directory)
        self._catalog = os.path.join(self.directory, STAND_IN_CATALOG)
        self._catalog_before = None
        self.requests = []
        self.faults = {}
        self._cut_done = set()
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
            fault = mirror.faults.get(path)
            if fault and fault[0] == "hang":
                time.sleep(fault[1])
                self.close_connection = True
                return
            if fault and fault[0] == "status":
                return self._plain(fault[1], b"no such file\n")
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

        def _plain(self, code, body, content_type="text/plain"):
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


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
