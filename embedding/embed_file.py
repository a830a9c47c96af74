"""ELMo vectors of a text file written to HDF5, in the layout of AllenNLP's `elmo` command.

Input: UTF-8 text, one sentence per line, tokenised by `tokenizer` (`keras_elmo.text.tokenizers`:
tokens separated by whitespace by default; raw Chinese with `"jieba"`).
Output (HDF5):
- one dataset per line, named by the line's 0-based index as a string (`"0"`, `"1"`, ...),
  or by the sentence itself with `use_sentence_keys` (AllenNLP's `--use-sentence-keys`);
  float32 `(L + 1, n_tokens, 2 * projection_dim)` with `output="all"` (every layer, layer 0
  the token layer; AllenNLP's `--all`), `(n_tokens, 2 * projection_dim)` with `output="top"`
  (the top biLSTM layer; `--top`) or `output="mixed"` (see below; `--average` is the even
  mix);
- `sentence_to_index`: a dataset of one UTF-8 JSON string mapping each line's text
  (stripped of surrounding whitespace, as AllenNLP does) to its key (not with sentence keys).

Rules:
- An empty (or all-blank) line gives a zero-length dataset `(L + 1, 0, 2P)`, not an error
  (AllenNLP refuses such files); its text `""` is in `sentence_to_index` too.
- A repeated sentence gets a dataset per line; `sentence_to_index` maps its text to the key
  of its LAST occurrence (what AllenNLP's dict does). The vectors are the same either way:
  the biLM is stateless.
- Streaming: the file is read a window at a time (see `BiLMRunner`) and each sentence's
  dataset written as soon as it is computed; the text -> key map is kept on disk (SQLite)
  while the file is read and loaded once, at the end, to write `sentence_to_index` (one
  JSON string must be whole in memory to be written). `keep_sentence_index=False`
  (AllenNLP's `--forget-sentences`) leaves it out.
- `output="mixed"`: `gamma * sum_j softmax(s)_j h_j` with the weights of a `scalar_mix.json`
  (`keras_elmo.export.mix_weights`), or the even average (AllenNLP's `--average`) without one. With
  `do_layer_norm`, each layer is normalised over the sentence's own tokens, so that a
  sentence's vectors never depend on its batch.
- With `use_sentence_keys` a repeated sentence is written once; a sentence that cannot be
  an HDF5 name (empty, ".", or containing "/") is refused with its line number.
- The output file is written under a temporary name and renamed when complete: a failed
  or interrupted run leaves no partial file (an existing file is replaced only on success).
- Storage: before any work, the output's size is estimated from the corpus (its tokens,
  counted as the words between ASCII whitespace, which no tokeniser makes fewer of, times
  the layers asked for, plus each dataset's HDF5 header) and the run is refused when less
  is free. A full disk, a quota or a read-only filesystem met while writing stops the run
  after the batch being written: the biLM's worker thread is joined, the HDF5 file closed
  and its temporary removed, and the error is one `StorageError` line
  (`keras_elmo.process.atomic_hdf5`: HDF5 never sees the failed write, so it cannot crash).
  An interrupted run is restarted, not resumed: run the same command again; it starts
  from the first line, and its first atomic write removes the killed run's temporary
  (`keras_elmo.process.atomic_file`). (An HDF5 file cut off by `kill -9` cannot be trusted
  to reopen, so nothing of it is reused.)
- Calls: windows of `batch_size * 32` lines are cut into biLM calls of at most
  `batch_size` rows and `max_tokens` positions whose rows hold the sentences back to back,
  each from a zero state (`keras_elmo.embedding.row_packing`); the next call runs in a
  worker thread while this one is written and more lines are read (`BiLMRunner`). The
  char CNN runs once per distinct token of the file (or of a vocabulary `token_cache`;
  `keras_elmo.embedding.token_cache`). One trace of each function serves every call shape.
- Input contract (docs/serving.md "Input contract"): one vector per token. A line that is not
  UTF-8 is refused, naming the line (1-based) and the token; a token longer than
  `max_characters_per_token - 2` bytes is cut there (docs/model.md section 1); a sentence
  longer than `max_length` tokens runs in windows of `max_length` tokens
  (`keras_elmo.text.sentence_windows`); an empty line is a zero-length dataset.
- Equal to embedding each sentence alone through the char path within 1e-5 absolute in
  float32 (batching and the token cache change only the summation order of matmuls;
  docs/performance.md has the published size's difference; tests/test_embed_corpus.py
  holds the tiny model to 1e-5).

Example:
>>> summary = embed_file(bilm, "sentences.txt", "elmo.hdf5", batch_size=64)  # doctest: +SKIP
>>> with h5py.File("elmo.hdf5") as f:  # doctest: +SKIP
...     index = json.loads(f["sentence_to_index"][0]); f[index["人民 日报"]].shape
(3, 2, 256)
"""

import contextlib
import json
import os
import resource
import sqlite3
import sys
import tempfile
import time

