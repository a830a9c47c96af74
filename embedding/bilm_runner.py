"""`BiLMRunner`: a biLM over many token lists, in length-sorted batches, streaming.

Sentences are read `batch_size * sort_batches` at a time, sorted by length inside that
window (so a batch pads little), cut into batches of at most `batch_size` sentences and at
most `max_tokens` padded token positions (rows x longest row: a budget that keeps every
biLM call about as large, and its activations about as big, whatever the lengths) where
`keras_elmo.embedding.batch_plan` finds the least work, and handed back one by one with
their keys; memory holds one window of text and two batches of outputs, whatever the
input's size. A sentence's vectors do not depend on its batch-mates (the biLM is stateless
and masks padding), so the reordering changes nothing but speed.

Each batch goes through a `TokenEmbeddingCache` (`keras_elmo.embedding.token_cache`): the
char CNN once per distinct token (beside a vocabulary's precomputed ones, if the cache was
given one), then the biLSTM from those vectors; a sentence longer than `max_length` tokens
runs as windows of `max_length` tokens in the same call and its vectors come back whole
(`keras_elmo.text.sentence_windows`).

The next batch runs in a worker thread while the caller handles the batch just returned
(writes it, reads and tokenises more lines): TensorFlow releases the GIL, so the input and
output work overlaps the model instead of adding to it.

Example:
>>> runner = BiLMRunner(bilm, batch_size=32)  # doctest: +SKIP
>>> for key, tokens, layers in runner.iter_layers(enumerate([["a", "b"], []])):
...     layers.shape  # (L + 1, len(tokens), 2 * projection_dim)
"""

import concurrent.futures

from keras_elmo.embedding.batch_plan import plan_batches
from keras_elmo.embedding.token_cache import TokenEmbeddingCache
from keras_elmo.text.sentence_windows import DEFAULT_MAX_LENGTH, check_max_length, num_windows
from keras_elmo.validation import check_int

#: Batches per sorting window.
DEFAULT_SORT_BATCHES = 32
#: Padded token positions per biLM call (`--max-tokens`): a larger budget is faster (long
#: sentences get more rows per recurrent step, each step reading the recurrent weights
#: once) and holds more activations; past this one, no faster (docs/performance.md).
DEFAULT_MAX_TOKENS = 2048


class BiLMRunner:
    """Runs a `BiLM` on tokenised sentences, through a `TokenEmbeddingCache`.

    Args:
        bilm: a stateless `keras_elmo.BiLM`.
        token_cache: the `TokenEmbeddingCache` of that biLM to use (one with a vocabulary,
            say); None: a new one without.
        batch_size: int >= 1, most sentences per biLM call (64).
        sort_batches: int >= 1, batches per length-sorting window (32).
        max_length: int >= 1, tokens per biLM window (512): longer sentences run in
            windows of this many tokens (`keras_elmo.text.sentence_windows`).
        max_tokens: int >= 1, most padded token positions per biLM call (rows x longest
            row, windows counted as rows), or None for no budget (`batch_size` alone);
            2048 by default. A sentence above the budget on its own runs alone.
    """

    def __init__(self, bilm, token_cache=None, batch_size=64, sort_batches=DEFAULT_SORT_BATCHES,
                 max_length=DEFAULT_MAX_LENGTH, max_tokens=DEFAULT_MAX_TOKENS):
        self.batch_size = check_int("batch_size", batch_size)
        self.sort_batches = check_int("sort_batches", sort_batches)
        self.max_tokens = check_int("max_tokens", max_tokens, optional=True)
        self.max_length = check_max_length(max_length)
        self.token_cache = token_cache if token_cache is not None else TokenEmbeddingCache(bilm)
        self.bilm = bilm
        self.num_output_layers = bilm.num_output_layers
        self.output_dim = bilm.output_dim

    def layers(self, sentences):
        """float32 numpy `(batch, L + 1, max_len, 2 * projection_dim)`, zero past each end;
        sentences longer than `max_length` tokens run in windows (one call in all)."""
        return self.token_cache.layers(sentences, self.max_length)

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
                running = worker.submit(self.layers, sentences)
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
        """Batches of a window sorted by length, cut where `plan_batches` finds it cheapest:
        `batch_size` sentences at most, and at most `max_tokens` padded positions (rows x
        the longest row; windows count as rows)."""
        window.sort(key=lambda item: len(item[1]))
        lengths = [len(tokens) for _, tokens in window]
        for start, stop in plan_batches(
                [min(n, self.max_length) for n in lengths], self.batch_size, self.max_tokens,
                rows=[num_windows(n, self.max_length) for n in lengths]):
            yield ([key for key, _ in window[start:stop]],
                   [tokens for _, tokens in window[start:stop]])

