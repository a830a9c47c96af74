"""`LayerStore`: a frozen biLM's layers for a fixed list of sentences, computed once.

A downstream model whose biLM is frozen (`ElmoLayer`'s default) sees the same biLM layers
for a sentence in every epoch; only the scalar mix and the task layers learn. Computing
them once and reading them back each epoch gives exactly the `ElmoLayer` features at a
fraction of the cost. They are kept as float16 in a memory-mapped file (`path`), token by
token: `(total_tokens, L + 1, 2 * projection_dim)`; float16 keeps 3 significant digits,
far below what a tagger can notice (the examples check the trained model end to end
through `ElmoLayer` on the raw text too).

Example:
>>> store = LayerStore.build(BiLMRunner(bilm), sentences, "/tmp/train_layers.f16")
>>> layers = store.batch([0, 5, 7])  # float32 (3, L + 1, max_len, 2P), zero-padded
"""

import os

import numpy as np


class LayerStore:
    """Read side: `batch(indices)` of the stored sentences.

    Args:
        path: the float16 file.
        lengths: list of int, tokens per sentence, in order.
        num_layers: int, `L + 1`.
        dim: int, `2 * projection_dim`.
    """

    def __init__(self, path, lengths, num_layers, dim):
        self.path = os.fspath(path)
        self.lengths = np.asarray(lengths, np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.lengths)])
        self.num_layers, self.dim = int(num_layers), int(dim)
        total = int(self.offsets[-1])
        self.array = np.memmap(self.path, np.float16, "r",
                               shape=(max(total, 1), self.num_layers, self.dim))

    def __len__(self):
        return len(self.lengths)

    @classmethod
    def build(cls, runner, sentences, path, progress=None):
        """Runs `runner` (a `BiLMRunner`) over `sentences` (lists of tokens) into `path`."""
        lengths = [len(tokens) for tokens in sentences]
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        total = int(offsets[-1])
        shape = (max(total, 1), runner.num_output_layers, runner.output_dim)
        array = np.memmap(os.fspath(path), np.float16, "w+", shape=shape)
        for key, tokens, layers in runner.iter_layers(enumerate(sentences)):
            start = offsets[key]
            array[start:start + len(tokens)] = layers.transpose(1, 0, 2)  # (n, L + 1, 2P)
            if progress is not None:
                progress.update(sentences=1, tokens=len(tokens))
        array.flush()
        del array
        if progress is not None:
            progress.close()
        return cls(path, lengths, runner.num_output_layers, runner.output_dim)

    def sentence(self, index):
        """float32 `(L + 1, n, 2P)` of one sentence."""
        start, end = self.offsets[index], self.offsets[index + 1]
        return np.asarray(self.array[start:end], np.float32).transpose(1, 0, 2)

    def batch(self, indices, max_len=None):
        """float32 `(batch, L + 1, T, 2P)`, zero past each sentence's end.

        Args:
            indices: sentence indices.
            max_len: None or int: T (sentences are cut to it); default the longest.
        """
        lengths = self.lengths[list(indices)]
        width = int(lengths.max(initial=0)) if max_len is None else int(max_len)
        out = np.zeros((len(lengths), self.num_layers, width, self.dim), np.float32)
        for row, index in enumerate(indices):
            start = self.offsets[index]
            n = min(int(self.lengths[index]), width)
            out[row, :, :n] = self.array[start:start + n].transpose(1, 0, 2)
        return out