import h5py
import numpy as np

from keras_elmo.process.atomic_hdf5 import atomic_hdf5
from keras_elmo.embedding.bilm_runner import DEFAULT_MAX_TOKENS, BiLMRunner
from keras_elmo.text.sentence_windows import DEFAULT_MAX_LENGTH
from keras_elmo.embedding.inputs import (check_paths, count_lines_and_words, read_lines,
                                         tokenized_lines)
from keras_elmo.process.progress import Progress
from keras_elmo.process.storage_errors import storage_guard
from keras_elmo.text.tokenizers import check_tokenizer

OUTPUTS = ("all", "top", "mixed")
SENTENCE_INDEX = "sentence_to_index"
#: Bytes of HDF5 header and link per dataset, at least (h5py's default layout takes more).
DATASET_OVERHEAD_BYTES = 256


def sentence_mix(num_layers, mix_file=None):
    """The frozen `ScalarMix` of `output="mixed"`: a mix file's, a model's trained mix
    (`keras_elmo.formats.model_mix.TrainedMix`), or the even average (None)."""
    from keras_elmo.export.mix_weights import build_mix, build_trained_mix, load_mix_weights
    from keras_elmo.formats.model_mix import TrainedMix

    if mix_file is None:
        return build_mix(num_layers)
    if isinstance(mix_file, TrainedMix):
        return build_trained_mix(mix_file, num_layers)
    return load_mix_weights(mix_file, num_layers)


def mix_sentence(mix, layers):
    """`(L + 1, n, D)` -> `(n, D)`: a built `ScalarMix` over one sentence's layers (its layer
    norm, if any, then uses this sentence's tokens alone)."""
    from keras import ops

    return ops.convert_to_numpy(mix(layers[None].astype(np.float32, copy=False)))[0]  # (n, D)


class _SentenceIndex:
    """text -> key on disk (SQLite, in the temporary folder), the last occurrence winning;
    JSON at the end. A full temporary folder is a `StorageError` naming it."""

    def __init__(self, directory):
        self.path = os.path.join(directory, "sentence_index.sqlite")
        with self._guard():
            self.connection = sqlite3.connect(self.path)
            self.connection.execute("CREATE TABLE keys (text TEXT PRIMARY KEY, key INTEGER)")

    def _guard(self):
        return storage_guard(self.path, "the sentence index (a scratch file)")

    def add(self, pairs):
        with self._guard():
            self.connection.executemany("INSERT OR REPLACE INTO keys VALUES (?, ?)", pairs)

    def __len__(self):
        return self.connection.execute("SELECT COUNT(*) FROM keys").fetchone()[0]

    def json(self):
        with self._guard():
            rows = self.connection.execute("SELECT text, key FROM keys ORDER BY key")
            parts = [f"{json.dumps(text, ensure_ascii=False)}: \"{key}\"" for text, key in rows]
        return "{" + ", ".join(parts) + "}"

    def close(self):
        self.connection.close()


