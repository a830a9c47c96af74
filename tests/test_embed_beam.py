"""`keras-elmo embed --runner`: the embedder as an Apache Beam pipeline.

The union of the shards equals the single-process `embed` of the concatenated input (two
worker processes of the DirectRunner; a bundle that fails once and is retried); every
sentence once, keyed by its position over the sorted files; the manifest; the plan and the
reading of the shards; the check that refuses a missing or repeated index; the `PTransform`
of a user's pipeline; and, without Apache Beam, one line saying what to install (no Beam
import by `import keras_elmo` or by `embed` without `--runner`)."""

import json
import os
import subprocess
import sys

import h5py
import numpy as np
import pytest

import keras
import keras_elmo
from keras_elmo.cli.main import main
from keras_elmo.process import cpu_setup

beam = pytest.importorskip("apache_beam")

from keras_elmo.embedding import beam_shards  # noqa: E402 - needs Apache Beam
from keras_elmo.embedding.beam_pipeline import EmbedSentences  # noqa: E402
from keras_elmo.embedding.beam_worker import EmbeddingSettings, embedding_worker  # noqa: E402

ATOL = 1e-5
#: Three input files (sorted: a, b, c) with empty lines, repeats across files, a line longer
#: than `--max-length 4` (windows), a CRLF line ending and a last line without a newline.
FILES = {
    "part-b.txt": "人民 日报 发表 社论 。\n\nthe cat sat\n他 在 会 上 发言 。\r\n" * 3,
    "part-a.txt": "the cat sat\n a dog ran to the red house today  \n我 爱 北京 天安门 。\n" * 4,
    "part-c.txt": "新年 讲话\n\nthe cat sat\nx y z w v u t s r q p o",
}
#: Flags of both runs: small batches and windows, so that the shards batch differently.
FLAGS = ["--max-length", "4", "--batch-size", "4", "--no-token-cache", "--no-progress"]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    keras.utils.set_random_seed(3)
    directory = str(tmp_path_factory.mktemp("model"))
    keras_elmo.save_published(keras_elmo.BiLM(keras_elmo.BiLMOptions.tiny()), directory)
    return directory


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """The input folder, and the single-process `embed` of the files' concatenation."""
    folder = tmp_path_factory.mktemp("corpus")
    for name, text in FILES.items():
        (folder / name).write_bytes(text.encode("utf-8"))
    together = "".join(text if text.endswith("\n") else text + "\n"
                       for _, text in sorted(FILES.items()))
    (folder.parent / "together.txt").write_bytes(together.encode("utf-8"))
    return folder


@pytest.fixture(scope="module")
def single(model, corpus, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("single") / "single.hdf5")
    assert main(["embed", model, str(corpus.parent / "together.txt"), out, *FLAGS]) == 0
    return out


def _union(folder):
    """`{name: array}` of every shard's datasets, `sentence_to_index` merged in shard order,
    and the manifest."""
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    datasets, index = {}, {}
    for shard in manifest["shards"]:
        with h5py.File(folder / shard["file"], "r") as f:
            for name in f:
                if name == "sentence_to_index":
                    index.update(json.loads(f[name][0]))
                else:
                    assert name not in datasets, f"sentence {name} in two shards"
                    datasets[name] = f[name][...]
    return datasets, index, manifest


def _assert_equal_to_single(folder, single, num_shards):
    datasets, index, manifest = _union(folder)
    with h5py.File(single, "r") as f:
        expected = {name: f[name][...] for name in f if name != "sentence_to_index"}
        expected_index = json.loads(f["sentence_to_index"][0])
    assert sorted(datasets, key=int) == sorted(expected, key=int)  # each sentence once
    for name, vectors in expected.items():
        assert datasets[name].shape == vectors.shape and datasets[name].dtype == np.float32
        np.testing.assert_allclose(datasets[name], vectors, atol=ATOL, rtol=0)
    assert index == expected_index  # the text of a repeated line maps to its last index
    assert manifest["sentences"] == len(expected) and len(manifest["shards"]) == num_shards
    on_disk = sorted(p.name for p in folder.iterdir() if p.name != "manifest.json")
    assert on_disk == [shard["file"] for shard in manifest["shards"]]  # no temporaries
    return manifest


