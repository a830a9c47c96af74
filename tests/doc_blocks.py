"""The fenced code blocks of the documentation, and running them as a user would.

Which blocks: every fenced ```bash / ```sh / ```shell and ```python block of README.md,
docs/*.md and examples/README.md. A block that cannot run here is marked in the document
itself, on the line right before its fence:

    <!-- doc-test: skip (REASON) -->

The substitution rule: a block is run as written; only the names of model directories and
files it reads stand for tiny ones, and the published models it names (`elmo-small`,
`efml-zhs`: the catalog's) download tiny stand-ins from a local mirror served on 127.0.0.1
(`tests/model_mirror.py`, through `KERAS_ELMO_MIRROR`; `local_model_mirror`). The harness makes, in the document's working directory,
under exactly the names the documents use (`STAND_IN_MODELS`, `STAND_IN_FILES`,
`STAND_IN_EFML`, `STAND_IN_TEXTS`): tiny random biLMs (`BiLMOptions.tiny()`, published layout, with a
vocab.txt) and a few sentences of text. A corpus of a few sentences also keeps every training
command short whatever its time limit: the preset's epochs end it in a few steps. Blocks of
one document run in order in one working directory (a later block reads what an earlier one
wrote, as a reader's shell would), python blocks in one namespace; `keras-elmo` commands run
in the document's process through the console script's entry point (`run_shell`).
`run_document` runs a whole document; `python tests/doc_blocks.py DOCUMENT DIRECTORY RESULT`
does it in a process of its own (the tests run two documents at a time so, each mostly on one
core) and writes its JSON report to RESULT.

Example:
    for block in document_blocks("README.md"):
        print(block.where, block.language, block.skip)
"""

import dataclasses
import doctest
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: The documents whose blocks run, relative to the repository.
DOCUMENTS = ("README.md",
             *sorted(os.path.join("docs", name) for name in os.listdir(os.path.join(ROOT, "docs"))
                     if name.endswith(".md")),
             os.path.join("examples", "README.md"))

#: Fence info string -> how the block runs. `python peer` / `bash peer` blocks are another
#: library's code, shown beside ours (docs/migrating.md): counted as skipped.
LANGUAGES = {"bash": "shell", "sh": "shell", "shell": "shell", "python": "python"}
PEER = "peer"

_FENCE = re.compile(r"^```(.*)$")
_SKIP = re.compile(r"^<!-- doc-test: skip \((.+)\) -->$")

#: Model directories the documents read: a tiny biLM each (options.json, weights.hdf5,
#: vocab.txt). Their vectors are 2P = 16 wide where the documents' comments show a
#: published model's 1024: comments are not checked.
STAND_IN_MODELS = ("model", "runs/people_daily_small", "runs/small")
#: Published-layout files under the names the documents give them: (options, weights).
STAND_IN_FILES = (("options.json", "weights.hdf5"),
                  ("elmo_options.json", "elmo_weights.hdf5"),
                  ("my_options.json", "my_weights.hdf5"),
                  ("elmo_2x4096_512_2048cnn_2xhighway_options.json",
                   "elmo_2x4096_512_2048cnn_2xhighway_weights.hdf5"))
#: ELMoForManyLangs model directories the documents read -> the fixture standing in for it.
STAND_IN_EFML = {"zhs.model": os.path.join(ROOT, "tests", "fixtures", "efml", "tiny_zip")}
#: Tokenised text (Chinese as People's Daily has it, and English).
SEGMENTED = ["他 在 会 上 发言 。", "人民 日报 发表 社论 。", "人民 日报 发表 新年 讲话 。", "我 爱 北京 天安门 。",
             "大会 开 了 很 久 。", "他 会 说 英语 。", "the cat sat on the mat .",
             "a dog ran to the red house ."]
#: Raw Chinese, no spaces (for --tokenizer jieba).
RAW = ["他在会上发言。", "江泽民主席发表新年讲话。", "我爱北京天安门。", "大会开了很久。",
       "他会说英语。", "她花了很多钱。"]
#: Text files the documents read -> their lines.
STAND_IN_TEXTS = {
    "sentences.txt": SEGMENTED,
    "train.txt": SEGMENTED * 2,
    "data/people_daily/train.txt": SEGMENTED * 2,
    "data/people_daily/heldout.txt": SEGMENTED[:3],
    "data/people_daily_raw/train.txt": RAW * 2,
    "data/people_daily_raw/heldout.txt": RAW[:3],
    "reviews.txt": SEGMENTED * 2,
    "reviews_heldout.txt": SEGMENTED[:2],
}


