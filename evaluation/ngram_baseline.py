"""Interpolated Kneser-Ney trigram language model: the count-based baseline for the biLM.

`p(w | u, v) = max(c(u v w) - D3(c), 0) / c(u v .) + gamma(u v) * p2(w | v)`, with
`gamma(u v) = (D3(1) N1(u v .) + D3(2) N2(u v .) + D3(3) N3+(u v .)) / c(u v .)`; `p2`
has the same form over continuation counts `N1+(. v w)` (raw counts when `v` is `<S>`,
which has no left context), and `p1` over `N1+(. w)`, interpolated with the uniform
distribution over every id but `<S>` (Chen & Goodman's modified KN; `D(c)` depends on
`min(c, 3)` and is estimated from count-of-counts, or one fixed `discount`). An unseen
context backs off to the lower order entirely.

Events: each sentence `w1..wn` is padded to `<S> <S> w1 .. wn </S>` and the model predicts
`w1..wn` and `</S>` (n + 1 predictions), so perplexity is `exp(-mean log p)` over those,
tokens outside the vocabulary being `<UNK>` in training counts and targets alike. The
backward model is the same model trained and evaluated on reversed sentences. The
"average" perplexity is `exp((log ppl_fwd + log ppl_bwd) / 2)`, as bilm-tf reports the
exponential of the mean of the two directions' losses.

Example:
    >>> vocab = Vocabulary.load("data/vocab.txt")
    >>> evaluate_baseline(["data/train.txt"], ["data/heldout.txt"], vocab)
    {'forward_perplexity': ..., 'backward_perplexity': ..., 'average_perplexity': ..., ...}
"""

import math
import time
from array import array

import numpy as np

from keras_elmo.training.corpus import read_sentences

#: Discount for every count class when the count-of-counts cannot estimate one.
FALLBACK_DISCOUNT = 0.75
_MAX_CLASS = 3  # counts 1, 2, 3+ get their own discount