def embed_file(bilm, input_path, output_path, batch_size=64, output="all", mix_file=None,
               token_cache=None, keep_sentence_index=True, use_sentence_keys=False,
               progress=True, tokenizer="whitespace", max_length=DEFAULT_MAX_LENGTH,
               max_tokens=DEFAULT_MAX_TOKENS):
    """Writes the ELMo vectors of every line of `input_path` to `output_path` (HDF5).

    Args:
        bilm: a stateless `keras_elmo.BiLM`.
        input_path: UTF-8 text, one tokenised sentence per line.
        output_path: the .hdf5 file to write (replaced if it exists).
        batch_size: int, most rows per biLM call (64; a row holds one sentence or several
            short ones back to back).
        output: `"all"` (every layer), `"top"` (the top layer) or `"mixed"` (one mixed
            vector per token).
        mix_file: a `scalar_mix.json` or a `TrainedMix` for `"mixed"` (None: the even
            average).
        token_cache: the `TokenEmbeddingCache` of `bilm` to use (one with a vocabulary,
            say); None: a new one.
        keep_sentence_index: write `sentence_to_index` (True; never with sentence keys).
        use_sentence_keys: bool, name each dataset by its sentence instead of its line.
        progress: bool, the progress line on stderr (or a `Progress`).
        tokenizer: how a line becomes tokens, a name of `keras_elmo.text.tokenizers.TOKENIZERS`
            (the model's own, for the vectors to mean what they did in training).
        max_length: int, tokens per biLM window (512); longer sentences run in windows.
        max_tokens: int >= 1, most positions per biLM call (rows x steps, 8192), or None
            for no budget (only `batch_size` limits the rows).

    Returns:
        dict: `sentences`, `tokens`, `empty_lines`, `distinct_sentences` (None without the
        index), `seconds`, `shape` (of one dataset, `n` for the token count),
        `peak_memory_mib` (the process's peak resident memory so far).
    """
    if output not in OUTPUTS:
        raise ValueError(f"output must be one of {OUTPUTS}; received {output!r}.")
    if mix_file is not None and output != "mixed":
        raise ValueError("a mix weights file is used only with output='mixed'; received "
                         f"output={output!r}.")
    check_paths(input_path, output_path)
    check_tokenizer(tokenizer)
    runner = BiLMRunner(bilm, token_cache=token_cache, batch_size=batch_size,
                        max_length=max_length, max_tokens=max_tokens)
    mix = sentence_mix(runner.num_output_layers, mix_file) if output == "mixed" else None
    lines, words = count_lines_and_words(input_path)
    if not isinstance(progress, Progress):
        progress = Progress(lines, label="embed", enabled=bool(progress))
    needed = output_bytes(words, lines, runner.num_output_layers if output == "all" else 1,
                          runner.output_dim)
    start = time.perf_counter()
    stats = {"sentences": 0, "tokens": 0, "empty_lines": 0}
    try:
        # Left in reverse order: the biLM's thread joined, the index closed, then the HDF5
        # file closed and renamed (or, after an error, removed).
        with contextlib.ExitStack() as stack:
            output_file = stack.enter_context(atomic_hdf5(output_path, what="the ELMo vectors",
                                                          needed=needed))
            out = output_file.file
            with storage_guard(tempfile.gettempdir(), "the scratch folder of the sentence index"):
                scratch = stack.enter_context(
                    tempfile.TemporaryDirectory(prefix="keras-elmo-embed-"))
            keep_index = keep_sentence_index and not use_sentence_keys
            index = _SentenceIndex(scratch) if keep_index else None
            if index is not None:
                stack.callback(index.close)
            texts = {}
            keyed = ((key, _remember(texts, key, text, tokens)) for key, text, tokens
                     in tokenized_lines(read_lines(input_path), tokenizer))
            batches = stack.enter_context(contextlib.closing(runner.iter_batches(keyed)))
            for keys, sentences, layers in batches:
                for row, (key, tokens) in enumerate(zip(keys, sentences)):
                    vectors = layers[row]  # (L + 1, n, 2P)
                    if output == "mixed":
                        vectors = mix_sentence(mix, vectors)  # (n, 2P)
                    elif output == "top":
                        vectors = vectors[-1]  # (n, 2P)
                    name = (_sentence_key(texts[key], input_path, key) if use_sentence_keys
                            else str(key))
                    if name not in out:  # a repeated sentence under its own name: once
                        out.create_dataset(name, data=vectors.astype(np.float32, copy=False))
                    stats["tokens"] += len(tokens)
                    stats["empty_lines"] += not tokens
                if index is not None:
                    index.add((texts[key], key) for key in keys)
                for key in keys:
                    del texts[key]
                stats["sentences"] += len(keys)
                progress.update(sentences=len(keys), tokens=sum(map(len, sentences)))
                # This call's outputs go now, not when the next call's arrive: two calls'
                # outputs are never held while the next one runs.
                layers = vectors = None
                output_file.check()  # a full disk stops the run here, not at the end
            if index is not None:
                stats["distinct_sentences"] = len(index)
                dataset = out.create_dataset(SENTENCE_INDEX, (1,),
                                             dtype=h5py.string_dtype("utf-8"))
                dataset[0] = index.json()
            else:
                stats["distinct_sentences"] = None
    finally:
        progress.close()
    stats["seconds"] = time.perf_counter() - start
    dim = runner.output_dim
    stats["shape"] = ((runner.num_output_layers, "n", dim) if output == "all" else ("n", dim))
    stats["peak_memory_mib"] = peak_memory_mib()
    return stats


def output_bytes(tokens, sentences, layers, dim):
    """Bytes of an embedding file, at least: `tokens` vectors of `layers x dim` float32 and
    one dataset per sentence (`sentence_to_index` left out).

    Example:
    >>> output_bytes(tokens=1000, sentences=100, layers=3, dim=1024)
    12313600
    """
    return tokens * layers * dim * np.dtype(np.float32).itemsize + \
        sentences * DATASET_OVERHEAD_BYTES


def peak_memory_mib():
    """Peak resident memory of this process so far, MiB (`getrusage`'s `ru_maxrss`)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1 << 20) if sys.platform == "darwin" else peak / 1024  # bytes / KiB


def _sentence_key(text, path, line_index):
    """The dataset name of a sentence under `use_sentence_keys` (refuses what HDF5 cannot
    name)."""
    if not text or text == "." or "/" in text:
        what = "is empty" if not text else f"{text[:60]!r} cannot be an HDF5 name"
        raise ValueError(f"{path}, line {line_index + 1}: the sentence {what} (with "
                         "--use-sentence-keys every sentence is a dataset name: not empty, "
                         "not '.', no '/'); drop --use-sentence-keys to name datasets by "
                         "line number.")
    return text


def _remember(texts, key, text, tokens):
    """Keeps the line's stripped text until its batch is written; returns its tokens."""
    texts[key] = text.strip()
    return tokens