@dataclasses.dataclass
class Block:
    """One fenced block: `document` (repository-relative), `line` (of the opening fence,
    1-based), `language` ("shell" or "python"), `code`, `skip` (the reason, or None)."""

    document: str
    line: int
    language: str
    code: str
    skip: str = None

    @property
    def where(self):
        return f"{self.document}:{self.line}"


def document_blocks(document):
    """The runnable blocks of `document` (repository-relative path), in order; another
    library's blocks (`python peer`) come with `skip` set.

    Raises:
        ValueError: a fence left open, or a skip marker before no runnable block.
    """
    lines = open(os.path.join(ROOT, document), encoding="utf-8").read().splitlines()
    blocks, index = [], 0
    while index < len(lines):
        match = _FENCE.match(lines[index])
        if not match:
            if _SKIP.match(lines[index].strip()) and not (
                    index + 1 < len(lines) and _language(lines[index + 1])):
                raise ValueError(f"{document}:{index + 1}: a doc-test skip marker must be the "
                                 "line right before a ```bash or ```python fence.")
            index += 1
            continue
        end = next((k for k in range(index + 1, len(lines)) if lines[k].strip() == "```"), None)
        if end is None:
            raise ValueError(f"{document}:{index + 1}: fence never closed.")
        language, peer = _language(lines[index]), match.group(1).split()[1:] == [PEER]
        if language:
            marker = _SKIP.match(lines[index - 1].strip()) if index else None
            skip = ("another library's code, shown beside ours" if peer else
                    marker.group(1) if marker else None)
            blocks.append(Block(document, index + 1, language, "\n".join(lines[index + 1:end]),
                                skip))
        index = end + 1
    return blocks


def _language(line):
    """"shell" / "python" for the opening fence of a block that runs (or a peer's), else
    None."""
    match = _FENCE.match(line)
    words = match.group(1).split() if match else []
    if not words or words[1:] not in ([], [PEER]):
        return None
    return LANGUAGES.get(words[0])


