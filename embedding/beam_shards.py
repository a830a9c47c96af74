"""The shards of `keras-elmo embed --runner`: which lines each holds, its HDF5 file, the check
that every sentence is in exactly one, and the manifest.

The input is one file or a glob of files (any filesystem Beam reads). A sentence's index is
its position over the files sorted by name, line by line (the key `keras-elmo embed` gives
it in the concatenation of the files, each ending in a newline). The lines are cut into
shards, each a range of lines of one file:

- `index_file` reads a file once, counts its lines (a last line without a newline counts) and
  keeps the byte offset of every `OFFSET_STEP`-th line, so a shard reads only its own lines;
- `plan_shards` gives every file its first global index and cuts it into `Shard`s of
  `shard_lines` lines (`default_shard_lines`: as many equal shards as workers when their
  number is known, at most `MAX_SHARD_LINES` lines each);
- `read_shard_lines` yields a shard's `(index, text)` pairs, refusing a line that is not
  UTF-8 as `embed` does (naming the file and the line);
- `write_shard` writes one shard's file in the layout of AllenNLP's `elmo` command (one
  dataset per sentence, named by its global index; `sentence_to_index` mapping each text of
  the shard to the key of its last line there), under a name fixed by its range
  (`sentences-FIRST-STOP.hdf5`, `STOP` exclusive, ten digits each), atomically: the file
  appears complete or not at all, and a retried shard replaces its own file with the same
  content;
- `check_shards` (the pipeline's last step) refuses shards that miss, repeat or overlap an
  index, removes shard files of the folder that are not in the plan (an earlier run's), and
  only then `write_manifest` writes `manifest.json`: the shards, their sentence counts, the
  inputs, the model and the flags. A folder whose manifest exists is complete.

A shard is written through `keras_elmo.process.atomic_hdf5` (a temporary renamed when
complete and on the disk; a full disk, a quota or a read-only folder is one `StorageError`
line and leaves nothing); in another filesystem's folder (`gs://...`) it is written so to a
local temporary folder first, then copied through Beam's `FileSystems` (an object store
shows an object only once its upload is complete). The manifest goes through
`keras_elmo.process.atomic_file`.

Example:
>>> paths = match_inputs("corpus/part-*.txt")  # doctest: +SKIP
>>> shards = plan_shards([index_file(n, p) for n, p in enumerate(paths)], shard_lines=4096)  # doctest: +SKIP
>>> record = write_shard("out", shards[0], embedded)  # doctest: +SKIP
"""

import contextlib
import dataclasses
import json
import math
import os
import re
import shutil
import socket
import tempfile

import h5py
from apache_beam.io.filesystem import BeamIOError
from apache_beam.io.filesystems import FileSystems

from keras_elmo.embedding.embed_file import SENTENCE_INDEX
from keras_elmo.process.atomic_file import atomic_writer
from keras_elmo.process.atomic_hdf5 import atomic_hdf5
from keras_elmo.text.text_files import not_utf8_error

#: The manifest's name in the output folder, and what its `format` field says.
MANIFEST = "manifest.json"
MANIFEST_FORMAT = "keras-elmo embedding shards"
MANIFEST_VERSION = 1
#: A shard's file name: its first global index and the index after its last, ten digits.
SHARD_NAME = "sentences-{first:010d}-{stop:010d}.hdf5"
_SHARD_FILE = re.compile(r"sentences-(\d{10})-(\d{10})\.hdf5")
#: Lines between two byte offsets that `index_file` keeps.
OFFSET_STEP = 1024
#: Most lines of a shard: a shard is embedded by one worker, which sorts its lines by
#: length in windows of `batch_size * 32`; larger shards balance no better.
MAX_SHARD_LINES = 4096


@dataclasses.dataclass(frozen=True)
class FileIndex:
    """One input file: its place in the sorted inputs, path, line count and the byte offset
    of line `k * OFFSET_STEP` (0-based) at position `k` of `offsets`."""

    number: int
    path: str
    lines: int
    offsets: tuple


