"""`BiLMRunner`: a biLM over many token lists, in packed calls, streaming.

Sentences are read `batch_size * sort_batches` at a time, and each such window is cut into
biLM calls of at most `batch_size` rows and `max_tokens` positions (rows x steps) whose rows
hold the sentences back to back (`keras_elmo.embedding.row_packing`: each sentence framed
by its own `<S>` ... `</S>` and run from a zero state, short ones sharing a row, so rows are
nearly full whatever the lengths); the calls are handed back one by one with their
sentences' keys, in the calls' order; memory holds one window of text and two calls of
outputs, whatever the input's size. A sentence's vectors do not depend on its call-mates
(the biLM is stateless and restarts at every sentence), so the packing changes nothing but
speed.

Each call goes through a `TokenEmbeddingCache` (`keras_elmo.embedding.token_cache`): the
char CNN once per distinct token (beside a vocabulary's precomputed ones, if the cache was
given one), then the biLSTM from those vectors; a sentence longer than `max_length` tokens
runs as windows of `max_length` tokens in one call and its vectors come back whole
(`keras_elmo.text.sentence_windows`).

The next call runs in a worker thread while the caller handles the call just returned
(writes it, reads and tokenises more lines): TensorFlow, XLA and PyTorch release the GIL,
so the input and output work overlaps the model instead of adding to it. Beside the first
call's char CNN a second thread prepares the biLSTM's function under TensorFlow
(`TokenEmbeddingCache.warm_up`).

Example:
>>> runner = BiLMRunner(bilm, batch_size=32)  # doctest: +SKIP
>>> for key, tokens, layers in runner.iter_layers(enumerate([["a", "b"], []])):
...     layers.shape  # (L + 1, len(tokens), 2 * projection_dim)
"""

import concurrent.futures

from keras_elmo.embedding.row_packing import plan_calls
from keras_elmo.embedding.token_cache import TokenEmbeddingCache
from keras_elmo.text.sentence_windows import DEFAULT_MAX_LENGTH, check_max_length
from keras_elmo.validation import check_int

#: Sentences planned together, in multiples of `batch_size`.
DEFAULT_SORT_BATCHES = 32
#: Positions per biLM call (`--max-tokens`): 64 rows of 128 steps. A larger budget holds
#: more activations for little more speed, a smaller one runs fewer rows per recurrent
#: step, each step reading the recurrent weights once (docs/performance.md).
DEFAULT_MAX_TOKENS = 8192


class BiLMRunner:
    """Runs a `BiLM` on tokenised sentences, through a `TokenEmbeddingCache`.

    Args:
        bilm: a stateless `keras_elmo.BiLM`.
        token_cache: the `TokenEmbeddingCache` of that biLM to use (one with a vocabulary,
            say); None: a new one without.
        batch_size: int >= 1, most rows per biLM call (64); a row holds one sentence or
            several short ones back to back.
        sort_batches: int >= 1, sentences planned together, in multiples of `batch_size`
            (32).
        max_length: int >= 1, tokens per biLM window (512): longer sentences run in
            windows of this many tokens (`keras_elmo.text.sentence_windows`).
        max_tokens: int >= 1, most positions per biLM call (rows x steps, each sentence's
            `<S>` and `</S>` counted), or None for no budget (`batch_size` rows as long as
            a window needs); 8192 by default. A sentence longer than the budget runs alone.
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
        """Every sentence's layers in one call, a float32 numpy `(L + 1, n, 2P)` each;
        sentences longer than `max_length` tokens run in windows."""
        return self.token_cache.layers(sentences, self.max_length)

    def iter_batches(self, keyed_sentences):
        """Yields `(keys, sentences, layers)` per biLM call, `layers` a list of float32
        numpy `(L + 1, n, 2P)`, one per sentence (views of the call's outputs).

        The next call runs in a worker thread while the caller handles this one.

        Args:
            keyed_sentences: iterable of `(key, tokens)`; `tokens` a list of str (may be
                empty).
        """
        with concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="keras-elmo-bilm") as worker, \
                concurrent.futures.ThreadPoolExecutor(
                    max_workers=1, thread_name_prefix="keras-elmo-warm-up") as helper:
            pending = warming = None
            for keys, sentences, rows in self._planned_calls(keyed_sentences):
                if warming is None:  # the biLSTM's graph is prepared beside the char CNN
                    warming = helper.submit(self.token_cache.warm_up, len(rows))
                running = worker.submit(self._layers_after, warming, sentences, rows)
                if pending is not None:
                    yield pending[0], pending[1], pending[2].result()
                pending = (keys, sentences, running)
            if pending is not None:
                yield pending[0], pending[1], pending[2].result()

    def _layers_after(self, warming, sentences, rows):
        """A call's layers (`TokenEmbeddingCache.layers`): its token vectors first, then,
        once the warm-up is over (its errors are left for the call to meet), the biLSTM."""
        vectors = self.token_cache.sentence_vectors(sentences)
        concurrent.futures.wait([warming])
        return self.token_cache.layers(sentences, self.max_length, rows, vectors=vectors)

    def iter_layers(self, keyed_sentences):
        """Yields `(key, tokens, layers)` per sentence; `layers` `(L + 1, n, 2P)` float32."""
        for keys, sentences, layers in self.iter_batches(keyed_sentences):
            yield from zip(keys, sentences, layers)

    def _planned_calls(self, keyed_sentences):
        """`(keys, sentences, rows)` per call: windows read lazily, each planned whole."""
        window = []
        limit = self.batch_size * self.sort_batches
        for item in keyed_sentences:
            window.append(item)
            if len(window) >= limit:
                yield from self._window_calls(window)
                window = []
        if window:
            yield from self._window_calls(window)

    def _window_calls(self, window):
        """The calls of a window (`plan_calls`), each with its sentences renumbered in the
        call's order; empty sentences come with the first call (they run nothing)."""
        calls = plan_calls([len(tokens) for _, tokens in window], self.batch_size,
                           self.max_tokens, self.max_length)
        empty = [index for index, (_, tokens) in enumerate(window) if not tokens]
        if not calls:
            calls = [[]]
        for number, call in enumerate(calls):
            members = list(dict.fromkeys(p.sentence for row in call for p in row))
            if number == 0:
                members += empty
            local = {sentence: i for i, sentence in enumerate(members)}
            rows = [[p._replace(sentence=local[p.sentence]) for p in row] for row in call]
            yield ([window[i][0] for i in members], [window[i][1] for i in members], rows)