class KneserNeyTrigram:
    """Interpolated (modified) Kneser-Ney trigram over integer ids `0 .. vocab_size - 1`.

    Args:
        vocab_size: number of ids.
        bos_id: id of `<S>` (context padding, never predicted).
        eos_id: id of `</S>` (predicted after each sentence).
        discount: None to estimate modified-KN discounts per order, or a float in (0, 1]
            used for every count (plain interpolated KN).

    Example:
        >>> model = KneserNeyTrigram(5, bos_id=0, eos_id=1).fit([[3, 4], [3]])
        >>> round(model.probabilities(0, 0, np.arange(5)).sum(), 9)  # p(<S>) = 0
        1.0
    """

    def __init__(self, vocab_size, bos_id, eos_id, discount=None):
        if vocab_size < 2 or vocab_size ** 3 >= 2 ** 63:
            raise ValueError(f"Expected 2 <= vocab_size < 2**21. Received: vocab_size={vocab_size}")
        for name, value in (("bos_id", bos_id), ("eos_id", eos_id)):
            if not 0 <= value < vocab_size:
                raise ValueError(f"Expected 0 <= {name} < {vocab_size}. Received: {name}={value}")
        if discount is not None and not 0.0 < discount <= 1.0:
            raise ValueError(f"Expected discount None or in (0, 1]. Received: discount={discount}")
        self.vocab_size = vocab_size
        self.bos_id = bos_id
        self.eos_id = eos_id
        self.discount = discount
        self.discounts = {}  # after fit: {order: np.ndarray (4,)}: D(0)=0, D(1), D(2), D(3+)

    # --- training ---------------------------------------------------------------------------
    def events(self, sentences):
        """(u, v, w) int64 arrays of every prediction in `sentences` (lists of ids)."""
        flat = array("q")
        for ids in sentences:
            flat.extend((self.bos_id, self.bos_id))
            flat.extend(ids)
            flat.append(self.eos_id)
        x = np.frombuffer(flat, dtype=np.int64) if flat else np.zeros(0, np.int64)
        u, v, w = x[:-2], x[1:-1], x[2:]  # each (len(x) - 2,)
        keep = w != self.bos_id  # drop the triples whose target is padding
        if len(x) and (x.min() < 0 or x.max() >= self.vocab_size):
            raise ValueError(f"Expected ids in [0, {self.vocab_size}). Received ids from "
                             f"{x.min()} to {x.max()}")
        return u[keep], v[keep], w[keep]

    def fit(self, sentences):
        """Counts the trigrams of `sentences` (iterable of id lists, no boundaries)."""
        V = self.vocab_size
        self.discounts = {}
        u, v, w = self.events(sentences)
        if not len(w):
            raise ValueError("Expected at least one training sentence. Received none.")
        keys3, counts3 = np.unique((u * V + v) * V + w, return_counts=True)
        self._order3 = self._context_table(keys3 // V, counts3, order=3)
        self._keys3, self._counts3 = keys3, counts3
        # Bigram (v, w) types: continuation counts = number of distinct u, raw after <S>.
        keys2, inverse = np.unique(keys3 % (V * V), return_inverse=True)
        types = np.bincount(inverse, minlength=len(keys2))
        raw = np.bincount(inverse, weights=counts3, minlength=len(keys2)).astype(np.int64)
        counts2 = np.where(keys2 // V == self.bos_id, raw, types)
        self._order2 = self._context_table(keys2 // V, counts2, order=2)
        self._keys2, self._counts2 = keys2, counts2
        # Unigram continuation counts N1+(. w), interpolated with the uniform distribution.
        counts1 = np.bincount(keys2 % V, minlength=V)
        d1 = self._estimate_discounts(counts1, order=1)
        total1 = counts1.sum()
        kept = np.maximum(counts1 - d1[np.minimum(counts1, _MAX_CLASS)], 0.0)
        uniform = np.full(V, 1.0 / (V - 1))
        uniform[self.bos_id] = 0.0
        self._p1 = kept / total1 + (total1 - kept.sum()) / total1 * uniform  # (V,)
        return self

    def _estimate_discounts(self, counts, order):
        counts = counts[counts > 0]
        if self.discount is not None:
            table = np.array([0.0] + [self.discount] * _MAX_CLASS)
        else:
            n = [np.count_nonzero(counts == k) for k in range(1, _MAX_CLASS + 2)]  # n1..n4
            table = np.array([0.0] + [FALLBACK_DISCOUNT] * _MAX_CLASS)
            if all(n):
                y = n[0] / (n[0] + 2 * n[1])
                estimate = [k - (k + 1) * y * n[k] / n[k - 1] for k in range(1, _MAX_CLASS + 1)]
                if all(0.0 < d <= k for k, d in enumerate(estimate, start=1)):
                    table = np.array([0.0] + estimate)
        self.discounts[order] = table
        return table

    def _context_table(self, contexts, counts, order):
        """Per distinct context (sorted): total count and the interpolation weight numerator."""
        d = self._estimate_discounts(counts, order)
        keys, inverse = np.unique(contexts, return_inverse=True)
        total = np.bincount(inverse, weights=counts, minlength=len(keys))
        discounts = d[np.minimum(counts, _MAX_CLASS)]
        removed = np.bincount(inverse, weights=discounts, minlength=len(keys))
        return {"keys": keys, "total": total, "removed": removed, "d": d}

    # --- probabilities ----------------------------------------------------------------------
    def probabilities(self, u, v, w):
        """p(w | u, v) for broadcastable id arrays; returns float64 of the broadcast shape."""
        if not hasattr(self, "_p1"):
            raise ValueError("The model is not trained: call fit(sentences) first.")
        u, v, w = np.broadcast_arrays(*(np.asarray(a, dtype=np.int64) for a in (u, v, w)))
        V = self.vocab_size
        p = self._p1[w]
        p = self._interpolate(p, self._order2, v, self._keys2, self._counts2, v * V + w)
        return self._interpolate(p, self._order3, u * V + v, self._keys3, self._counts3,
                                 (u * V + v) * V + w)

    @staticmethod
    def _interpolate(lower, table, contexts, keys, counts, queries):
        index, seen_context = _lookup(table["keys"], contexts)
        position, seen = _lookup(keys, queries)
        count = np.where(seen, counts[position], 0)
        total = table["total"][index]
        kept = np.maximum(count - table["d"][np.minimum(count, _MAX_CLASS)], 0.0)
        mixed = (kept + table["removed"][index] * lower) / np.where(seen_context, total, 1.0)
        return np.where(seen_context, mixed, lower)

    def log_likelihood(self, sentences):
        """(sum of natural-log probabilities, number of predictions) over `sentences`."""
        u, v, w = self.events(sentences)
        return float(np.log(self.probabilities(u, v, w)).sum()), int(len(w))

    def perplexity(self, sentences):
        """exp(-mean log p) over every token and closing `</S>` of `sentences`."""
        total, count = self.log_likelihood(sentences)
        if not count:
            raise ValueError("Expected at least one sentence to evaluate. Received none.")
        return math.exp(-total / count)


def _lookup(sorted_keys, queries):
    """Positions of `queries` in `sorted_keys` and whether each is present."""
    if not len(sorted_keys):
        return np.zeros(queries.shape, np.int64), np.zeros(queries.shape, bool)
    position = np.minimum(np.searchsorted(sorted_keys, queries), len(sorted_keys) - 1)
    return position, sorted_keys[position] == queries


def encode_corpus(paths, vocabulary, tokenizer="whitespace"):
    """Id lists of every sentence in `paths` (OOV -> `<UNK>`; a literal `<S>` -> `<UNK>`),
    lines tokenised by `tokenizer` (`keras_elmo.text.tokenizers`), as the biLM reads them."""
    sentences, tokens = [], 0
    for path in paths:
        for words in read_sentences(path, tokenizer):
            ids = vocabulary.encode(words)
            if vocabulary.bos_id in ids:
                ids = [vocabulary.unk_id if i == vocabulary.bos_id else i for i in ids]
            sentences.append(ids)
            tokens += len(ids)
    return sentences, tokens


def evaluate_baseline(train_paths, heldout_paths, vocabulary, discount=None,
                      tokenizer="whitespace"):
    """Trains forward and backward trigram models and returns held-out perplexities.

    Both corpora are tokenised by `tokenizer` (raw Chinese: `"jieba"`, the segmented copies
    the biLM trained on), so the two models see the same tokens and vocabulary.

    Returns:
        dict with `forward_perplexity`, `backward_perplexity`, `average_perplexity`,
        `train_tokens`, `heldout_tokens` (words, `</S>` not included), `heldout_predictions`
        (words + one `</S>` per sentence), `heldout_unk_rate`, `seconds`.
    """
    start = time.perf_counter()
    train, train_tokens = encode_corpus(train_paths, vocabulary, tokenizer)
    heldout, heldout_tokens = encode_corpus(heldout_paths, vocabulary, tokenizer)
    results = {}
    for direction, reverse in (("forward", False), ("backward", True)):
        model = KneserNeyTrigram(len(vocabulary), vocabulary.bos_id, vocabulary.eos_id, discount)
        model.fit(s[::-1] if reverse else s for s in train)
        results[f"{direction}_perplexity"] = model.perplexity(
            s[::-1] if reverse else s for s in heldout)
    unk = sum(ids.count(vocabulary.unk_id) for ids in heldout)
    results["average_perplexity"] = math.sqrt(
        results["forward_perplexity"] * results["backward_perplexity"])
    results.update(train_tokens=train_tokens, heldout_tokens=heldout_tokens,
                   heldout_predictions=heldout_tokens + len(heldout),
                   heldout_unk_rate=unk / max(heldout_tokens, 1),
                   seconds=time.perf_counter() - start)
    return results