@dataclasses.dataclass(frozen=True)
class Shard:
    """Lines `first_line` .. `first_line + num_lines - 1` (0-based) of `path`, with global
    indices from `first_index`; `offset` is the byte offset of line `offset_line`, the
    nearest kept one at or before `first_line`."""

    path: str
    first_line: int
    num_lines: int
    first_index: int
    offset: int
    offset_line: int

    @property
    def stop_index(self):
        return self.first_index + self.num_lines

    @property
    def name(self):
        """The shard's file name (`SHARD_NAME`)."""
        return SHARD_NAME.format(first=self.first_index, stop=self.stop_index)


def match_inputs(pattern):
    """The files of a path or glob (any filesystem Beam reads), sorted by name.

    Raises:
        FileNotFoundError: nothing matches.
    """
    try:
        matched = FileSystems.match([pattern])[0].metadata_list
    except BeamIOError:  # a local path without a glob that does not exist
        matched = []
    paths = sorted(meta.path for meta in matched
                   if not (is_local(meta.path) and os.path.isdir(meta.path)))
    if not paths:
        raise FileNotFoundError(f"no input file matches {pattern}; expected a UTF-8 text file "
                                "or a glob of them, one sentence per line.")
    return paths


def is_local(path):
    """True for a path of this machine's filesystem (no `scheme://`)."""
    return FileSystems.get_scheme(path) in (None, "file")


def index_file(number, path):
    """The `FileIndex` of the `number`-th input file, read once."""
    lines, position, offsets = 0, 0, []
    with FileSystems.open(path) as handle:
        for raw in iter(handle.readline, b""):
            if lines % OFFSET_STEP == 0:
                offsets.append(position)
            lines += 1
            position += len(raw)
    return FileIndex(number, path, lines, tuple(offsets))


def default_shard_lines(total_lines, num_workers=None):
    """Lines per shard: `num_workers` equal shards (or a multiple of that many) of at most
    `MAX_SHARD_LINES` lines; `MAX_SHARD_LINES` when the number of workers is unknown.

    Example:
    >>> default_shard_lines(4800, num_workers=2), default_shard_lines(20000, num_workers=2)
    (2400, 3334)
    """
    if not num_workers:
        return MAX_SHARD_LINES
    rounds = max(1, math.ceil(total_lines / (num_workers * MAX_SHARD_LINES)))
    return max(1, math.ceil(total_lines / (num_workers * rounds)))


def plan_shards(indexes, shard_lines=None, num_workers=None):
    """Cuts the files into shards, indices counted over the files in order.

    Args:
        indexes: the `FileIndex` of every input file (any order: `number` orders them).
        shard_lines: int >= 1, most lines per shard, or None for `default_shard_lines`.
        num_workers: int or None, the workers that will embed them (for the default).

    Returns:
        list of `Shard`, in index order (a file of no lines has none).
    """
    indexes = sorted(indexes, key=lambda index: index.number)
    total = sum(index.lines for index in indexes)
    size = shard_lines or default_shard_lines(total, num_workers)
    shards, first_index = [], 0
    for index in indexes:
        for start in range(0, index.lines, size):
            kept = start // OFFSET_STEP
            shards.append(Shard(index.path, start, min(size, index.lines - start),
                                first_index + start, index.offsets[kept], kept * OFFSET_STEP))
        first_index += index.lines
    return shards


def read_shard_lines(shard):
    """Yields `(global index, text)` for the shard's lines, newline removed (as
    `keras_elmo.embedding.inputs.read_lines` reads them).

    Raises:
        ValueError: a line is not UTF-8 (naming the file and its 1-based line number).
    """
    with FileSystems.open(shard.path) as handle:
        handle.seek(shard.offset)
        for _ in range(shard.first_line - shard.offset_line):
            handle.readline()
        for k in range(shard.num_lines):
            raw = handle.readline()
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise not_utf8_error(shard.path, shard.first_line + k + 1, raw, error) from None
            yield shard.first_index + k, text.rstrip("\r\n")


