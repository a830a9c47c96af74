"""Raw text segmented once by a Python tokeniser (jieba), cached for every later pass.

The tf.data pipeline tokenises in-graph (`whitespace`, `unicode-script`). A segmenter written
in Python (jieba, `keras_elmo.text.tokenizers`) would hold the pipeline to Python speed and the GIL
in every epoch; instead each corpus file is segmented once into a cache file, tokens joined
by single spaces, one line per input line (blank lines stay blank), and the pipeline reads
that with the whitespace split. Segmenting People's Daily takes jieba tens of seconds
(docs/performance.md), paid once; a later run, `vocab`, `perplexity` or the n-gram
baseline on the same file reads the cache.

The cache is keyed by content, not by name: `CACHE_DIR/<stem>.<sha256 of the file, the
tokeniser and its version>.txt` in `$KERAS_ELMO_CACHE/segmented` (default
`~/.cache/keras-elmo/segmented`), written atomically; a changed file gets a new entry and a
resumed run finds the same files again.

Example:
>>> segment_files(["raw/train.txt"], "jieba")  # doctest: +SKIP
['/root/.cache/keras-elmo/segmented/train.3f2a9c0d1b7e5a46.txt']
"""

import hashlib
import os
import sys

from keras_elmo.text import tokenizers
from keras_elmo.process.atomic_file import atomic_writer
from keras_elmo.process.storage_errors import storage_guard

#: Lines segmented per `tokenizers.tokenize` call.
_LINES_PER_CALL = 1024
#: Hex digits of the content hash in a cache file's name.
_KEY_DIGITS = 16


def default_cache_dir():
    """`$KERAS_ELMO_CACHE/segmented`, else `~/.cache/keras-elmo/segmented`."""
    root = os.environ.get("KERAS_ELMO_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "keras-elmo")
    return os.path.join(root, "segmented")


#: `segment_files`' default stream: the `sys.stderr` of the moment of the call (a default
#: read at import would keep a stream a test or a host program has since replaced).
_STDERR = object()


def segment_files(files, tokenizer, cache_dir=None, stream=_STDERR):
    """The files the tf.data pipeline reads for `files` under `tokenizer`.

    In-graph tokenisers return `files` unchanged; a Python tokeniser (jieba) returns the
    cached segmented copies, segmenting a file only when its cache entry is missing.

    Args:
        files: list of str, UTF-8 text files, one sentence per line.
        tokenizer: a name of `keras_elmo.text.tokenizers.TOKENIZERS`.
        cache_dir: str or None (`default_cache_dir()`).
        stream: where a one-line note goes when a file is segmented (default: the
            current `sys.stderr`; None: silent).

    Returns:
        list of str, one path per input file, in order.

    Raises:
        ValueError: unknown tokeniser or jieba not installed.
        FileNotFoundError: an input file is missing.
    """
    if tokenizers.is_in_graph(tokenizer):
        return list(files)
    cache_dir = cache_dir or default_cache_dir()
    if stream is _STDERR:
        stream = sys.stderr
    return [_segmented(os.fspath(path), tokenizer, cache_dir, stream) for path in files]


def cache_path(path, tokenizer, cache_dir=None):
    """The cache file of `path` segmented by `tokenizer` (exists or not)."""
    digest = hashlib.sha256(f"{tokenizer} {tokenizers.jieba_version()}\n".encode())
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    stem = os.path.splitext(os.path.basename(path))[0]
    return os.path.join(cache_dir or default_cache_dir(),
                        f"{stem}.{digest.hexdigest()[:_KEY_DIGITS]}.txt")


def _segmented(path, tokenizer, cache_dir, stream):
    if not os.path.isfile(path):
        raise FileNotFoundError(f"corpus file not found: {path} (expected a UTF-8 text file, "
                                "one sentence per line).")
    target = cache_path(path, tokenizer, cache_dir)
    if os.path.isfile(target):
        return target
    with storage_guard(cache_dir, "the segmented corpus"):
        os.makedirs(cache_dir, exist_ok=True)
    if stream is not None:
        print(f"segmenting {path} with {tokenizer} (once) -> {target}", file=stream, flush=True)
    with open(path, encoding="utf-8", errors="ignore") as source, \
            atomic_writer(target, what="the segmented corpus") as out:
        batch = []
        for line in source:
            batch.append(line)
            if len(batch) == _LINES_PER_CALL:
                _write(out, batch, tokenizer)
                batch = []
        _write(out, batch, tokenizer)
    return target


def _write(out, lines, tokenizer):
    for tokens in tokenizers.tokenize(lines, tokenizer):
        out.write(" ".join(tokens) + "\n")
