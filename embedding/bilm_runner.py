"""`BiLMRunner`: a biLM over many token lists, in length-sorted batches, streaming.

Sentences are read `batch_size * sort_batches` at a time, sorted by length inside that
window (so a batch pads little), run `batch_size` at a time and handed back one by one
with their keys; memory holds one window of text and two batches of outputs, whatever the
input's size. A sentence's vectors do not depend on its batch-mates (the biLM is
stateless and masks padding), so the reordering changes nothing but speed.

The next batch's char ids and biLM call run in a worker thread while the caller handles
the batch just returned (writes it, reads and tokenises more lines): TensorFlow releases
the GIL, so the input and output work overlaps the model instead of adding to it. The
traced inference function is shared by every runner of the same biLM (one trace per
process, not one per file).

Example:
>>> runner = BiLMRunner(bilm, batch_size=32)  # doctest: +SKIP
>>> for key, tokens, layers in runner.iter_layers(enumerate([["a", "b"], []])):
...     layers.shape  # (L + 1, len(tokens), 2 * projection_dim)
"""

import concurrent.futures
import weakref

import numpy as np

#: Batches per sorting window.
DEFAULT_SORT_BATCHES = 32
#: biLM -> its traced inference function (char ids -> layers), shared by all runners.
_INFER_FUNCTIONS = weakref.WeakKeyDictionary()


class BiLMRunner:
    """Runs a `BiLM` (or its `TokenEmbeddingCache`) on tokenised sentences.

    Args:
        bilm: a stateless `keras_elmo.BiLM`.
        token_cache: optional `TokenEmbeddingCache` of that biLM (faster token layer).
        batch_size: int >= 1, sentences per biLM call (64).
        sort_batches: int >= 1, batches per length-sorting window (32).
    """

    def __init__(self, bilm, token_cache=None, batch_size=64, sort_batches=DEFAULT_SORT_BATCHES):
        for name, value in (("batch_size", batch_size), ("sort_batches", sort_batches)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive int; received {value!r}.")
        if getattr(bilm, "stateful", False):
            raise ValueError("BiLMRunner needs a stateless biLM (a stateful one would make a "
                             "sentence's vectors depend on the sentences before it).")
        self.bilm = bilm
        self.token_cache = token_cache
        self.batch_size = batch_size
        self.sort_batches = sort_batches
        self.num_output_layers = bilm.num_output_layers
        self.output_dim = bilm.output_dim
        chars = bilm.options.max_characters_per_token
        self._char_ids = lambda sentences: _batch_to_ids(sentences, chars)
        self._infer = _infer_function(bilm)

    def layers(self, sentences):
        """float32 numpy `(batch, L + 1, max_len, 2 * projection_dim)`, zero past each end."""
        if self.token_cache is not None:
            return np.asarray(self.token_cache(sentences)["layers"])
        return np.asarray(self._infer(self._char_ids(sentences)))

    def iter_batches(self, keyed_sentences):
        """Yields `(keys, sentences, layers)` per batch, length-sorted inside each window.

        The next batch runs in a worker thread while the caller handles this one.

        Args:
            keyed_sentences: iterable of `(key, tokens)`; `tokens` a list of str (may be
                empty).
        """
        with concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="keras-elmo-bilm") as worker:
            pending = None
            for keys, sentences in self._sorted_batches(keyed_sentences):
                running = worker.submit(self._batch_layers, sentences)
                if pending is not None:
                    yield pending[0], pending[1], pending[2].result()
                pending = (keys, sentences, running)
            if pending is not None:
                yield pending[0], pending[1], pending[2].result()

    def iter_layers(self, keyed_sentences):
        """Yields `(key, tokens, layers)` per sentence; `layers` `(L + 1, n, 2P)` float32."""
        for keys, sentences, layers in self.iter_batches(keyed_sentences):
            for row, (key, tokens) in enumerate(zip(keys, sentences)):
                yield key, tokens, layers[row, :, :len(tokens)]

    def _sorted_batches(self, keyed_sentences):
        """`(keys, sentences)` per batch: windows read lazily, sorted by length."""
        window = []
        limit = self.batch_size * self.sort_batches
        for item in keyed_sentences:
            window.append(item)
            if len(window) >= limit:
                yield from self._window_batches(window)
                window = []
        if window:
            yield from self._window_batches(window)

    def _window_batches(self, window):
        window.sort(key=lambda item: len(item[1]))
        for start in range(0, len(window), self.batch_size):
            batch = window[start:start + self.batch_size]
            yield [key for key, _ in batch], [tokens for _, tokens in batch]

    def _batch_layers(self, sentences):
        if max(len(s) for s in sentences) == 0:  # nothing to run
            return np.zeros((len(sentences), self.num_output_layers, 0, self.output_dim),
                            np.float32)
        return self.layers(sentences)


def _infer_function(bilm):
    """The biLM's traced `char ids -> layers` function, made once per biLM."""
    if bilm not in _INFER_FUNCTIONS:
        import tensorflow as tf

        chars = bilm.options.max_characters_per_token
        model = weakref.ref(bilm)  # the cache must not keep the biLM alive
        _INFER_FUNCTIONS[bilm] = tf.function(
            lambda ids: model()(ids, training=False)["layers"],
            input_signature=[tf.TensorSpec([None, None, chars], tf.int32)])
    return _INFER_FUNCTIONS[bilm]


def _batch_to_ids(sentences, chars):
    from keras_elmo import batch_to_ids

    return batch_to_ids(sentences, chars)
