"""`TokenVectorMemo`: the char CNN run once per distinct token of a corpus, in bounded chunks.

The char CNN is context-free: a token's vector (layer 0) never depends on its sentence, so a
corpus embedder needs it once per word type, not once per occurrence. The memo keeps the
vectors of the tokens seen so far (up to `max_entries` of them, `P` floats each), runs the
char CNN only on new ones, `chunk_tokens` at a time, and the biLSTM from the vectors
(`BiLM.layers_from_token_embeddings`). Two gains on a corpus: text repeats its words (the
People's Daily held-out text: 7,942 tokens, 2,485 types in its first 300 lines), and
the char CNN's largest tensors (its convolutions before the max-pooling: up to about 92,000
floats per token at the published size) are bounded by the chunk instead of growing with
the batch. Measured on those 300 lines at the published size: about 2-3% less CPU time.

Unlike `TokenEmbeddingCache` it needs no vocabulary file and computes nothing up front. The
outputs equal the char path's to float rounding (the tests hold them to 1e-5).

Example:
>>> memo = TokenVectorMemo(bilm)  # doctest: +SKIP
>>> out = memo.layers([["a", "b"], ["a"]])  # (2, L + 1, 2, 2P) numpy; "a" encoded once
"""

import weakref

import numpy as np

#: Distinct tokens remembered (float32 `P` each: 64 MiB at the published P = 512).
DEFAULT_MAX_ENTRIES = 32768
#: Tokens per char-CNN call (the published CNN's activations: about 90 MiB per 256 tokens).
DEFAULT_CHUNK_TOKENS = 256
#: biLM -> (char CNN function, biLSTM-from-vectors function), traced once per process.
_FUNCTIONS = weakref.WeakKeyDictionary()


class TokenVectorMemo:
    """Char-CNN vectors of the tokens seen so far, and the biLM run from them.

    Args:
        bilm: a stateless `keras_elmo.BiLM`.
        max_entries: int >= 0, most distinct tokens kept (later new tokens are computed
            for their batch and not kept).
        chunk_tokens: int >= 1, distinct tokens per char-CNN call.

    Attributes:
        computed: tokens the char CNN has encoded so far (each distinct token once while
            there is room).
    """

    def __init__(self, bilm, max_entries=DEFAULT_MAX_ENTRIES,
                 chunk_tokens=DEFAULT_CHUNK_TOKENS):
        for name, value, low in (("max_entries", max_entries, 0),
                                 ("chunk_tokens", chunk_tokens, 1)):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"{name} must be an int >= {low}; received {value!r}.")
        self.bilm = bilm
        self.max_entries = max_entries
        self.chunk_tokens = chunk_tokens
        self.projection_dim = bilm.options.projection_dim
        self.vectors = {}  # token -> float32 (P,)
        self.computed = 0
        self._char_cnn, self._contextualize = _functions(bilm)
        # The functions outlive a memo; its weights are the biLM's as they are now.
        self._contextualize.refresh()

    def __len__(self):
        return len(self.vectors)

    def token_vectors(self, sentences):
        """`(vectors, mask)`: float32 `(batch, max_len, P)` (zero at padding), bool
        `(batch, max_len)`; new tokens go through the char CNN, in chunks."""
        max_len = max((len(s) for s in sentences), default=0)
        vectors = np.zeros((len(sentences), max_len, self.projection_dim), np.float32)
        mask = np.zeros((len(sentences), max_len), bool)
        new = [t for t in dict.fromkeys(t for s in sentences for t in s)
               if t not in self.vectors]
        local = dict(zip(new, self._encode(new))) if new else {}
        room = self.max_entries - len(self.vectors)
        if room > 0:
            self.vectors.update(list(local.items())[:room])
        for row, sentence in enumerate(sentences):
            for column, token in enumerate(sentence):
                found = self.vectors.get(token)
                vectors[row, column] = local[token] if found is None else found
            mask[row, :len(sentence)] = True
        return vectors, mask

    def layers(self, sentences):
        """float32 numpy `(batch, L + 1, max_len, 2P)`, as `bilm(batch_to_ids(sentences))`."""
        vectors, mask = self.token_vectors(sentences)
        return np.asarray(self._contextualize(vectors, mask))

    def _encode(self, tokens):
        """Char-CNN vectors of distinct `tokens` -> float32 `(len(tokens), P)`."""
        from keras_elmo import batch_to_ids

        chars = self.bilm.options.max_characters_per_token
        out = np.empty((len(tokens), self.projection_dim), np.float32)
        for start in range(0, len(tokens), self.chunk_tokens):
            chunk = tokens[start:start + self.chunk_tokens]
            ids = batch_to_ids([chunk], chars)  # (1, n, chars)
            out[start:start + len(chunk)] = np.asarray(self._char_cnn(ids), np.float32)[0]
        self.computed += len(tokens)
        return out


def _functions(bilm):
    """The biLM's traced char CNN and biLSTM-from-vectors functions, made once per biLM
    (the latter `BiLM.traced_layers_from_token_embeddings`: one trace for one-row batches,
    one for the rest).

    `autograph=False`: the model's control flow is TensorFlow ops already (`tf.while_loop`);
    converting its Python code only cost tracing time (the published biLSTM traced in
    0.50 s with it, 0.36 s without, the same graph)."""
    if bilm not in _FUNCTIONS:
        import tensorflow as tf

        chars = bilm.options.max_characters_per_token
        model = weakref.ref(bilm)  # the cache must not keep the biLM alive
        char_cnn = tf.function(
            lambda ids: tf.cast(model().token_embedder(ids), tf.float32),
            input_signature=[tf.TensorSpec([None, None, chars], tf.int32)],
            autograph=False)
        _FUNCTIONS[bilm] = (char_cnn, bilm.traced_layers_from_token_embeddings())
    return _FUNCTIONS[bilm]
