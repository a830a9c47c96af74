"""`BiLMRunner`: a biLM over many token lists, in length-sorted batches, streaming.

Sentences are read `batch_size * sort_batches` at a time, sorted by length inside that
window (so a batch pads little), cut into batches of at most `batch_size` sentences and at
most `max_tokens` padded token positions (rows x longest row: a budget that keeps every
biLM call about as large, and its activations about as big, whatever the lengths) where
`keras_elmo.embedding.batch_plan` finds the least work, and handed back one by one with
their keys; memory holds one window of text and two batches of
outputs, whatever the input's size. A sentence's vectors do not depend on its batch-mates
(the biLM is stateless and masks padding), so the reordering changes nothing but speed.

Without a vocabulary `token_cache`, the char CNN runs once per distinct token seen
(`keras_elmo.embedding.token_vectors.TokenVectorMemo`, in bounded chunks) and the biLSTM
from those vectors: text repeats its words, and the char CNN's large activations no
longer grow with the batch.

A sentence longer than `max_length` tokens runs as windows of `max_length` tokens in the
same call, and its vectors come back whole (`keras_elmo.text.sentence_windows`).

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

from keras_elmo.embedding.batch_plan import plan_batches
from keras_elmo.embedding.token_vectors import TokenVectorMemo
from keras_elmo.text.sentence_windows import (DEFAULT_MAX_LENGTH, check_max_length,
                                                   num_windows, windows)

#: Batches per sorting window.
DEFAULT_SORT_BATCHES = 32
#: Padded token positions per biLM call of `keras-elmo embed` (`--max-tokens`): a larger
#: budget is faster (long sentences get more rows per recurrent step, each step reading
#: the recurrent weights once) and holds more activations. Measured 2026-11-26, whole
#: command, 4,800 People's Daily sentences, AVX512 / AVX2 kernels: 768 96.0 / 143.1 s,
#: peak 973 / 958 MiB; 1536 81.4 / 125.6 s, 1,011 / 996 MiB; 3072 76.5 / 120.4 s,
#: 1,082 / 1,068 MiB (past 1,100 MB). With the batch plan and input gates 1,024 columns at
#: a time, 2048 against 1536 (farm-bench, AVX2 kernels): 300 / 1,200 / 4,800 sentences
#: 11.78 / 31.45 / 105.4 s against 12.00 / 32.45 / 105.9 s, peak +5 / +3 / +18 MiB (1,055
#: at 4,800). docs/performance.md has the tables.
DEFAULT_MAX_TOKENS = 2048
#: biLM -> its traced inference function (char ids -> layers), shared by all runners.
_INFER_FUNCTIONS = weakref.WeakKeyDictionary()


class BiLMRunner:
    """Runs a `BiLM` (or its `TokenEmbeddingCache`) on tokenised sentences.

    Args:
        bilm: a stateless `keras_elmo.BiLM`.
        token_cache: optional `TokenEmbeddingCache` of that biLM (faster token layer).
        batch_size: int >= 1, most sentences per biLM call (64).
        sort_batches: int >= 1, batches per length-sorting window (32).
        max_length: int >= 1, tokens per biLM window (512): longer sentences run in
            windows of this many tokens (`keras_elmo.text.sentence_windows`).
        max_tokens: int >= 1 or None, most padded token positions per biLM call (rows x
            longest row, windows counted as rows); None: `batch_size` alone. A sentence
            above the budget on its own runs alone.
        memoize_tokens: bool, without `token_cache` run the char CNN once per distinct
            token (`TokenVectorMemo`; True); False: the char path on every batch.
    """

    def __init__(self, bilm, token_cache=None, batch_size=64, sort_batches=DEFAULT_SORT_BATCHES,
                 max_length=DEFAULT_MAX_LENGTH, max_tokens=None, memoize_tokens=True):
        for name, value in (("batch_size", batch_size), ("sort_batches", sort_batches),
                            ("max_tokens", 1 if max_tokens is None else max_tokens)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive int; received {value!r}.")
        self.max_length = check_max_length(max_length)
        self.max_tokens = max_tokens
        self.token_memo = (TokenVectorMemo(bilm) if memoize_tokens and token_cache is None
                           else None)
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

    def _model_layers(self, sentences):
        """One biLM call: float32 numpy `(batch, L + 1, max_len, 2P)`, zero past each end."""
        if self.token_cache is not None:
            return np.asarray(self.token_cache(sentences)["layers"])
        if self.token_memo is not None:
            return self.token_memo.layers(sentences)
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

    def layers(self, sentences):
        """float32 numpy `(batch, L + 1, max_len, 2 * projection_dim)`, zero past each end;
        sentences longer than `max_length` tokens run in windows (one call in all)."""
        longest = max(len(s) for s in sentences)
        if longest == 0:  # nothing to run
            return np.zeros((len(sentences), self.num_output_layers, 0, self.output_dim),
                            np.float32)
        if longest <= self.max_length:
            return self._model_layers(sentences)
        # Over-long sentences: every window a row of the same call, then put back in place.
        pieces, places = [], []
        for row, tokens in enumerate(sentences):
            for start, stop in windows(len(tokens), self.max_length):
                pieces.append(tokens[start:stop])
                places.append((row, start, stop))
        layers = self._model_layers(pieces)  # (num_windows, L + 1, <= max_length, 2P)
        out = np.zeros((len(sentences), layers.shape[1], longest, layers.shape[3]),
                       np.float32)  # (batch, L + 1, longest, 2P)
        for piece, (row, start, stop) in enumerate(places):
            out[row, :, start:stop] = layers[piece, :, :stop - start]
        return out


def _infer_function(bilm):
    """The biLM's traced `char ids -> layers` function, made once per biLM (no autograph:
    see `keras_elmo.embedding.token_vectors._functions`)."""
    if bilm not in _INFER_FUNCTIONS:
        import tensorflow as tf

        chars = bilm.options.max_characters_per_token
        model = weakref.ref(bilm)  # the cache must not keep the biLM alive
        _INFER_FUNCTIONS[bilm] = tf.function(
            lambda ids: model()(ids, training=False)["layers"],
            input_signature=[tf.TensorSpec([None, None, chars], tf.int32)],
            autograph=False)
    return _INFER_FUNCTIONS[bilm]


def _batch_to_ids(sentences, chars):
    from keras_elmo import batch_to_ids

    return batch_to_ids(sentences, chars)
