"""`TokenEmbeddingCache`: the char CNN's output for a vocabulary, computed once and reused.

The char CNN is context-free: a token's vector never depends on its sentence. The cache
runs it once over a vocabulary (as bilm-tf's `dump_token_embeddings` does) and afterwards
looks vectors up; only tokens outside the vocabulary (OOV) still go through the char CNN,
so any token is accepted. The biLSTM then runs from the looked-up vectors through
`BiLM.layers_from_token_embeddings`, and the outputs equal the char path's (to float
rounding; the tests hold them to 1e-5).

File format (`save`/`load`): an HDF5 file with `embedding` float32 `(V, projection_dim)`,
row k = token k, as bilm-tf's `dump_token_embeddings` writes it, plus `tokens` (V UTF-8
strings) so that the file is self-contained; a bilm-tf file without `tokens` loads with its
vocabulary file.

Example:
>>> bilm = keras_elmo.BiLM.from_weights("options.json", "weights.hdf5")  # doctest: +SKIP
>>> cache = TokenEmbeddingCache(bilm, ["<S>", "</S>", "<UNK>", "的", "中国"])
>>> out = cache([["中国", "的", "火星"], ["的"]])  # "火星" is OOV: char CNN
>>> out["layers"].shape  # (2, L + 1, 3, 2 * projection_dim), as bilm(batch_to_ids(...))
>>> cache.save("token_embeddings.hdf5")
"""

import os

import h5py
import numpy as np
import tensorflow as tf

from keras_elmo.process.atomic_file import atomic_path
from keras_elmo.text.characters import batch_to_ids

#: Tokens per char-CNN call while filling the cache.
DEFAULT_BATCH_SIZE = 1024
#: Tokens recomputed by `load(..., verify=True)` to check the file matches the biLM.
NUM_VERIFIED_TOKENS = 16
_VERIFY_ATOL = 1e-4