@contextlib.contextmanager
def _shard_output(path):
    """An `HDF5Output` (`keras_elmo.process.atomic_hdf5`) whose file appears at `path`
    whole or not at all; a storage fault is one `StorageError` line."""
    what = f"the ELMo vectors of shard {os.path.basename(path)}"
    if is_local(path):
        with atomic_hdf5(path, what=what) as output:
            yield output
        return
    with tempfile.TemporaryDirectory(prefix="keras-elmo-shard-") as scratch:
        tmp_path = os.path.join(scratch, os.path.basename(path))
        with atomic_hdf5(tmp_path, what=what) as output:
            yield output
        with open(tmp_path, "rb") as source, FileSystems.create(path) as target:
            shutil.copyfileobj(source, target, 1 << 20)


def write_shard(output_dir, shard, embedded, keep_sentence_index=True):
    """Writes one shard's file (module docstring) and returns its record.

    Args:
        output_dir: the output folder (exists).
        shard: the `Shard`.
        embedded: iterable of `(index, text, num_tokens, vectors)`, every index of the shard
            once, in any order; `vectors` float32 numpy.
        keep_sentence_index: write `sentence_to_index` (True).

    Returns:
        dict: `file`, `first_index`, `stop_index`, `sentences`, `tokens`, `empty_lines`,
        `source` (the input file), `first_line` (1-based), `writer` (host:pid).

    Raises:
        ValueError: `embedded` missed or repeated an index of the shard (nothing written).
    """
    record = {"file": shard.name, "first_index": shard.first_index,
              "stop_index": shard.stop_index, "sentences": 0, "tokens": 0, "empty_lines": 0,
              "source": shard.path, "first_line": shard.first_line + 1,
              "writer": f"{socket.gethostname()}:{os.getpid()}"}
    keys = {}  # text -> its last index in the shard
    with _shard_output(FileSystems.join(output_dir, shard.name)) as output:
        out = output.file
        for index, text, num_tokens, vectors in embedded:
            if not shard.first_index <= index < shard.stop_index or str(index) in out:
                raise ValueError(f"shard {shard.name}: sentence {index} is outside the "
                                 "shard or came twice; every index of the shard once was "
                                 "expected.")
            out.create_dataset(str(index), data=vectors)
            output.check()  # a full disk stops the shard here, not at its end
            text = text.strip()
            keys[text] = max(index, keys.get(text, index))
            record["sentences"] += 1
            record["tokens"] += num_tokens
            record["empty_lines"] += not num_tokens
        if record["sentences"] != shard.num_lines:
            raise ValueError(f"shard {shard.name}: {record['sentences']} sentences "
                             f"embedded, {shard.num_lines} expected.")
        if keep_sentence_index:
            dataset = out.create_dataset(SENTENCE_INDEX, (1,),
                                         dtype=h5py.string_dtype("utf-8"))
            dataset[0] = sentence_index_json(keys)
        out.attrs.update({key: record[key] for key in
                          ("first_index", "stop_index", "source", "first_line", "writer")})
    return record


def sentence_index_json(keys):
    """`sentence_to_index` of `embed` for `{text: index}`: keys as strings, in index order."""
    parts = (f"{json.dumps(text, ensure_ascii=False)}: \"{key}\""
             for text, key in sorted(keys.items(), key=lambda item: item[1]))
    return "{" + ", ".join(parts) + "}"


