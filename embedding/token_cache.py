"""`TokenEmbeddingCache`: the one path from tokens to biLM outputs of the embedders.

The char CNN is context-free: a token's vector (layer 0) never depends on its sentence, so
an embedder needs it once per word type, not once per occurrence. The cache keeps the
vectors of a vocabulary (computed up front, as bilm-tf's `dump_token_embeddings` does, or
read from a file) and of the tokens met since (up to `max_entries` of them), runs the char
CNN only on tokens it has not seen, `batch_size` at a time, and the biLSTM from the vectors
(`BiLM.layers_from_token_embeddings`). Text repeats its words, and the char CNN's largest
tensors (its convolutions before the max-pooling) are bounded by the chunk instead of
growing with the batch. The outputs equal the char path's, `bilm(batch_to_ids(...))`, to
float rounding (the tests hold them to 1e-5).

The traced functions (the char CNN; the biLSTM for one-row batches and for the rest, the
latter running over-long sentences in windows: `keras_elmo.text.sentence_windows`) are
made once per biLM and shared by every cache of it. `ElmoEmbedder`, `keras-elmo embed` and
`keras-elmo neighbors` freeze their biLM (`trainable=False`), so its one-row batches read
the LSTM kernels from copies in the order one row reads fastest (`LSTMProjectionCell`).

Example:
>>> bilm = keras_elmo.BiLM.from_weights("options.json", "weights.hdf5")  # doctest: +SKIP
>>> cache = TokenEmbeddingCache(bilm, ["<S>", "</S>", "<UNK>", "的", "中国"])
>>> out = cache([["中国", "的", "火星"], ["的"]])  # "火星" is new: the char CNN, then kept
>>> out["layers"].shape  # (2, L + 1, 3, 2 * projection_dim), as bilm(batch_to_ids(...))
>>> cache.save("token_embeddings.hdf5")
"""

import weakref

import numpy as np

from keras_elmo.formats.token_cache import read_token_embeddings, write_token_embeddings
from keras_elmo.text.sentence_windows import (DEFAULT_MAX_LENGTH, check_max_length,
                                              join_windows, split_windows)
from keras_elmo.validation import check_int

#: Tokens per char-CNN call: bounds the char CNN's activations (its convolutions before the
#: max-pooling hold about 90 MiB per 256 tokens at the published size).
DEFAULT_BATCH_SIZE = 256
#: Tokens met in text that are kept beside the vocabulary (`P` floats each: 64 MiB at the
#: published P = 512); later new tokens are encoded for their batch only.
DEFAULT_MAX_ENTRIES = 32768
#: Tokens recomputed by `load(..., verify=True)` to check the file matches the biLM.
NUM_VERIFIED_TOKENS = 16
_VERIFY_ATOL = 1e-4
#: biLM -> its `_TracedBiLM`, shared by every cache of that biLM (held weakly).
_TRACED = weakref.WeakKeyDictionary()