def make_workspace(directory):
    """Writes the stand-ins (tiny models and texts, under the documents' names) into
    `directory`, with copies of the repository's examples/ and benchmarks/ (the documents
    run `python examples/...` from the repository's top; what they write stays here)."""
    import shutil

    import keras

    import keras_elmo

    keras.utils.set_random_seed(7)
    vocab = ["<S>", "</S>", "<UNK>"] + sorted({t for line in SEGMENTED for t in line.split()})
    first = os.path.join(directory, STAND_IN_MODELS[0])
    keras_elmo.save_published(keras_elmo.BiLM(keras_elmo.BiLMOptions.tiny()), first)
    with open(os.path.join(first, "vocab.txt"), "w", encoding="utf-8") as handle:
        handle.write("\n".join(vocab) + "\n")
    for name in STAND_IN_MODELS[1:]:
        shutil.copytree(first, os.path.join(directory, name))
    for options, weights in STAND_IN_FILES:
        shutil.copyfile(os.path.join(first, "options.json"), os.path.join(directory, options))
        shutil.copyfile(os.path.join(first, "weights.hdf5"), os.path.join(directory, weights))
    for name, fixture in STAND_IN_EFML.items():
        shutil.copytree(fixture, os.path.join(directory, name))
    for name, lines in STAND_IN_TEXTS.items():
        path = os.path.join(directory, name)
        os.makedirs(os.path.dirname(path) or directory, exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")
    for folder in ("examples", "benchmarks"):
        shutil.copytree(os.path.join(ROOT, folder), os.path.join(directory, folder),
                        ignore=shutil.ignore_patterns("__pycache__", "results"))


def shell_commands(code):
    """The commands of a shell block, as argv lists: continuation lines joined, comments
    dropped, `nice -n N` in front removed (a scheduling hint, nothing to test)."""
    import shlex

    commands = []
    for line in code.replace("\\\n", " ").splitlines():
        argv = shlex.split(line, comments=True)
        if argv[:1] == ["nice"] and argv[1:2] == ["-n"]:
            argv = argv[3:]
        if argv:
            commands.append(argv)
    return commands


#: Shell words that change the shell itself: a block using one runs in one bash process.
_SHELL_STATE = ("export", "cd", "source", ".", "set", "unset", "alias")
#: `KERAS_ELMO_NAME=value` in front of a command: one of keras-elmo's own settings, which it
#: reads from the environment when a command runs (keras_elmo/pretrained/settings.py), for
#: that command only; a value with `$` or a backquote is the shell's to expand.
_SETTING = re.compile(r"^(KERAS_ELMO_[A-Z0-9_]+)=([^$`]*)$")


def _settings_in_front(argv):
    """`(settings, rest)`: the `KERAS_ELMO_*=value` words leading the command `argv`, as a
    dict, and the words after them."""
    settings = {}
    while argv and (match := _SETTING.match(argv[0])):
        settings[match.group(1)] = match.group(2)
        argv = argv[1:]
    return settings, argv


def _changes_shell(argv):
    """True for a command that changes the shell or sets a variable for a command other
    than keras-elmo (its own settings in front of `keras-elmo` change nothing else)."""
    settings, rest = _settings_in_front(argv)
    if settings and rest[:1] == ["keras-elmo"]:
        return False
    return argv[0] in _SHELL_STATE or "=" in argv[0]


def run_shell(block, directory, timeout=900):
    """Runs a shell block in `directory` as a user's shell would; returns `(exit code,
    output)` of the first failing command (or `(0, output)`).

    `keras-elmo ARGS` runs in this process through `keras_elmo.cli.main.main(ARGS)`, the
    entry point of the console script (no second TensorFlow start-up per command), with
    the `KERAS_ELMO_*=value` settings in front of it in the environment while it runs; any
    other command runs in bash, with `python` this interpreter. A block that changes the
    shell (`export`, `cd`, `VAR=value` other than those settings) runs whole in one bash,
    `keras-elmo` then being `python -m keras_elmo.cli`."""
    import contextlib
    import io
    import shlex

    from keras_elmo.cli.main import main

    bin_dir = os.path.join(directory, ".bin")
    os.makedirs(bin_dir, exist_ok=True)
    for name, command in (("python", f'exec "{sys.executable}" "$@"'),
                          ("keras-elmo", f'exec "{sys.executable}" -m keras_elmo.cli "$@"')):
        path = os.path.join(bin_dir, name)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(f"#!/bin/sh\n{command}\n")
        os.chmod(path, 0o755)
    env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""),
               KERAS_ELMO_CACHE=os.path.join(directory, ".cache"))

    def bash(code):
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=directory, env=env,
                              capture_output=True, text=True, timeout=timeout)
        return done.returncode, done.stdout + done.stderr

    commands = shell_commands(block.code)
    if any(_changes_shell(argv) for argv in commands):
        return bash(block.code)
    output = io.StringIO()
    for argv in commands:
        settings, words = _settings_in_front(argv)
        if words[0] == "keras-elmo":
            argv = words
            with _environment(settings), contextlib.redirect_stdout(output), \
                    contextlib.redirect_stderr(output):
                try:
                    code = main(argv[1:])
                except SystemExit as exit_:  # argparse's errors
                    code = exit_.code
        else:
            code, text = bash(shlex.join(argv))
            output.write(text)
        if code:
            shown = [f"{name}={value}" for name, value in settings.items()] + argv
            return code, f"$ {shlex.join(shown)}\n{output.getvalue()[-3000:]}"
    return 0, output.getvalue()


def _environment(settings):
    """A context manager: `settings` (name -> value) in `os.environ` while it is entered,
    each variable's value before (or its absence) restored after."""
    import contextlib

    @contextlib.contextmanager
    def environment():
        before = {name: os.environ.get(name) for name in settings}
        os.environ.update(settings)
        try:
            yield
        finally:
            for name, value in before.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value

    return environment()


def run_python(block, namespace):
    """Runs a python block in `namespace` (the document's; the working directory is the
    caller's)."""
    exec(compile(block.code, block.where, "exec"), namespace)  # noqa: S102 - the doc's own code


def run_document(document, directory):
    """Writes the stand-ins into `directory` (`make_workspace`) and runs the blocks of
    `document` there in order, python blocks in one namespace, until one fails; the working
    directory and `KERAS_ELMO_CACHE` are the caller's to set (`directory`, and a folder in
    it). Returns `{"ran": [where], "skipped": [[where, reason]], "failure": None or the
    failing block's place, code and error}`."""
    blocks = document_blocks(document)
    make_workspace(directory)
    with local_model_mirror(directory):
        return _run_blocks(blocks, directory)


