"""Bad paths and inputs are found before TensorFlow starts: every subcommand that takes files
refuses a missing, unreadable, empty or mis-encoded input, or an output it could not write,
in one line, with TensorFlow never imported (`"tensorflow" not in sys.modules` when the line
comes) and no weight loaded. An empty `embed` input is said on stderr; a file that is not
UTF-8 is named by its 1-based line, with the `iconv` command that converts it."""

import json
import os
import re
import shlex
import subprocess
import sys

import h5py
import pytest

import weight_fixtures
from keras_elmo.cli.main import main
from small_filesystem import small_filesystem, unavailable

# Runs each argv through the command line in one fresh interpreter (this one has imported
# TensorFlow already) and reports, per argv, the exit code, stderr and whether TensorFlow
# was imported by then (once imported it stays: the first case that imports it is named).
_PROBE = r"""
import contextlib, io, json, sys, time
from keras_elmo.cli.main import main
results = []
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    results.append({"code": code, "err": err.getvalue(), "tensorflow": "tensorflow" in sys.modules,
                    "seconds": round(time.perf_counter() - start, 2)})
print(json.dumps(results))
"""

#: name -> (argv with {model}, {run}, {tmp} placeholders, the fragment its line holds).
CASES = {
    "export_out_is_a_file": (["export", "{model}", "{tmp}/empty.txt"],
                             "export path {tmp}/empty.txt is a file"),
    "export_out_not_empty": (["export", "{model}", "{tmp}/full"],
                             "export path {tmp}/full already exists and is not empty"),
    "export_version_under_a_file": (["export", "{model}", "{tmp}/empty.txt", "--version", "1"],
                                    "{tmp}/empty.txt is a file"),
    "export_mix_missing": (["export", "{model}", "{tmp}/sm", "--mix-weights", "{tmp}/no.json"],
                           "mix weights file not found: {tmp}/no.json"),
    "export_mix_not_json": (["export", "{model}", "{tmp}/sm", "--mix-weights", "{tmp}/ok.txt"],
                            "mix weights file {tmp}/ok.txt is not valid JSON"),
    "embed_input_gbk": (["embed", "{model}", "{tmp}/gbk.txt", "{tmp}/e.hdf5"],
                        "{tmp}/gbk.txt, line 2: not UTF-8"),
    "embed_vocab_gbk": (["embed", "{model}", "{tmp}/ok.txt", "{tmp}/e.hdf5", "--vocab",
                         "{tmp}/gbk.txt"], "{tmp}/gbk.txt, line 2: not UTF-8"),
    "embed_mix_not_json": (["embed", "{model}", "{tmp}/ok.txt", "{tmp}/e.hdf5",
                            "--mix-weights", "{tmp}/ok.txt"],
                           "mix weights file {tmp}/ok.txt is not valid JSON"),
    "neighbors_empty_corpus": (["neighbors", "{model}", "a b", "--word", "a", "--corpus",
                                "{tmp}/empty.txt"], "corpus {tmp}/empty.txt has no tokens"),
    "neighbors_blank_corpus": (["neighbors", "{model}", "a b", "--word", "a", "--corpus",
                                "{tmp}/blank.txt"], "corpus {tmp}/blank.txt has no tokens"),
    "neighbors_vocab_gbk": (["neighbors", "{model}", "a b", "--word", "a", "--corpus",
                             "{tmp}/ok.txt", "--vocab", "{tmp}/gbk.txt"],
                            "{tmp}/gbk.txt, line 2: not UTF-8"),
    "perplexity_empty_heldout": (["perplexity", "{run}", "--heldout", "{tmp}/empty.txt"],
                                 "the held-out files ['{tmp}/empty.txt'] contain no token"),
    "perplexity_no_vocabulary": (["perplexity", "{model}", "--heldout", "{tmp}/ok.txt"],
                                 "{model}/vocab.txt not found"),
    "perplexity_no_checkpoint": (["perplexity", "{run}", "--heldout", "{tmp}/ok.txt"],
                                 "no checkpoint in {run}/checkpoints"),
    "train_empty_corpus": (["train", "{tmp}/r1", "--train", "{tmp}/blank.txt", "--vocab",
                            "{tmp}/vocab.txt", "--size", "tiny"],
                           "the training corpus {tmp}/blank.txt holds no token"),
    "train_empty_heldout": (["train", "{tmp}/r2", "--train", "{tmp}/ok.txt", "--vocab",
                             "{tmp}/vocab.txt", "--size", "tiny", "--max-steps", "1",
                             "--heldout", "{tmp}/empty.txt"],
                            "the held-out files ['{tmp}/empty.txt'] contain no token"),
    "train_empty_vocabulary": (["train", "{tmp}/r3", "--train", "{tmp}/ok.txt", "--vocab",
                                "{tmp}/empty.txt", "--size", "tiny"],
                               "expected at least the 3 special tokens"),
    "train_config_not_json": (["train", "{tmp}/r4", "--train", "{tmp}/ok.txt", "--vocab",
                               "{tmp}/vocab.txt", "--config", "{tmp}/ok.txt"],
                              "--config file {tmp}/ok.txt is not valid JSON"),
    "train_model_dir_under_a_file": (["train", "{tmp}/empty.txt/run", "--train",
                                      "{tmp}/ok.txt", "--vocab", "{tmp}/vocab.txt"],
                                     "{tmp}/empty.txt is a file"),
    "vocab_out_under_a_file": (["vocab", "--train", "{tmp}/ok.txt", "--out",
                                "{tmp}/empty.txt/vocab.txt"], "{tmp}/empty.txt is a file"),
}