@pytest.mark.slow
def test_two_worker_processes_give_the_single_process_file(model, corpus, single, tmp_path,
                                                           capsys):
    out = tmp_path / "shards"
    code = main(["embed", model, str(corpus / "part-*.txt"), str(out), "--runner",
                 "DirectRunner", "--num-workers", "2", "--shard-lines", "5", *FLAGS])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "28 sentences in 7 shards" in captured.out and "2 worker processes" in captured.out
    manifest = _assert_equal_to_single(out, single, num_shards=7)
    # Files in name order, each cut into ranges of at most 5 lines; indices are global.
    assert [(s["first_index"], s["stop_index"]) for s in manifest["shards"]] == [
        (0, 5), (5, 10), (10, 12), (12, 17), (17, 22), (22, 24), (24, 28)]
    assert [(i["path"].rsplit("/", 1)[1], i["lines"], i["first_index"])
            for i in manifest["inputs"]] == [("part-a.txt", 12, 0), ("part-b.txt", 12, 12),
                                             ("part-c.txt", 4, 24)]
    assert manifest["flags"]["output_format"] == "all" and manifest["flags"]["max_length"] == 4
    assert manifest["model"]["model_dir"] == os.path.abspath(model)
    writers = [shard["writer"] for shard in manifest["shards"]]
    assert len(set(writers)) == 2 and all(not w.endswith(f":{os.getpid()}") for w in writers)
    assert min(writers.count(w) for w in set(writers)) >= 3  # a process, many shards
    if not cpu_setup.thread_layout_set_by_user():  # each worker its share of the cores
        share = max(1, cpu_setup.usable_cores() // 2)
        assert manifest["flags"]["thread_layout"] == list(cpu_setup.worker_thread_layout(share))


def test_a_bundle_that_fails_once_is_retried_and_the_output_is_exact(
        model, corpus, single, tmp_path, monkeypatch, capsys):
    """Beam's BundleBasedDirectRunner runs a failed bundle again (up to 4 times); the shard
    the first attempt wrote before failing is written again under the same name."""
    written = beam_shards.write_shard
    marker, attempts = tmp_path / "failed_once", []

    def fails_once(output_dir, shard, embedded, **kwargs):
        record = written(output_dir, shard, embedded, **kwargs)  # complete, then the fault
        attempts.append(shard.name)
        if shard.first_index == 12 and not marker.exists():
            marker.touch()
            raise RuntimeError("injected fault after writing the shard")
        return record

    monkeypatch.setattr(beam_shards, "write_shard", fails_once)
    out = tmp_path / "shards"
    code = main(["embed", model, str(corpus / "part-*.txt"), str(out), "--runner",
                 "BundleBasedDirectRunner", "--num-workers", "1", "--shard-lines", "6",
                 *FLAGS])
    assert code == 0, capsys.readouterr().err
    assert marker.exists() and attempts.count("sentences-0000000012-0000000018.hdf5") == 2
    _assert_equal_to_single(out, single, num_shards=5)


def test_without_retries_a_failure_is_one_line_and_leaves_no_manifest(
        model, corpus, tmp_path, monkeypatch, capsys):
    def fails(output_dir, shard, embedded, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(beam_shards, "write_shard", fails)
    out = tmp_path / "shards"
    out.mkdir()
    (out / "manifest.json").write_text("{}")  # an earlier run's: removed before any work
    code = main(["embed", model, str(corpus / "part-*.txt"), str(out), "--runner",
                 "DirectRunner", "--num-workers", "1", *FLAGS])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "the Beam pipeline failed" in err and "disk on fire" in err
    assert not (out / "manifest.json").exists()


@pytest.mark.slow
def test_a_failing_worker_process_is_one_line_naming_its_log(model, corpus, tmp_path):
    """What the worker processes print about a failure (Beam prints each traceback) goes to
    a log file that the one error line names; nothing else reaches the terminal."""
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(model, broken)
    weights = (broken / "weights.hdf5").read_bytes()
    (broken / "weights.hdf5").write_bytes(weights[:1000])  # cut off: unreadable
    done = subprocess.run([sys.executable, "-m", "keras_elmo.cli", "embed", str(broken),
                           str(corpus / "part-*.txt"), str(tmp_path / "out"), "--runner",
                           "DirectRunner", "--num-workers", "2"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "is not a readable HDF5 file" in lines[0], done.stderr[-3000:]
    log = lines[0].split("the workers' log: ")[1].rstrip(").")
    try:
        assert "Traceback" in open(log, encoding="utf-8").read()
    finally:
        os.remove(log)
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_a_full_disk_in_a_shard_is_the_storage_line_and_exit_75(model, corpus, tmp_path,
                                                                monkeypatch, capsys):
    """As every command: a storage fault is one line, exit 75, and no partial file."""
    import errno

    from keras_elmo.process import atomic_hdf5

    real, written = os.pwrite, {"bytes": 0}

    def pwrite(fd, data, offset):  # the disk takes 20 kB of the shards, then is full
        if written["bytes"] > 20_000:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        written["bytes"] += len(data)
        return real(fd, data, offset)

    monkeypatch.setattr(atomic_hdf5.os, "pwrite", pwrite)
    out = tmp_path / "shards"
    code = main(["embed", model, str(corpus / "part-*.txt"), str(out), "--runner",
                 "DirectRunner", "--num-workers", "1", "--shard-lines", "6", *FLAGS])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 75 and len(err) == 1, err
    assert "cannot write the ELMo vectors of shard sentences-" in err[0], err[0]
    assert "no space left on device" in err[0]
    names = os.listdir(out)
    assert "manifest.json" not in names and not [n for n in names if n.endswith(".tmp")]


@pytest.mark.slow
def test_worker_processes_on_a_full_disk_give_the_storage_line_and_exit_75(model, corpus,
                                                                          tmp_path):
    """The same on a real small filesystem, the fault met in the worker processes."""
    from small_filesystem import small_filesystem, unavailable

    if unavailable() is not None:
        pytest.skip(unavailable())
    with small_filesystem(tmp_path / "disk", size_kib=1024) as disk:
        disk.leave_free(12 * 1024)
        out = os.path.join(disk.path, "shards")
        done = subprocess.run([sys.executable, "-m", "keras_elmo.cli", "embed", model,
                               str(corpus / "part-*.txt"), out, "--runner", "DirectRunner",
                               "--num-workers", "2", "--shard-lines", "6"],
                              capture_output=True, text=True, timeout=300)
        entries = disk.entries()
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 75 and len(lines) == 1, done.stderr[-3000:]
    assert "cannot write the ELMo vectors of shard sentences-" in lines[0], lines[0]
    assert "no space left on device" in lines[0]
    log = lines[0].split("the workers' log: ")[1].rstrip(").")
    os.remove(log)
    assert not [e for e in entries if e.endswith(".tmp") or e.endswith("manifest.json")]


def test_embed_sentences_in_a_users_pipeline(model):
    from apache_beam.testing.util import assert_that

    sentences = [(0, "the cat sat"), (1, ["人民", "日报"]), (2, ""), (3, "a b c d e f")]
    settings = EmbeddingSettings(model_dir=model, output_format="top", max_length=4,
                                 batch_size=2)
    embedder = keras_elmo.ElmoEmbedder(model, max_length=4)
    expected = {0: embedder.embed_sentence(["the", "cat", "sat"])[-1],
                1: embedder.embed_sentence(["人民", "日报"])[-1],
                2: np.zeros((0, 16), np.float32),
                3: embedder.embed_sentence(list("abcdef"))[-1]}

    def check(found):
        assert sorted(index for index, _ in found) == [0, 1, 2, 3]
        for index, vectors in found:
            assert vectors.dtype == np.float32 and vectors.shape == expected[index].shape
            np.testing.assert_allclose(vectors, expected[index], atol=ATOL, rtol=0)

    with beam.Pipeline() as pipeline:
        vectors = pipeline | beam.Create(sentences) | EmbedSentences(settings)
        assert_that(vectors, check)
    assert embedding_worker(settings) is embedding_worker(settings)  # one model per process


def test_the_plan_reads_every_line_once_in_order(tmp_path, monkeypatch):
    monkeypatch.setattr(beam_shards, "OFFSET_STEP", 3)  # offsets kept every 3 lines
    texts = {"b.txt": "b0\r\nb1\n\nb3\nb4\nb5\nb6", "a.txt": "a0\na1\n", "c.txt": ""}
    for name, text in texts.items():
        (tmp_path / name).write_text(text, encoding="utf-8", newline="")
    paths = beam_shards.match_inputs(str(tmp_path / "*.txt"))
    assert [os.path.basename(p) for p in paths] == ["a.txt", "b.txt", "c.txt"]
    indexes = [beam_shards.index_file(n, p) for n, p in enumerate(paths)]
    assert [(i.lines, i.offsets) for i in indexes] == [(2, (0,)), (7, (0, 8, 17)), (0, ())]
    shards = beam_shards.plan_shards(indexes, shard_lines=4)
    assert [(s.name, s.first_line, s.offset_line) for s in shards] == [
        ("sentences-0000000000-0000000002.hdf5", 0, 0),
        ("sentences-0000000002-0000000006.hdf5", 0, 0),
        ("sentences-0000000006-0000000009.hdf5", 4, 3)]
    lines = [pair for shard in shards for pair in beam_shards.read_shard_lines(shard)]
    assert lines == list(enumerate(["a0", "a1", "b0", "b1", "", "b3", "b4", "b5", "b6"]))
    assert beam_shards.default_shard_lines(4800, 2) == 2400
    assert beam_shards.default_shard_lines(9, None) == beam_shards.MAX_SHARD_LINES
    (tmp_path / "bad.txt").write_bytes(b"ok\ncaf\xe9 x\n")
    bad = beam_shards.plan_shards([beam_shards.index_file(0, str(tmp_path / "bad.txt"))])
    with pytest.raises(ValueError, match=r"bad.txt, line 2: not UTF-8"):
        list(beam_shards.read_shard_lines(bad[0]))
    with pytest.raises(FileNotFoundError, match="no input file matches"):
        beam_shards.match_inputs(str(tmp_path / "none-*.txt"))


def _record(first, stop, sentences=None):
    return {"file": beam_shards.SHARD_NAME.format(first=first, stop=stop),
            "first_index": first, "stop_index": stop,
            "sentences": stop - first if sentences is None else sentences}


def test_the_last_step_refuses_a_missing_repeated_or_overlapping_index():
    ok = beam_shards.check_shards([_record(5, 9), _record(0, 5), _record(5, 9)], 9)
    assert [r["first_index"] for r in ok] == [0, 5]  # a shard run twice counts once
    with pytest.raises(ValueError, match="sentences 5 .. 5 are missing"):
        beam_shards.check_shards([_record(0, 5), _record(6, 9)], 9)
    with pytest.raises(ValueError, match="sentences 4 .. 4 are in two shards"):
        beam_shards.check_shards([_record(0, 5), _record(4, 9)], 9)
    with pytest.raises(ValueError, match="of 10"):
        beam_shards.check_shards([_record(0, 5), _record(5, 9)], 10)
    with pytest.raises(ValueError, match="holds 3 sentences for a range of 4"):
        beam_shards.check_shards([_record(0, 5), _record(5, 9, sentences=3)], 9)


@pytest.mark.parametrize("extra, message", [
    (["--use-sentence-keys"], "--use-sentence-keys cannot be used with --runner"),
    (["--runner", "DataflowRunner", "--num-workers", "2"], "--num-workers is the DirectRunner"),
    (["--projectx=p"], "unknown Beam pipeline options ['--projectx=p']"),
    (["--project", "p"], "written --name=value"),
])
def test_bad_runner_arguments_are_one_line(model, corpus, tmp_path, capsys, extra, message):
    argv = ["embed", model, str(corpus / "part-*.txt"), str(tmp_path / "out"), *extra]
    if "--runner" not in extra:
        argv += ["--runner", "DirectRunner"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out").exists()


def test_worker_thread_layouts():
    assert cpu_setup.worker_thread_layout(1) == (1, 1)
    assert cpu_setup.worker_thread_layout(2) == (1, 2)
    chosen = {}
    cpu_setup.set_default_thread_layout(chosen, cores=2)
    assert not cpu_setup.thread_layout_set_by_user(chosen)
    assert cpu_setup.thread_layout_set_by_user({cpu_setup.INTRA_OP_VARIABLE: "3"})
    assert not cpu_setup.thread_layout_set_by_user({})


#: In a fresh interpreter where `apache_beam` cannot be imported: `import keras_elmo` and
#: `embed` without `--runner` import none of it; with `--runner`, one line.
_WITHOUT_BEAM = r"""
import contextlib, importlib.abc, io, json, sys

tried = []

class NoBeam(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "apache_beam" or name.startswith("apache_beam."):
            tried.append(name)
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoBeam())
import keras_elmo
from keras_elmo.cli.main import main
model, text, out = sys.argv[1:4]
plain = main(["embed", model, text, out + ".hdf5", "--quiet"])
before = list(tried)
err = io.StringIO()
with contextlib.redirect_stderr(err):
    runner = main(["embed", model, text, out, "--runner", "DirectRunner"])
print(json.dumps({"plain": plain, "tried_before": before, "runner": runner,
                  "err": err.getvalue()}))
"""


@pytest.mark.slow
def test_without_apache_beam_the_runner_says_what_to_install(model, corpus, tmp_path):
    done = subprocess.run([sys.executable, "-c", _WITHOUT_BEAM, model,
                           str(corpus / "part-a.txt"), str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["plain"] == 0 and result["tried_before"] == []
    assert result["runner"] == 2
    lines = result["err"].strip().splitlines()
    assert len(lines) == 1 and 'pip install "keras-elmo[beam]"' in lines[0], lines
    assert not (tmp_path / "out").exists()
