"""The documentation runs: every fenced ```bash and ```python block of README.md, docs/*.md
and examples/README.md, and the docstring examples of the public classes and functions.

Blocks run as written on tiny stand-in models and data (the rule is in `doc_blocks`); a
block marked `<!-- doc-test: skip (REASON) -->` is counted and its reason printed. A failing
block fails the test, naming the document and line. Each document runs in a process of its
own, PARALLEL at a time, from the module's first test on (`DocumentRuns`): while they run,
the module's other tests (the docstring examples among them) run here."""

import doctest
import json
import os
import subprocess
import sys
import threading

import pytest

import doc_blocks

#: Documents whose blocks train a biLM or export one (tens of seconds): slow.
SLOW = {"README.md", "docs/training.md", "docs/serving.md", "examples/README.md",
        "docs/migrating.md", "docs/embedding_beam.md", "docs/pretrained.md"}
#: Blocks run and skipped so far in this session, over all documents (printed with each).
TOTALS = {"ran": 0, "skipped": 0}
#: Documents run at once, each in a process of its own that is mostly tracing, on one core.
PARALLEL = 2
#: Seconds a document's process may take.
DOCUMENT_TIMEOUT = 1800

#: What a document's blocks leave in its working directory: checked after they ran.
WRITTEN = {
    "README.md": ["tagger.keras", "runs/pd/weights.hdf5",
                  "runs/pd/saved_model/1/saved_model.pb", "out/saved_model.pb",
                  "embeddings.hdf5", "top.hdf5", "elmo.hdf5", "converted/weights.hdf5",
                  "elmo_en.hdf5", "zhs_elmo.hdf5", "serving/zhs/1/saved_model.pb",
                  "runs/zhs_reviews/weights.hdf5", "runs/zhs_reviews/word.dic",
                  ".cache/models/elmo-small/weights.hdf5",
                  ".cache/models/efml-zhs/zhs.model/encoder.pkl"],
    "docs/migrating.md": ["serving/elmo/1/saved_model.pb", "elmo_layers.hdf5", "elmo_top.hdf5",
                          "elmo.hdf5", "token_embeddings.hdf5", "vocab.txt", "run/weights.hdf5"],
    "docs/training.md": ["runs/pd/weights.hdf5", "runs/reviews/weights.hdf5"],
    "docs/serving.md": ["serving/elmo/1/saved_model.pb", "serving/elmo/2/saved_model.pb"],
    "docs/embedding_beam.md": ["shards/manifest.json", "shards_top/manifest.json"],
    "docs/pretrained.md": ["elmo_small.hdf5", "serving/elmo_small/1/saved_model.pb",
                           "runs/reviews_small/weights.hdf5", "shards_zhs/manifest.json",
                           "zhs_offline.hdf5", "my_models.json", "my_elmo.hdf5",
                           "elmo.hdf5", "german.hdf5",
                           ".cache/models/efml-de/encoder.pkl"],
    "examples/README.md": ["elmo.hdf5", "mixed.hdf5", "data/people_daily_raw/vocab.txt",
                           "runs/pd_raw_jieba/weights.hdf5"],
}


def test_every_document_has_blocks_and_every_skip_a_reason():
    counts = {document: doc_blocks.document_blocks(document)
              for document in doc_blocks.DOCUMENTS}
    assert {"README.md", "docs/training.md", "docs/performance.md",
            "examples/README.md"} <= set(counts)
    for document, blocks in counts.items():
        for block in blocks:
            assert block.skip is None or block.skip.strip(), block.where
    readme = counts["README.md"]
    assert sum(block.skip is None for block in readme) >= 8  # the README's own code runs


def test_every_subcommand_runs_in_a_document():
    """Each `keras-elmo` subcommand has an example that runs (`data` needs the network: it
    runs with a faked download in tests/test_cli_argument_order.py)."""
    from keras_elmo.cli.main import COMMANDS

    ran, skipped = set(), set()
    for document in doc_blocks.DOCUMENTS:
        for block in doc_blocks.document_blocks(document):
            if block.language == "shell":
                names = {argv[1] for argv in doc_blocks.shell_commands(block.code)
                         if argv[0] == "keras-elmo" and len(argv) > 1}
                (skipped if block.skip else ran).update(names)
    assert set(COMMANDS) - {"data"} <= ran, set(COMMANDS) - ran
    assert "data" in skipped


def _cli_docstring_commands():
    """`(module, argv)` of every `keras-elmo` line in the docstrings of cli/*.py."""
    import glob
    import os
    import shlex

    commands = []
    for path in sorted(glob.glob(os.path.join(doc_blocks.ROOT, "cli", "[a-z]*.py"))):
        module = "keras_elmo.cli." + os.path.basename(path)[:-3]
        doc = __import__(module, fromlist=["_"]).__doc__ or ""
        for line in doc.replace("\\\n", " ").splitlines():
            if line.strip().startswith("keras-elmo "):
                commands.append((module, shlex.split(line, comments=True)))
    return commands


@pytest.mark.parametrize("module, argv", _cli_docstring_commands(),
                         ids=[" ".join(argv[1:3]) for _, argv in _cli_docstring_commands()])
def test_cli_docstring_examples_parse(module, argv):
    """The command lines of the cli modules' docstrings are valid as written (what they do
    runs in the documents' blocks above, on the same commands)."""
    from keras_elmo.cli.main import build_parser

    if argv[1:] == ["--help"]:
        return
    args, unknown = build_parser().parse_known_args(argv[1:])
    assert unknown == [], (module, argv)
    assert args.command == argv[1]