def _inputs(tmp, model_dir):
    """The files the cases read: a model directory, a run without a checkpoint, and text."""
    (tmp / "empty.txt").write_bytes(b"")
    (tmp / "blank.txt").write_text("\n  \n\u3000\n", encoding="utf-8")
    (tmp / "ok.txt").write_text("a b\nb a\n", encoding="utf-8")
    (tmp / "gbk.txt").write_bytes("a b\n人民 日报\n".encode("gbk"))
    (tmp / "vocab.txt").write_text("<S>\n</S>\n<UNK>\na\nb\n", encoding="utf-8")
    (tmp / "full").mkdir()
    (tmp / "full" / "saved_model.pb").write_bytes(b"an earlier export")
    run = tmp / "run"
    run.mkdir()
    with open(os.path.join(model_dir, "options.json"), encoding="utf-8") as handle:
        (run / "options.json").write_text(handle.read(), encoding="utf-8")
    (run / "vocab.txt").write_text("<S>\n</S>\n<UNK>\na\nb\n", encoding="utf-8")
    return {"model": model_dir, "run": str(run), "tmp": str(tmp)}


def _model_dir(directory):
    """A tiny published-layout model directory (options.json, weights.hdf5), no TensorFlow."""
    options = weight_fixtures.make_options()
    weight_fixtures.write_model_dir(str(directory), options,
                                    weight_fixtures.random_weight_arrays(options, seed=0))
    return str(directory)


def _probe(argvs):
    """`_PROBE` over `argvs`: one result dict per argv."""
    done = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(argvs)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    """Every case run once, in one interpreter: name -> (result, expected fragment, the
    first case that imported TensorFlow)."""
    tmp = tmp_path_factory.mktemp("inputs")
    places = _inputs(tmp, _model_dir(tmp / "model"))
    argvs = [[word.format(**places) for word in argv] for argv, _ in CASES.values()]
    results = _probe(argvs)
    first = next((name for name, result in zip(CASES, results) if result["tensorflow"]), None)
    return {name: (result, fragment.format(**places), first)
            for (name, (_, fragment)), result in zip(CASES.items(), results)}


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_input_is_one_line_before_tensorflow_starts(probe, case):
    result, fragment, first = probe[case]
    lines = result["err"].strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("keras-elmo "), lines
    assert " error: " in lines[0] and fragment in lines[0], (fragment, lines)
    assert result["code"] == 2, result
    assert not result["tensorflow"], f"TensorFlow was imported (first by the case {first})"


@pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))
def test_a_read_only_output_is_refused_before_tensorflow_starts(tmp_path):
    model = _model_dir(tmp_path / "model")
    text, vocab = tmp_path / "in.txt", tmp_path / "vocab.txt"
    text.write_text("a b\n", encoding="utf-8")
    vocab.write_text("<S>\n</S>\n<UNK>\na\nb\n", encoding="utf-8")
    with small_filesystem(tmp_path / "disk", size_kib=256) as disk:
        disk.remount("ro")
        try:
            results = _probe([
                ["export", model, os.path.join(disk.path, "sm"), "--version", "1"],
                ["embed", model, str(text), os.path.join(disk.path, "e.hdf5")],
                ["train", os.path.join(disk.path, "run"), "--train", str(text), "--vocab",
                 str(vocab)]])
        finally:
            disk.remount("rw")
    for result, what in zip(results, ("the SavedModel", "the ELMo vectors",
                                      "the model directory")):
        line = result["err"].strip()
        assert result["code"] == 75 and len(line.splitlines()) == 1, result
        assert f"cannot write {what} ({disk.path}/" in line, line
        assert "read-only file system; nothing was written" in line, line
        assert not result["tensorflow"], result


