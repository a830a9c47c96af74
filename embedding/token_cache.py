"""`TokenEmbeddingCache`: the one path from tokens to biLM outputs of the embedders.

The char CNN is context-free: a token's vector (layer 0) never depends on its sentence, so
an embedder needs it once per word type, not once per occurrence. The cache keeps the
vectors of a vocabulary (computed up front, as bilm-tf's `dump_token_embeddings` does, or
read from a file) and of the tokens met since (up to `max_entries` of them), runs the char
CNN only on tokens it has not seen, `batch_size` at a time, and the biLSTM from the vectors
over rows that hold the sentences back to back (`BiLM.layers_from_packed_token_embeddings`,
laid out by `keras_elmo.embedding.row_packing`). Text repeats its words, and the char
CNN's largest tensors (its convolutions before the max-pooling) are bounded by the chunk
instead of growing with the batch. The outputs equal the char path's,
`bilm(batch_to_ids(...))`, to float rounding (the tests hold them to 1e-5).

A sentence longer than `max_length` tokens runs as its windows, each a sequence of its own
in the same call (`keras_elmo.text.sentence_windows`). The functions that run the model
(the char CNN; the packed biLSTM), prepared for the Keras backend in use
(`keras_elmo.embedding.traced_bilm`), are made once per biLM and shared by every cache of
it. The vectors a cache keeps are those of the biLM's weights when the
tokens were encoded: a biLM whose weights change afterwards needs a new cache
(`ElmoEmbedder`, `keras-elmo embed` and `keras-elmo neighbors` make theirs for a biLM they
load and freeze).

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
from keras_elmo.embedding.empty_tokens import (drop_empty_tokens, is_empty_token,
                                               restore_empty_tokens)
from keras_elmo.embedding.row_packing import piece_size, plan_calls
from keras_elmo.text.sentence_windows import DEFAULT_MAX_LENGTH, check_max_length, num_windows
from keras_elmo.validation import check_int

#: Tokens per char-CNN call: bounds the char CNN's activations (its convolutions before the
#: max-pooling hold about 90 MiB per 256 tokens at the published size); calls of fewer
#: tokens keep one core waiting (docs/performance.md, "Figures behind the code's choices").
DEFAULT_BATCH_SIZE = 512
#: Tokens met in text that are kept beside the vocabulary (`P` floats each: 64 MiB at the
#: published P = 512); later new tokens are encoded for their batch only.
DEFAULT_MAX_ENTRIES = 32768
#: Tokens recomputed by `load(..., verify=True)` to check the file matches the biLM.
NUM_VERIFIED_TOKENS = 16
_VERIFY_ATOL = 1e-4
#: biLM -> its `TracedBiLM`, shared by every cache of that biLM (held weakly).
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
        batch_size: int >= 1, tokens per char-CNN call (512).
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
        if not hasattr(bilm, "layers_from_packed_token_embeddings"):
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
            out[start:start + len(chunk)] = self._traced.token_vectors(ids)[0]
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
        found = self.sentence_vectors(sentences)
        max_len = max((len(v) for v in found), default=0)
        vectors = np.zeros((len(found), max_len, self.projection_dim), np.float32)
        mask = np.zeros((len(found), max_len), bool)
        for row, sentence in enumerate(found):
            vectors[row, :len(sentence)] = sentence
            mask[row, :len(sentence)] = [not is_empty_token(t) for t in sentences[row]]
        return vectors, mask

    def sentence_vectors(self, sentences):
        """Each sentence's token vectors, float32 numpy `(n, projection_dim)`: cached rows,
        the char CNN for tokens not seen yet (`embed_tokens` without the padding).

        Args:
            sentences: list of sentences, each a list of `str` tokens (may be empty).
        """
        if isinstance(sentences, (str, bytes)):
            raise ValueError("Expected a list of sentences, each a list of tokens; received "
                             "a single string.")
        for row, sentence in enumerate(sentences):
            if isinstance(sentence, (str, bytes)):
                raise ValueError(f"Sentence {row} is a string; expected a list of tokens.")
        sentences = [list(s) for s in sentences]
        # An empty string is no token: a zero vector, never computed nor kept.
        new = [t for t in dict.fromkeys(t for s in sentences for t in s)
               if t not in self.index and not is_empty_token(t)]
        computed = dict(zip(new, self.compute(new))) if new else {}
        self.computed += len(new)
        room = self.max_entries - (len(self.index) - self.vocabulary_size)
        for token in new[:max(room, 0)]:
            self.index[token] = len(self._rows)
            self._rows.append(computed[token])
        empty = np.zeros((0, self.projection_dim), np.float32)
        no_token = np.zeros(self.projection_dim, np.float32)
        found = []
        for sentence in sentences:
            rows = [no_token if is_empty_token(token) else computed[token]
                    if (position := self.index.get(token)) is None
                    else self._rows[position] for token in sentence]
            found.append(np.stack(rows) if rows else empty)
        num_tokens = sum(1 for s in sentences for t in s if not is_empty_token(t))
        num_new = sum(1 for s in sentences for t in s if t in computed)
        self.misses += num_new
        self.hits += num_tokens - num_new
        return found

    def layers(self, sentences, max_length=DEFAULT_MAX_LENGTH, rows=None, vectors=None):
        """Every sentence's layers, a float32 numpy `(L + 1, n, 2P)` each (`(L + 1, 0, 2P)`
        for an empty one), as `bilm(batch_to_ids([sentence]))["layers"][0]`, from one biLM
        call whose rows hold the sentences back to back (`keras_elmo.embedding.row_packing`).

        Args:
            sentences: list of sentences, each a list of `str` tokens (may be empty).
            max_length: int, tokens per biLM window (512): a longer sentence runs as
                windows of that many tokens (`keras_elmo.text.sentence_windows`).
            rows: the call's layout, a list of rows of `Piece`s whose `sentence` indexes
                `sentences` (one call of `plan_calls`); None: planned here, at most a row
                per piece.
            vectors: the sentences' token vectors if the caller has them
                (`sentence_vectors(sentences)`); None: looked up here.

        Returns:
            list of arrays, one per sentence; a sentence's array may be a view of the call's
            outputs (they live as long as any of its sentences').
        """
        max_length = check_max_length(max_length)
        kept, positions = drop_empty_tokens(sentences)
        if any(where is not None for where in positions):  # "" is no token: zeros there
            if rows is not None or vectors is not None:
                raise ValueError("TokenEmbeddingCache.layers: rows and vectors must be "
                                 "planned for sentences without empty string tokens.")
            return [restore_empty_tokens(found, where)
                    for found, where in zip(self.layers(kept, max_length), positions)]
        if rows is None:
            lengths = [len(s) for s in sentences]
            pieces = sum(num_windows(n, max_length) for n in lengths if n)
            # Sentences over max_length are calls of their own there: here, one call.
            rows = [row for call in plan_calls(lengths, max_rows=max(pieces, 1),
                                               max_positions=None, max_length=max_length)
                    for row in call]
        if vectors is None:
            vectors = self.sentence_vectors(sentences)  # per sentence (n, P)
        out = self._traced.packed_layers(vectors, rows)  # (R, L + 1, S, 2P)
        results = [None] * len(sentences)
        for row, pieces in enumerate(rows):
            offset = 0
            for piece in pieces:
                found = out[row, :, offset + 1:offset + 1 + piece.stop - piece.start]
                previous = results[piece.sentence]
                results[piece.sentence] = (found if previous is None else
                                           np.concatenate([previous, found], axis=1))
                offset += piece_size(piece)
        empty = (self._traced.num_output_layers, 0, self._traced.output_dim)
        return [np.zeros(empty, np.float32) if r is None else r for r in results]

    def warm_up(self, rows):
        """Prepares the biLSTM's function for calls of `rows` rows (traced, and run once on
        a tiny input), so that the first real call does not wait for it."""
        self._traced.warm_up(rows)

    def __call__(self, sentences, max_length=DEFAULT_MAX_LENGTH):
        """The biLM's outputs for tokenised sentences, as `bilm(batch_to_ids(sentences))`.

        Returns:
            dict with `"layers"` float32 `(batch, L + 1, max_len, 2 * projection_dim)` and
            `"mask"` bool `(batch, max_len)` (tensors).
        """
        from keras import ops

        layers = self.layers(sentences, max_length)
        max_len = max((len(s) for s in sentences), default=0)
        dense = np.zeros((len(sentences), self._traced.num_output_layers, max_len,
                          self._traced.output_dim), np.float32)
        mask = np.zeros((len(sentences), max_len), bool)
        for row, found in enumerate(layers):
            dense[row, :, :found.shape[1]] = found
            mask[row, :found.shape[1]] = [not is_empty_token(t) for t in sentences[row]]
        return {"layers": ops.convert_to_tensor(dense), "mask": ops.convert_to_tensor(mask)}

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


def _traced(bilm):
    """The biLM's `TracedBiLM`, made on first use."""
    from keras_elmo.embedding.traced_bilm import TracedBiLM  # imports Keras

    if bilm not in _TRACED:
        _TRACED[bilm] = TracedBiLM(bilm)
    return _TRACED[bilm]