class TokenEmbeddingCache:
    """Char-CNN vectors of tokens, each computed once, and the biLM run from them.

    Args:
        bilm: a stateless `keras_elmo.BiLM` (its `token_embeddings` encode tokens, spelled
            by `bilm.batch_to_ids`: a vocabulary model needs its `vocabulary`; its biLSTM
            runs in `__call__`).
        tokens: iterable of `str`, a vocabulary encoded up front (repeats kept once, at
            their first position); none by default.
        embeddings: optional float array `(len(tokens), projection_dim)` to use instead of
            computing them (what `load` passes).
        batch_size: int >= 1, tokens per char-CNN call (256).
        max_entries: int >= 0, tokens met in text kept beside the vocabulary (32768).

    Attributes:
        tokens: list of the distinct cached tokens, in order (the vocabulary first).
        hits, misses: token lookups found in the cache / not found so far (padding not
            counted).
        computed: distinct tokens the char CNN has encoded so far (the vocabulary's not
            counted).

    Example:
    >>> cache = TokenEmbeddingCache(keras_elmo.BiLM(keras_elmo.BiLMOptions.tiny()),
    ...                             ["a", "b"])
    >>> vectors, mask = cache.embed_tokens([["a", "zz"], ["b"]])  # (2, 2, 8), (2, 2)
    """

    def __init__(self, bilm, tokens=(), embeddings=None, batch_size=DEFAULT_BATCH_SIZE,
                 max_entries=DEFAULT_MAX_ENTRIES):
        if not hasattr(bilm, "layers_from_token_embeddings"):
            raise ValueError("TokenEmbeddingCache needs a keras_elmo.BiLM; received "
                             f"{type(bilm).__name__}.")
        bilm.require_vocabulary("TokenEmbeddingCache")
        if getattr(bilm, "stateful", False):
            raise ValueError("TokenEmbeddingCache needs a stateless biLM (a stateful one would "
                             "make a sentence's vectors depend on the sentences before it).")
        if isinstance(tokens, (str, bytes)):
            raise ValueError("tokens must be a list of tokens; received a single string.")
        self.bilm = bilm
        self.batch_size = check_int("batch_size", batch_size)
        self.max_entries = check_int("max_entries", max_entries, minimum=0)
        self.projection_dim = bilm.options.projection_dim
        self._traced = _traced(bilm)
        self.index = {}
        for token in tokens:
            if not isinstance(token, str):
                raise ValueError(f"Cached tokens must be str; received {type(token).__name__} "
                                 f"{token!r}.")
            self.index.setdefault(token, len(self.index))
        self.vocabulary_size = len(self.index)
        if embeddings is None:
            embeddings = self.compute(list(self.index))
        embeddings = np.asarray(embeddings, dtype=np.float32)
        if embeddings.shape != (len(self.index), self.projection_dim):
            raise ValueError(f"embeddings must have shape ({len(self.index)}, "
                             f"{self.projection_dim}) (distinct tokens, projection_dim); "
                             f"received {embeddings.shape}.")
        self._rows = list(embeddings)  # one (P,) row per cached token
        self.hits = self.misses = self.computed = 0

    @property
    def tokens(self):
        return list(self.index)

    @property
    def embeddings(self):
        """float32 numpy `(len(self), projection_dim)`, row k = `tokens[k]`."""
        if not self._rows:
            return np.zeros((0, self.projection_dim), np.float32)
        return np.stack(self._rows)

    def __len__(self):
        return len(self.index)

    def __contains__(self, token):
        return token in self.index

    # --- the char CNN -----------------------------------------------------------------------
    def compute(self, tokens):
        """Char-CNN vectors of `tokens` (list of str) -> float32 `(len(tokens), P)`, in
        calls of `batch_size` tokens."""
        out = np.empty((len(tokens), self.projection_dim), np.float32)
        for start in range(0, len(tokens), self.batch_size):
            chunk = tokens[start:start + self.batch_size]
            ids = self.bilm.batch_to_ids([chunk])  # (1, n, chars) [and word ids (1, n)]
            out[start:start + len(chunk)] = np.asarray(self._traced.token_vectors(ids))[0]
        return out

    # --- lookups ----------------------------------------------------------------------------
    def embed_tokens(self, sentences):
        """Token vectors of a batch: cached rows, the char CNN for tokens not seen yet.

        Args:
            sentences: list of sentences, each a list of `str` tokens (may be empty).

        Returns:
            `(vectors, mask)`: float32 numpy `(batch, max_len, projection_dim)` (zero at
            padding) and bool `(batch, max_len)`.
        """
        if isinstance(sentences, (str, bytes)):
            raise ValueError("embed_tokens expects a list of sentences, each a list of "
                             "tokens; received a single string.")
        for row, sentence in enumerate(sentences):
            if isinstance(sentence, (str, bytes)):
                raise ValueError(f"Sentence {row} is a string; expected a list of tokens.")
        sentences = [list(s) for s in sentences]
        new = [t for t in dict.fromkeys(t for s in sentences for t in s) if t not in self.index]
        computed = dict(zip(new, self.compute(new))) if new else {}
        self.computed += len(new)
        room = self.max_entries - (len(self.index) - self.vocabulary_size)
        for token in new[:max(room, 0)]:
            self.index[token] = len(self._rows)
            self._rows.append(computed[token])
        max_len = max((len(s) for s in sentences), default=0)
        vectors = np.zeros((len(sentences), max_len, self.projection_dim), np.float32)
        mask = np.zeros((len(sentences), max_len), bool)
        for row, sentence in enumerate(sentences):
            for column, token in enumerate(sentence):
                position = self.index.get(token)
                vectors[row, column] = (computed[token] if position is None
                                        else self._rows[position])
            mask[row, :len(sentence)] = True
        num_new = sum(1 for s in sentences for t in s if t in computed)
        self.misses += num_new
        self.hits += int(mask.sum()) - num_new
        return vectors, mask

    def layers(self, sentences, max_length=DEFAULT_MAX_LENGTH):
        """float32 numpy `(batch, L + 1, max_len, 2P)` of tokenised sentences, zero past
        each end, as `bilm(batch_to_ids(sentences))["layers"]`; a sentence longer than
        `max_length` tokens runs in windows of that many (one call in all)."""
        vectors, mask = self.embed_tokens(sentences)
        return np.asarray(self._traced.layers(vectors, mask, check_max_length(max_length)))

    def __call__(self, sentences, max_length=DEFAULT_MAX_LENGTH):
        """The biLM's outputs for tokenised sentences, as `bilm(batch_to_ids(sentences))`.

        Returns:
            dict with `"layers"` float32 `(batch, L + 1, max_len, 2 * projection_dim)` and
            `"mask"` bool `(batch, max_len)` (tensors).
        """
        import tensorflow as tf

        vectors, mask = self.embed_tokens(sentences)
        layers = self._traced.layers(vectors, mask, check_max_length(max_length))
        return {"layers": layers, "mask": tf.convert_to_tensor(mask)}

    # --- file -------------------------------------------------------------------------------
    def save(self, path):
        """Writes every cached token and its vector to an HDF5 file (atomically;
        `keras_elmo.formats.token_cache`)."""
        write_token_embeddings(path, self.tokens, self.embeddings)

    @classmethod
    def load(cls, path, bilm, vocab_file=None, verify=True, **kwargs):
        """A cache from a file written by `save` (or by bilm-tf's `dump_token_embeddings`).

        Args:
            path: the HDF5 file.
            bilm: the `BiLM` the vectors were computed with.
            vocab_file: one token per line; needed only when the file has no `tokens`.
            verify: recompute the first `NUM_VERIFIED_TOKENS` tokens and refuse a file made
                with other weights (True).
            **kwargs: the constructor's `batch_size`, `max_entries`.

        Raises:
            FileNotFoundError: no file at `path` (or at `vocab_file`).
            ValueError: unreadable file, missing dataset, wrong shape, or vectors that do
                not match `bilm`.
        """
        tokens, embeddings = read_token_embeddings(path, vocab_file)
        cache = cls(bilm, tokens, embeddings=embeddings, **kwargs)
        if verify and tokens:
            sample = tokens[:NUM_VERIFIED_TOKENS]
            difference = np.abs(cache.compute(sample) - embeddings[:len(sample)]).max()
            if not difference <= _VERIFY_ATOL:
                raise ValueError(f"token cache file {path} does not match this biLM's char "
                                 f"CNN (max |difference| {difference:.3g} over the first "
                                 f"{len(sample)} tokens, expected <= {_VERIFY_ATOL}); it was "
                                 "made with other weights.")
        return cache