def test_a_folder_without_write_permission_is_refused_before_the_corpus_is_read(
        tmp_path, monkeypatch, capsys):
    text = tmp_path / "in.txt"
    text.write_text("a b\n", encoding="utf-8")
    out = tmp_path / "vocab.txt"
    read = []
    monkeypatch.setattr("keras_elmo.training.vocabulary.read_text_lines",
                        lambda path: read.append(path) or iter(()))
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kwargs: False if os.path.samefile(
        path, tmp_path) else real_access(path, mode, **kwargs))  # as for a user without rights
    assert main(["vocab", "--train", str(text), "--out", str(out)]) == 75
    line = capsys.readouterr().err.strip()
    assert line == (f"keras-elmo vocab: error: cannot write the vocabulary ({out}): permission "
                    f"denied; nothing was written; allow writing in {tmp_path} (or write "
                    "elsewhere) and run the same command again."), line
    assert read == [] and not out.exists()


# --- an empty input to embed ------------------------------------------------------------

@pytest.mark.parametrize("content, said", [
    (b"", "has no sentences (0 lines); writing {out} all the same, without datasets"),
    (b"\n \n", "has no tokens (2 blank lines); writing {out} all the same: 2 zero-length "
                "datasets"),
])
def test_embed_says_an_input_without_tokens_on_stderr(tmp_path, capsys, content, said):
    model = _model_dir(tmp_path / "model")
    text, out = tmp_path / "in.txt", tmp_path / "out.hdf5"
    text.write_bytes(content)
    assert main(["embed", model, str(text), str(out), "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [
        f"keras-elmo embed: warning: {text} {said.format(out=out)}."], captured.err
    lines = content.count(b"\n")
    with h5py.File(out, "r") as handle:
        assert sorted(handle) == sorted([str(i) for i in range(lines)] + ["sentence_to_index"])
        assert all(handle[str(i)].shape == (3, 0, 16) for i in range(lines))
    # --quiet prints nothing on success, this line included
    assert main(["embed", model, str(text), str(out), "--quiet"]) == 0
    assert capsys.readouterr().err == ""


# --- a file that is not UTF-8 ------------------------------------------------------------

def test_a_gbk_file_is_named_by_its_line_with_the_iconv_command(tmp_path, capsys):
    model = _model_dir(tmp_path / "model")
    text = tmp_path / "新闻.txt"
    text.write_bytes("a b\n人民 日报 。\n".encode("gbk"))
    assert main(["embed", model, str(text), str(tmp_path / "o.hdf5")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    quoted, converted = shlex.quote(str(text)), shlex.quote(f"{text}.utf8")
    assert lines == [
        f"keras-elmo embed: error: {text}, line 2: not UTF-8 (invalid continuation byte at "
        "byte 0 of token b'\\xc8\\xcb\\xc3\\xf1'); expected UTF-8 text, one sentence per "
        "line (invalid bytes are refused, never dropped); if it is GBK/GB18030 (Chinese), "
        f"convert it: iconv -f GB18030 -t UTF-8 {quoted} > {converted}"], lines
    assert not re.search(r"sentence \d", lines[0])  # one numbering: the line's


def test_the_hint_fits_the_bytes(tmp_path):
    from keras_elmo.text.text_files import check_utf8

    utf16 = tmp_path / "utf16.txt"
    utf16.write_bytes("人民 日报\n".encode("utf-16"))
    with pytest.raises(ValueError, match=r"line 1: not UTF-8 .* it starts with a UTF-16 byte "
                                         r"order mark: iconv -f UTF-16 -t UTF-8 "):
        check_utf8([str(utf16)])
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("ok\ncafé au lait\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"line 2: not UTF-8 .* convert it from its "
                                         r"encoding: iconv -f ENCODING -t UTF-8 "):
        check_utf8([str(latin1)])
