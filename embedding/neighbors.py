"""Nearest tokens-in-context to a word in a sentence (the paper's Table 4 comparison).

The query is one occurrence of `word` in a tokenised `sentence`. Two lists come back:
- contextual neighbours: the corpus tokens (each occurrence in its own sentence) whose
  vector in biLM layer `layer` (default the top one) has the highest cosine with the
  query's vector in that layer. The same word in two senses finds different neighbours.
- type neighbours, for contrast: the corpus word types whose layer-0 vector (the char CNN,
  context-free: identical for every occurrence) is closest to the query word's. These do
  not change with the sentence.

The corpus (one tokenised sentence per line) is streamed in packed calls (`BiLMRunner`); only
the best `k` candidates, the type counts and their layer-0 vectors are kept. The query's
own occurrence is left out if the corpus contains its sentence; other occurrences of the
same word in other sentences are legitimate neighbours.

Example:
>>> result = find_neighbors(bilm, "heldout.txt", "他 会 说 英语", "会", k=5)  # doctest: +SKIP
>>> [(n.score, n.tokens[n.position]) for n in result["contextual"]]  # doctest: +SKIP
"""

import collections
import heapq
import itertools

import numpy as np

from keras_elmo.embedding.bilm_runner import BiLMRunner
from keras_elmo.embedding.inputs import find_word, read_lines, tokenized_lines  # noqa: F401
from keras_elmo.process.progress import Progress
from keras_elmo.text.tokenizers import check_tokenizer, tokenize
from keras_elmo.validation import check_int

#: One contextual neighbour: cosine, 1-based corpus line, 0-based token position, tokens.
Neighbor = collections.namedtuple("Neighbor", "score line_number position tokens")
#: One type neighbour: cosine, the type, its corpus count.
TypeNeighbor = collections.namedtuple("TypeNeighbor", "score token count")


def _unit(vectors):
    """Rows scaled to length 1 (zero rows stay zero): `(..., D)` -> `(..., D)`."""
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


def find_neighbors(bilm, corpus_path, sentence, word, layer=None, k=10, occurrence=1,
                   batch_size=64, max_sentences=None, token_cache=None, progress=False,
                   tokenizer="whitespace"):
    """Contextual neighbours (layer `layer`) and type neighbours (layer 0) of a query word.

    Args:
        bilm: a stateless `keras_elmo.BiLM`.
        corpus_path: UTF-8 text, one sentence per line, tokenised by `tokenizer`.
        sentence: the query sentence: a str tokenised by `tokenizer`, or a list of tokens.
        word: the query token (must be one of the sentence's tokens).
        layer: int in [0, L], the biLM layer compared for contextual neighbours (None: L).
        k: int >= 1, neighbours per list.
        occurrence: which occurrence of `word` in the sentence (1-based).
        batch_size: sentences per biLM call.
        max_sentences: read only the corpus' first lines (None: all).
        token_cache: optional `TokenEmbeddingCache` of `bilm`.
        progress: bool, the progress line on stderr.
        tokenizer: how the query and corpus lines become tokens
            (`keras_elmo.text.tokenizers.TOKENIZERS`; the model's own). Under `"jieba"` raw
            Chinese is segmented, and `word` must be one of the query's segmented tokens.

    Returns:
        dict: `"contextual"` list of `Neighbor`, `"types"` list of `TypeNeighbor` (best
        first), `"layer"`, `"position"` (of the query word), `"tokens"` (the sentence),
        `"corpus_sentences"`, `"corpus_tokens"`, `"corpus_types"`.
    """
    check_tokenizer(tokenizer)
    tokens = tokenize([sentence], tokenizer)[0] if isinstance(sentence, str) else list(sentence)
    num_layers = bilm.num_output_layers
    layer = num_layers - 1 if layer is None else layer
    if not isinstance(layer, int) or not 0 <= layer < num_layers:
        raise ValueError(f"layer must be an int in [0, {num_layers - 1}] (0 = token layer, "
                         f"{num_layers - 1} = top biLSTM layer); received {layer!r}.")
    check_int("k", k)
    check_int("max_sentences", max_sentences, optional=True)
    position = find_word(tokens, word, occurrence)
    runner = BiLMRunner(bilm, token_cache=token_cache, batch_size=batch_size)
    query_layers = runner.layers([tokens])[0]  # (L + 1, n, 2P)
    query = _unit(query_layers[layer, position])  # (2P,)
    query_type = _unit(query_layers[0, position])  # (2P,)

    best = []  # heap of (score, -line, position, tokens): the k best seen so far
    counts = collections.Counter()
    meter = Progress(None, label="neighbors", enabled=bool(progress))
    lines = read_lines(corpus_path)
    keyed = ((index, sentence_tokens) for index, _, sentence_tokens
             in tokenized_lines(itertools.islice(lines, max_sentences), tokenizer))
    num_sentences = 0
    for keys, sentences, layers in runner.iter_batches(keyed):
        lengths = np.array([len(s) for s in sentences])
        scores = np.full((len(sentences), max(lengths, default=0)), -np.inf, np.float32)
        for row, found in enumerate(layers):  # (L + 1, n, 2P)
            scores[row, :found.shape[1]] = _unit(found[layer]) @ query  # (n,)
        for row, (key, sentence_tokens) in enumerate(zip(keys, sentences)):
            counts.update(sentence_tokens)
            if sentence_tokens == tokens:  # the query itself is not its own neighbour
                scores[row, position] = -np.inf
        flat = scores.ravel()
        take = min(k, int(np.isfinite(flat).sum()))
        if take:
            for index in np.argpartition(-flat, take - 1)[:take]:
                row, column = divmod(int(index), scores.shape[1])
                item = (float(flat[index]), -keys[row], column, sentences[row])
                if len(best) < k:
                    heapq.heappush(best, item)
                elif item[:3] > best[0][:3]:
                    heapq.heapreplace(best, item)
        num_sentences += len(keys)
        meter.update(sentences=len(keys), tokens=int(lengths.sum()))
    meter.close()
    if not counts:
        raise ValueError(f"corpus {corpus_path} has no tokens (expected one tokenised "
                         "sentence per line).")
    contextual = [Neighbor(score, 1 - negative_line, column, sentence_tokens)
                  for score, negative_line, column, sentence_tokens
                  in sorted(best, key=lambda item: (-item[0], -item[1], item[2]))]
    return {"contextual": contextual, "types": type_neighbors(runner, counts, word,
                                                                query_type, k),
            "layer": layer, "position": position, "tokens": tokens,
            "corpus_sentences": num_sentences, "corpus_tokens": sum(counts.values()),
            "corpus_types": len(counts)}


def type_neighbors(runner, counts, word, query_type, k):
    """The `k` corpus types nearest to `query_type` by cosine of layer-0 vectors."""
    types = [token for token in counts if token != word]
    if not types:
        return []
    vectors = runner.token_cache.embed_tokens([types])[0][0]  # (V, P)
    projection = vectors.shape[-1]
    scores = _unit(vectors) @ query_type[:projection] / max(
        np.linalg.norm(query_type[:projection]), 1e-12)  # layer 0 is [x; x]
    order = np.argsort(-scores, kind="stable")[:k]
    return [TypeNeighbor(float(scores[i]), types[i], counts[types[i]]) for i in order]