def check_shards(records, total, output_dir=None):
    """The shards' records in index order, once each, if they hold every index of
    `0 .. total - 1` exactly once; with a local `output_dir`, each file's datasets are read
    back and checked too.

    A record may come more than once (a runner that ran a shard twice, each time writing
    the same file); records of one file must agree.

    Raises:
        ValueError: a missing, repeated or overlapping index, or a file whose datasets are
            not its range's.
    """
    by_file = {}
    for record in records:
        seen = by_file.setdefault(record["file"], record)
        if (seen["first_index"], seen["stop_index"], seen["sentences"]) != (
                record["first_index"], record["stop_index"], record["sentences"]):
            raise ValueError(f"shard {record['file']} was reported twice with different "
                             "contents.")
    ordered = sorted(by_file.values(), key=lambda record: record["first_index"])
    expected = 0
    for record in ordered:
        if record["first_index"] != expected:
            what = "missing" if record["first_index"] > expected else "in two shards"
            raise ValueError(f"sentences {min(expected, record['first_index'])} .. "
                             f"{max(expected, record['first_index']) - 1} are {what} "
                             f"(shard {record['file']}); every sentence once was expected.")
        if record["sentences"] != record["stop_index"] - record["first_index"]:
            raise ValueError(f"shard {record['file']} holds {record['sentences']} sentences "
                             "for a range of "
                             f"{record['stop_index'] - record['first_index']}.")
        expected = record["stop_index"]
    if expected != total:
        raise ValueError(f"the shards hold sentences 0 .. {expected - 1} of {total}; every "
                         "sentence once was expected.")
    if output_dir is not None and is_local(output_dir):
        for record in ordered:
            with h5py.File(os.path.join(output_dir, record["file"]), "r") as shard:
                names = set(shard) - {SENTENCE_INDEX}
            wanted = {str(i) for i in range(record["first_index"], record["stop_index"])}
            if names != wanted:
                raise ValueError(f"shard {record['file']} holds datasets "
                                 f"{sorted(names ^ wanted)[:5]} that its range does not, or "
                                 "lacks them.")
    return ordered


def remove_unlisted_shards(output_dir, names):
    """Removes the shard files of `output_dir` not in `names` (an earlier run's, with
    another plan); returns their names."""
    pattern = FileSystems.join(output_dir, "sentences-*.hdf5")
    found = [meta.path for meta in FileSystems.match([pattern])[0].metadata_list]
    stale = [path for path in found if _SHARD_FILE.fullmatch(os.path.basename(path))
             and os.path.basename(path) not in names]
    if stale:
        FileSystems.delete(stale)
    return sorted(os.path.basename(path) for path in stale)


def prepare_output_dir(output_dir):
    """Creates the output folder and removes its manifest (a folder with a manifest is
    complete; shards may be rewritten now).

    Raises:
        ValueError: `output_dir` is a file.
    """
    if is_local(output_dir):
        if os.path.isfile(output_dir):
            raise ValueError(f"output {output_dir} is a file; with --runner it is a folder "
                             "for the shards.")
        os.makedirs(output_dir, exist_ok=True)
    elif not FileSystems.exists(output_dir):
        FileSystems.mkdirs(output_dir)
    manifest = FileSystems.join(output_dir, MANIFEST)
    if FileSystems.exists(manifest):
        FileSystems.delete([manifest])


def write_manifest(output_dir, manifest):
    """Writes `manifest.json` (atomically); returns its path."""
    path = FileSystems.join(output_dir, MANIFEST)
    text = json.dumps(manifest, indent=1, ensure_ascii=False) + "\n"
    if is_local(output_dir):
        with atomic_writer(path, what="the manifest of the shards") as handle:
            handle.write(text)
    else:
        with FileSystems.create(path) as handle:
            handle.write(text.encode("utf-8"))
    return path


def read_manifest(output_dir):
    """The manifest of a complete output folder (a dict).

    Raises:
        FileNotFoundError: no manifest (the run did not finish).
    """
    path = FileSystems.join(output_dir, MANIFEST)
    if not FileSystems.exists(path):
        raise FileNotFoundError(f"{path} does not exist: the run that writes {output_dir} "
                                "did not finish (its shards cannot be trusted).")
    with FileSystems.open(path) as handle:
        return json.loads(handle.read().decode("utf-8"))