class _TracedBiLM:
    """A biLM's traced functions for the cache: `token_vectors(ids)` (the token encoder,
    float32 out) and `layers(vectors, mask, max_length)` (the biLSTM from token vectors).

    `layers` runs one function for batches of one row, one for batches of several, and one
    for batches holding a sentence longer than `max_length` (run in windows), each traced
    once for every length on its first use: the one-row function holds only the one-row
    loop (`ResidualBiLSTM` chooses its loop from the batch size traced), and only batches
    that need windows pay for them. No autograph: the model's control flow is TensorFlow
    ops already. The biLM is held weakly (`_TRACED` is keyed by it).
    """

    def __init__(self, bilm):
        import tensorflow as tf

        model = weakref.ref(bilm)
        self.num_output_layers, self.output_dim = bilm.num_output_layers, bilm.output_dim
        chars, dim = bilm.options.max_characters_per_token, bilm.options.projection_dim

        def token_vectors(ids):  # char ids, or a word model's dict
            return tf.cast(model().token_embeddings(ids), tf.float32)  # (batch, T, P)

        def layers(vectors, mask):
            return model().layers_from_token_embeddings(vectors, mask)["layers"]

        def windowed(vectors, mask, max_length):
            lengths = tf.reduce_sum(tf.cast(mask, tf.int32), axis=1)  # (batch,)
            window_vectors, window_lengths, firsts = split_windows(vectors, lengths, max_length)
            window_mask = tf.sequence_mask(window_lengths, tf.shape(window_vectors)[1])
            out = layers(window_vectors, window_mask)  # (W, L + 1, window_steps, 2P)
            joined = join_windows(tf.transpose(out, (0, 2, 1, 3)), firsts, lengths,
                                  max_length)  # (batch, T, L + 1, 2P)
            return tf.transpose(joined, (0, 2, 1, 3))  # (batch, L + 1, T, 2P)

        vectors_spec = tf.TensorSpec([None, None, dim], tf.float32)
        mask_spec = tf.TensorSpec([None, None], tf.bool)
        ids_spec = tf.TensorSpec([None, None, chars], tf.int32)
        if bilm.word_embedder is not None:
            ids_spec = {"char_ids": ids_spec, "word_ids": tf.TensorSpec([None, None], tf.int32)}
        self.token_vectors = tf.function(token_vectors, input_signature=[ids_spec],
                                         autograph=False)
        self._one_row = tf.function(
            layers, input_signature=[tf.TensorSpec([1, None, dim], tf.float32),
                                     tf.TensorSpec([1, None], tf.bool)], autograph=False)
        self._rows = tf.function(layers, input_signature=[vectors_spec, mask_spec],
                                 autograph=False)
        self._windowed = tf.function(
            windowed, input_signature=[vectors_spec, mask_spec, tf.TensorSpec([], tf.int32)],
            autograph=False)

    def layers(self, vectors, mask, max_length):
        """float32 `(batch, L + 1, T, 2P)` from numpy `(batch, T, P)` vectors and
        `(batch, T)` mask, zero past each row's end."""
        import tensorflow as tf

        batch, steps = mask.shape
        if steps == 0:  # nothing to run
            return tf.zeros((batch, self.num_output_layers, 0, self.output_dim))
        if steps > max_length:
            return self._windowed(vectors, mask, max_length)
        return (self._one_row if batch == 1 else self._rows)(vectors, mask)


def _traced(bilm):
    """The biLM's `_TracedBiLM`, made on first use."""
    if bilm not in _TRACED:
        _TRACED[bilm] = _TracedBiLM(bilm)
    return _TRACED[bilm]
