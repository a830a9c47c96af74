"""How good a biLM is on held-out text: its perplexity (`perplexity`, full softmax, every
target counted) and a Kneser-Ney trigram on the same vocabulary to hold it against
(`ngram_baseline`). Depends on `keras_elmo` and `keras_elmo.training` (the input pipeline
and the language-model head), never the reverse."""