def test_a_skip_marker_must_stand_right_before_a_fence(tmp_path, monkeypatch):
    (tmp_path / "doc.md").write_text("<!-- doc-test: skip (GPU) -->\n\n```bash\nls\n```\n")
    monkeypatch.setattr(doc_blocks, "ROOT", str(tmp_path))
    with pytest.raises(ValueError, match="doc.md:1: a doc-test skip marker"):
        doc_blocks.document_blocks("doc.md")
    (tmp_path / "doc.md").write_text("<!-- doc-test: skip (GPU) -->\n```bash\nls\n```\n"
                                     "```python peer\nimport allennlp\n```\n```python\n1\n```\n")
    blocks = doc_blocks.document_blocks("doc.md")
    assert [(b.line, b.language, b.skip) for b in blocks] == [
        (2, "shell", "GPU"), (5, "python", "another library's code, shown beside ours"),
        (8, "python", None)]


def test_every_public_class_and_function_has_a_docstring_example():
    missing = [name for name, obj in doc_blocks.public_objects()
               if not doc_blocks.docstring_tests(name, obj)]
    assert not missing, f"public names without a `>>>` example in their docstring: {missing}"


@pytest.mark.parametrize("name, obj", doc_blocks.public_objects(),
                         ids=[name for name, _ in doc_blocks.public_objects()])
def test_docstring_examples_run(name, obj, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    tests = doc_blocks.docstring_tests(name, obj)
    runner = doctest.DocTestRunner(checker=doc_blocks.ReprChecker(),
                                   optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report = []
    for test in tests:
        runner.run(test, out=report.append)
    results = runner.summarize(verbose=False)
    assert results.failed == 0, "".join(report)


class DocumentRuns:
    """Runs each of `documents` in a process of its own (`doc_blocks.py`, in its folder of
    `root`), `PARALLEL` at a time, in order, from when it is made; `report(document)` waits
    for a document's report (`doc_blocks.run_document`)."""

    def __init__(self, documents, root):
        self.directories = {document: root / f"document{index}"
                            for index, document in enumerate(documents)}
        self._queue = list(documents)
        self._reports = {}
        self._done = {document: threading.Event() for document in documents}
        self._processes = []
        self._lock = threading.Lock()
        self._stopped = False
        self._workers = [threading.Thread(target=self._work, daemon=True)
                         for _ in range(min(PARALLEL, len(documents)))]
        for worker in self._workers:
            worker.start()

    def report(self, document):
        self._done[document].wait()
        return self._reports[document]

    def stop(self):
        """Ends the processes still running and waits for the workers."""
        with self._lock:
            self._stopped = True
            for process in self._processes:
                if process.poll() is None:
                    process.kill()
        for worker in self._workers:
            worker.join()

    def _next(self):
        with self._lock:
            return self._queue.pop(0) if self._queue and not self._stopped else None

    def _work(self):
        while (document := self._next()) is not None:
            directory = self.directories[document]
            directory.mkdir()
            result = directory.parent / f"{directory.name}.json"
            with self._lock:
                process = subprocess.Popen(
                    [sys.executable, os.path.abspath(doc_blocks.__file__), document,
                     str(directory), str(result)], cwd=str(directory), stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                self._processes.append(process)
                if self._stopped:  # stopped while it started
                    process.kill()
            try:
                _, err = process.communicate(timeout=DOCUMENT_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                _, err = process.communicate()
            if result.exists():
                with open(result, encoding="utf-8") as handle:
                    self._reports[document] = json.load(handle)
            else:
                self._reports[document] = {"ran": [], "skipped": [], "failure": (
                    f"{document}: its process ended (exit {process.returncode}) without a "
                    f"report:\n{err[-3000:]}")}
            self._done[document].set()


@pytest.fixture(scope="module", autouse=True)
def document_runs(request, tmp_path_factory):
    """The documents of the `test_document_blocks_run` cases selected in this session,
    started when the module's first test runs."""
    documents = [item.callspec.params["document"] for item in request.session.items
                 if item.module is request.module
                 and item.originalname == "test_document_blocks_run"]
    runs = DocumentRuns(documents, tmp_path_factory.mktemp("documents"))
    yield runs
    runs.stop()


@pytest.mark.parametrize("document", [
    pytest.param(document, marks=[pytest.mark.slow] if document in SLOW else [])
    for document in doc_blocks.DOCUMENTS])
def test_document_blocks_run(document, document_runs, capsys):
    report = document_runs.report(document)
    if report["failure"]:
        pytest.fail(report["failure"], pytrace=False)
    ran, skipped = report["ran"], report["skipped"]
    TOTALS["ran"] += len(ran)
    TOTALS["skipped"] += len(skipped)
    with capsys.disabled():
        print(f"\n{document}: {len(ran)} blocks ran, {len(skipped)} skipped (documents so far: "
              f"{TOTALS['ran']} ran, {TOTALS['skipped']} skipped)"
              + "".join(f"\n  skipped {where}: {reason}" for where, reason in skipped))
    directory = document_runs.directories[document]
    for path in WRITTEN.get(document, []):
        assert (directory / path).exists(), f"{document}: its blocks did not write {path}"