def _run_blocks(blocks, directory):
    """The loop of `run_document`."""
    import contextlib
    import io

    namespace = {"__name__": "__doc_block__"}
    report = {"ran": [], "skipped": [], "failure": None}
    for block in blocks:
        if block.skip:
            report["skipped"].append([block.where, block.skip])
            continue
        if block.language == "python":
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    run_python(block, namespace)
            except Exception as error:  # noqa: BLE001 - reported with the block's place
                report["failure"] = (f"{block.where} failed: {type(error).__name__}: {error}\n"
                                     f"{block.code}")
                return report
        else:
            code, output = run_shell(block, directory)
            if code:
                report["failure"] = f"{block.where} failed (exit {code}):\n{block.code}\n{output}"
                return report
        report["ran"].append(block.where)
    return report


def local_model_mirror(directory):
    """A context manager: tiny stand-ins of every catalog model at their upstream paths in
    `directory/.mirror`, served on 127.0.0.1, with `KERAS_ELMO_MIRROR` set to the server
    while it is entered (the substitution rule, for published models' names)."""
    import contextlib

    import model_mirror
    from keras_elmo.pretrained.catalog import load_catalog

    @contextlib.contextmanager
    def serving():
        folder = os.path.join(directory, ".mirror")
        model_mirror.write_mirror(folder, [entry.name for entry in load_catalog(user_file="")])
        before = os.environ.get("KERAS_ELMO_MIRROR")
        with model_mirror.MirrorServer(folder) as server:
            os.environ["KERAS_ELMO_MIRROR"] = server.url
            try:
                yield server
            finally:
                if before is None:
                    os.environ.pop("KERAS_ELMO_MIRROR", None)
                else:
                    os.environ["KERAS_ELMO_MIRROR"] = before

    return serving()


def _main(document, directory, result):
    """`run_document` in this process, in `directory`; its report as JSON in `result`."""
    import json

    os.environ["KERAS_ELMO_CACHE"] = os.path.join(directory, ".cache")  # jieba's segmentations
    os.chdir(directory)
    report = run_document(document, directory)
    with open(result + ".part", "w", encoding="utf-8") as handle:
        json.dump(report, handle)
    os.replace(result + ".part", result)


class ReprChecker(doctest.OutputChecker):
    """doctest's checker, reading `TensorShape([2, 3])` as `(2, 3)` and `np.int64(0)` as
    `0`: a docstring shows what a user sees of a shape or a number, not numpy's or
    TensorFlow's repr."""

    _SHAPE = re.compile(r"TensorShape\(\[([^\]]*)\]\)")
    _NUMBER = re.compile(r"np\.(?:int|uint|float|bool_)\w*\(([^()]*)\)")

    def check_output(self, want, got, optionflags):
        return super().check_output(self._plain(want), self._plain(got), optionflags)

    def _plain(self, text):
        text = self._SHAPE.sub(lambda m: "(" + m.group(1) + ("," if "," not in m.group(1)
                                                             and m.group(1) else "") + ")", text)
        return self._NUMBER.sub(r"\1", text)


def public_objects():
    """`(qualified name, object)` of every public class and function (`__all__` of
    keras_elmo and keras_elmo.export), in order."""
    import inspect

    import keras_elmo
    import keras_elmo.export

    return [(f"{package.__name__}.{name}", getattr(package, name))
            for package in (keras_elmo, keras_elmo.export) for name in package.__all__
            if inspect.isclass(getattr(package, name)) or inspect.isfunction(getattr(package, name))]


def docstring_tests(name, obj):
    """The doctests of `obj`'s own docstring, with the names of its module, numpy as np,
    tensorflow as tf, keras, keras_elmo and its public names in scope (as keras-hub's doc
    tests give theirs)."""
    import inspect

    import keras
    import numpy as np
    import tensorflow as tf

    import keras_elmo

    scope = dict(vars(inspect.getmodule(obj)))
    scope.update({public: getattr(keras_elmo, public) for public in keras_elmo.__all__})
    scope.update(np=np, tf=tf, keras=keras, keras_elmo=keras_elmo)
    return [test for test in doctest.DocTestFinder(recurse=False).find(obj, name, globs=scope)
            if test.examples]


if __name__ == "__main__":
    _main(*sys.argv[1:])
