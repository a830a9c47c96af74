"""The documentation runs: every fenced ```bash and ```python block of README.md, docs/*.md
and examples/README.md, and the docstring examples of the public classes and functions.

Blocks run as written on tiny stand-in models and data (the rule is in `doc_blocks`); a
block marked `<!-- doc-test: skip (REASON) -->` is counted and its reason printed. A failing
block fails the test, naming the document and line."""

import contextlib
import doctest
import io

import pytest

import doc_blocks

#: Documents whose blocks train a biLM or export one (tens of seconds): slow.
SLOW = {"README.md", "docs/training.md", "docs/serving.md", "examples/README.md",
        "docs/migrating.md"}
#: Blocks run and skipped so far in this session, over all documents (printed with each).
TOTALS = {"ran": 0, "skipped": 0}

#: What a document's blocks leave in its working directory: checked after they ran.
WRITTEN = {
    "README.md": ["tagger.keras", "runs/pd/weights.hdf5", "runs/pd_raw_jieba/weights.hdf5",
                  "runs/pd/saved_model/1/saved_model.pb", "out/saved_model.pb",
                  "embeddings.hdf5", "top.hdf5", "elmo.hdf5", "converted/weights.hdf5"],
    "docs/migrating.md": ["serving/elmo/1/saved_model.pb", "elmo_layers.hdf5", "elmo_top.hdf5",
                          "elmo.hdf5", "token_embeddings.hdf5", "vocab.txt", "run/weights.hdf5"],
    "docs/training.md": ["runs/pd/weights.hdf5", "runs/reviews/weights.hdf5"],
    "docs/serving.md": ["serving/elmo/1/saved_model.pb", "serving/elmo/2/saved_model.pb"],
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


@pytest.mark.parametrize("document", [
    pytest.param(document, marks=[pytest.mark.slow] if document in SLOW else [])
    for document in doc_blocks.DOCUMENTS])
def test_document_blocks_run(document, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KERAS_ELMO_CACHE", str(tmp_path / ".cache"))  # jieba's segmentations
    blocks = doc_blocks.document_blocks(document)
    doc_blocks.make_workspace(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__doc_block__"}
    ran, skipped = [], []
    for block in blocks:
        if block.skip:
            skipped.append(block)
            continue
        if block.language == "python":
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    doc_blocks.run_python(block, namespace)
            except Exception as error:  # noqa: BLE001 - reported with the block's place
                pytest.fail(f"{block.where} failed: {type(error).__name__}: {error}\n"
                            f"{block.code}")
        else:
            code, output = doc_blocks.run_shell(block, str(tmp_path))
            assert code == 0, f"{block.where} failed (exit {code}):\n{block.code}\n{output}"
        ran.append(block)
    TOTALS["ran"] += len(ran)
    TOTALS["skipped"] += len(skipped)
    with capsys.disabled():
        print(f"\n{document}: {len(ran)} blocks ran, {len(skipped)} skipped (documents so far: "
              f"{TOTALS['ran']} ran, {TOTALS['skipped']} skipped)"
              + "".join(f"\n  skipped {block.where}: {block.skip}" for block in skipped))
    for path in WRITTEN.get(document, []):
        assert (tmp_path / path).exists(), f"{document}: its blocks did not write {path}"


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