class TokenEmbeddingCache:
    """Char-CNN vectors of a fixed vocabulary, plus the biLM run from them.

    Args:
        bilm: a `keras_elmo.BiLM` (its `token_embedder` fills the cache; its biLSTM runs
            in `__call__`).
        tokens: iterable of `str`, the vocabulary; repeats are kept once (first position).
        embeddings: optional float array `(len(tokens), projection_dim)` to use instead of
            computing them (what `load` passes).
        batch_size: int, tokens per char-CNN call while filling (1024).

    Attributes:
        tokens: list of the distinct cached tokens, in order.
        embeddings: float32 numpy `(len(tokens), projection_dim)`.
        hits, misses: token lookups found / not found in the cache so far (padding not
            counted).

    Example:
    >>> cache = TokenEmbeddingCache(keras_elmo.BiLM(keras_elmo.BiLMOptions.tiny()),
    ...                             ["a", "b"])
    >>> vectors, mask = cache.embed_tokens([["a", "zz"], ["b"]])  # (2, 2, 8), (2, 2)
    """

    def __init__(self, bilm, tokens, embeddings=None, batch_size=DEFAULT_BATCH_SIZE):
        if not hasattr(bilm, "layers_from_token_embeddings"):
            raise ValueError("TokenEmbeddingCache needs a keras_elmo.BiLM; received "
                             f"{type(bilm).__name__}.")
        if isinstance(tokens, (str, bytes)):
            raise ValueError("tokens must be a list of tokens; received a single string.")
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int; received {batch_size!r}.")
        self.bilm = bilm
        self.batch_size = batch_size
        self.projection_dim = bilm.options.projection_dim
        self._layers = bilm.traced_layers_from_token_embeddings()
        # No autograph: the model's control flow is TensorFlow ops already (faster tracing).
        self._char_cnn = tf.function(
            bilm.token_embedder,
            input_signature=[tf.TensorSpec([None, None, bilm.options.max_characters_per_token],
                                           tf.int32)],
            autograph=False)
        self.index = {}
        for token in tokens:
            if not isinstance(token, str):
                raise ValueError(f"Cached tokens must be str; received {type(token).__name__} "
                                 f"{token!r}.")
            self.index.setdefault(token, len(self.index))
        self.tokens = list(self.index)
        if embeddings is None:
            embeddings = self.compute(self.tokens)
        embeddings = np.asarray(embeddings, dtype=np.float32)
        if embeddings.shape != (len(self.tokens), self.projection_dim):
            raise ValueError(f"embeddings must have shape ({len(self.tokens)}, "
                             f"{self.projection_dim}) (distinct tokens, projection_dim); "
                             f"received {embeddings.shape}.")
        self.embeddings = embeddings
        self.hits = self.misses = 0

    def __len__(self):
        return len(self.tokens)

    def __contains__(self, token):
        return token in self.index

    # --- the char CNN -----------------------------------------------------------------------
    def compute(self, tokens):
        """Char-CNN vectors of `tokens` (list of str) -> float32 `(len(tokens), P)`."""
        chars = self.bilm.options.max_characters_per_token
        out = np.zeros((len(tokens), self.projection_dim), np.float32)
        for start in range(0, len(tokens), self.batch_size):
            chunk = tokens[start:start + self.batch_size]
            ids = batch_to_ids([chunk], chars)  # (1, n, chars)
            out[start:start + len(chunk)] = self._char_cnn(ids).numpy()[0]
        return out

    # --- lookups ----------------------------------------------------------------------------
    def embed_tokens(self, sentences):
        """Token vectors of a batch: cached rows, the char CNN for OOV tokens.

        Args:
            sentences: list of sentences, each a list of `str` tokens (may be empty).

        Returns:
            `(vectors, mask)`: float32 numpy `(batch, max_len, projection_dim)` (zero at
            padding) and bool `(batch, max_len)`.
        """
        if isinstance(sentences, (str, bytes)):
            raise ValueError("embed_tokens expects a list of sentences, each a list of "
                             "tokens; received a single string.")
        sentences = [list(s) for s in sentences]
        max_len = max((len(s) for s in sentences), default=0)
        vectors = np.zeros((len(sentences), max_len, self.projection_dim), np.float32)
        mask = np.zeros((len(sentences), max_len), bool)
        missing = {}  # OOV token -> [(row, column), ...]
        for row, sentence in enumerate(sentences):
            if isinstance(sentence, (str, bytes)):
                raise ValueError(f"Sentence {row} is a string; expected a list of tokens.")
            for column, token in enumerate(sentence):
                mask[row, column] = True
                position = self.index.get(token)
                if position is None:
                    missing.setdefault(token, []).append((row, column))
                else:
                    vectors[row, column] = self.embeddings[position]
        num_tokens = int(mask.sum())
        if missing:
            oov = list(missing)
            computed = self.compute(oov)
            for token, vector in zip(oov, computed):
                rows, columns = zip(*missing[token])
                vectors[list(rows), list(columns)] = vector
        num_missing = sum(len(places) for places in missing.values())
        self.misses += num_missing
        self.hits += num_tokens - num_missing
        return vectors, mask

    def __call__(self, sentences):
        """The biLM's outputs for tokenised sentences, as `bilm(batch_to_ids(sentences))`.

        Returns:
            dict with `"layers"` float32 `(batch, L + 1, max_len, 2 * projection_dim)` and
            `"mask"` bool `(batch, max_len)` (tensors).
        """
        vectors, mask = self.embed_tokens(sentences)
        return {"layers": self._layers(vectors, mask), "mask": tf.convert_to_tensor(mask)}

    # --- file -------------------------------------------------------------------------------
    def save(self, path):
        """Writes `embedding` `(V, P)` and `tokens` to an HDF5 file (atomically)."""
        with atomic_path(path) as tmp, h5py.File(tmp, "w") as f:
            f.create_dataset("embedding", data=self.embeddings)
            f.create_dataset("tokens", data=self.tokens, dtype=h5py.string_dtype("utf-8"))

    @classmethod
    def load(cls, path, bilm, vocab_file=None, verify=True, **kwargs):
        """A cache from a file written by `save` (or by bilm-tf's `dump_token_embeddings`).

        Args:
            path: the HDF5 file.
            bilm: the `BiLM` the vectors were computed with.
            vocab_file: one token per line; needed only when the file has no `tokens`.
            verify: recompute the first `NUM_VERIFIED_TOKENS` tokens and refuse a file made
                with other weights (True).

        Raises:
            FileNotFoundError: no file at `path` (or at `vocab_file`).
            ValueError: unreadable file, missing dataset, wrong shape, or vectors that do
                not match `bilm`.
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
        cache = cls(bilm, tokens, embeddings=embeddings, **kwargs)
        if verify and tokens:
            sample = tokens[:NUM_VERIFIED_TOKENS]
            difference = np.abs(cache.compute(sample) - cache.embeddings[:len(sample)]).max()
            if not difference <= _VERIFY_ATOL:
                raise ValueError(f"token cache file {path} does not match this biLM's char "
                                 f"CNN (max |difference| {difference:.3g} over the first "
                                 f"{len(sample)} tokens, expected <= {_VERIFY_ATOL}); it was "
                                 "made with other weights.")
        return cache


def read_vocab_file(path):
    """Tokens of a one-token-per-line file (blank lines skipped)."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"vocabulary file not found: {path} (expected one token per "
                                "line).")
    with open(path, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]
