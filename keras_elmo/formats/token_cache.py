"""The token-embedding file: char-CNN vectors of a vocabulary, as bilm-tf dumps them.

An HDF5 file with `embedding` float32 `(V, projection_dim)`, row k = token k, as bilm-tf's
`dump_token_embeddings` writes it, plus `tokens` (V UTF-8 strings) so that the file is
self-contained; a bilm-tf file without `tokens` reads with its vocabulary file.
`keras_elmo.TokenEmbeddingCache` (`save`, `load`) uses these; this module knows the layout.

Example:
>>> write_token_embeddings("token_embeddings.hdf5", ["a", "b"], np.zeros((2, 8)))  # doctest: +SKIP
>>> tokens, embeddings = read_token_embeddings("token_embeddings.hdf5")  # doctest: +SKIP
"""

import os

import h5py
import numpy as np

from keras_elmo.process.atomic_hdf5 import atomic_hdf5


def write_token_embeddings(path, tokens, embeddings):
    """Writes `embedding` `(V, P)` and `tokens` to an HDF5 file (atomically; the vectors'
    size checked against the free space first, a storage fault one `StorageError` line)."""
    embeddings = np.asarray(embeddings, np.float32)
    with atomic_hdf5(path, what="the token embeddings", needed=embeddings.nbytes) as output:
        output.file.create_dataset("embedding", data=embeddings)
        output.file.create_dataset("tokens", data=list(tokens),
                                   dtype=h5py.string_dtype("utf-8"))


def read_token_embeddings(path, vocab_file=None):
    """`(tokens, embeddings)` of a file written by `write_token_embeddings` (or by bilm-tf).

    Args:
        path: the HDF5 file.
        vocab_file: one token per line; needed only when the file has no `tokens`.

    Returns:
        `(list of str, float32 (V, P))`, one row per distinct token.

    Raises:
        FileNotFoundError: no file at `path` (or at `vocab_file`).
        ValueError: unreadable file, missing dataset, or rows that do not match the tokens.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"token cache file not found: {path} (expected an HDF5 "
                                "file with an 'embedding' dataset).")
    try:
        with h5py.File(path, "r") as f:
            if "embedding" not in f:
                raise ValueError(f"token cache file {path} has no 'embedding' dataset; "
                                 f"found {sorted(f)}.")
            embeddings = f["embedding"][...]
            tokens = ([t.decode("utf-8") if isinstance(t, bytes) else t
                       for t in f["tokens"][...]] if "tokens" in f else None)
    except OSError as error:
        raise ValueError(f"token cache file {path} is not a readable HDF5 file "
                         f"({error}).") from None
    if tokens is None:
        if vocab_file is None:
            raise ValueError(f"token cache file {path} has no 'tokens' dataset (a bilm-tf "
                             "dump): pass the vocabulary file it was made from.")
        tokens = read_vocab_file(vocab_file)
    if len(tokens) != len(embeddings) or len(set(tokens)) != len(tokens):
        raise ValueError(f"token cache file {path}: 'embedding' has {len(embeddings)} "
                         f"rows for {len(tokens)} tokens ({len(set(tokens))} distinct); "
                         "expected one row per distinct token.")
    return tokens, np.asarray(embeddings, np.float32)


def read_vocab_file(path):
    """Tokens of a one-token-per-line file (blank lines skipped)."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"vocabulary file not found: {path} (expected one token per "
                                "line).")
    with open(path, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]
