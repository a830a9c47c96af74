"""A biLSTM tagger / sentence classifier with or without ELMo, trained on stored biLM layers.

Both arms share everything but ELMo: the same word embeddings (random init, trained, ids
from `datasets.build_word_index`), the same biLSTM, dropout and softmax, the same seed.
With ELMo, `ScalarMix(biLM layers)` (the trainable part of `ElmoLayer`) is concatenated to
the word embeddings, as in the paper (section 3.3).

Two graphs share the task layers (`TaskLayers`):
- `training_model`: inputs word ids `(batch, T)` (+ stored biLM layers `(batch, L + 1, T,
  2P)` from a `LayerStore`); used to train, since the frozen biLM's layers never change.
- `text_model`: input padded string tokens `(batch, T)` (`""` = padding): `StringLookup`
  for the word ids and an `ElmoLayer` carrying the trained mix; the deployable model. Its
  outputs equal the training model's (up to the stored layers' float16 rounding).

Example:
>>> task = TaskLayers("tagger", num_words=5000, num_outputs=44, elmo_dim=256)  # doctest: +SKIP
>>> model = task.training_model(num_layers=3)
"""

import keras
import numpy as np

from tasks.datasets import OOV_ID, PAD_ID
from keras_elmo import ElmoLayer, ScalarMix

TASKS = ("tagger", "classifier")


class TaskLayers:
    """The layers of one task model (shared by its training and text graphs).

    Args:
        task: `"tagger"` (one label per token) or `"classifier"` (one per sentence).
        num_words: int, word ids incl. padding (0) and OOV (1).
        num_outputs: int, tags or classes.
        elmo_dim: None (no ELMo) or int, `2 * projection_dim` of the biLM.
        word_dim, lstm_units: sizes (64, 128).
        dropout: float, on the word embeddings and the biLSTM output (0.5).
        elmo_dropout: float, on the mixed ELMo vectors (0.5, as AllenNLP); the only dropout
            they get.
        do_layer_norm: bool, the mix normalises each biLM layer first (False).
    """

    def __init__(self, task, num_words, num_outputs, elmo_dim=None, word_dim=64,
                 lstm_units=128, dropout=0.5, elmo_dropout=0.5, do_layer_norm=False):
        if task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}; received {task!r}.")
        self.task, self.elmo_dim = task, elmo_dim
        self.elmo_dropout, self.do_layer_norm = elmo_dropout, do_layer_norm
        self.embedding = keras.layers.Embedding(num_words, word_dim, mask_zero=True,
                                                name="word_embedding")
        self.mix = (ScalarMix(dropout=elmo_dropout, do_layer_norm=do_layer_norm,
                              name="elmo_mix")
                    if elmo_dim is not None else None)
        self.concat = keras.layers.Concatenate(name="words_and_elmo")
        self.input_dropout = keras.layers.Dropout(dropout, name="input_dropout")
        self.bilstm = keras.layers.Bidirectional(
            keras.layers.LSTM(lstm_units, return_sequences=task == "tagger"), name="bilstm")
        self.output_dropout = keras.layers.Dropout(dropout, name="output_dropout")
        self.softmax = keras.layers.Dense(num_outputs, activation="softmax", name="softmax")

    def _head(self, word_ids, elmo):
        x = self.input_dropout(self.embedding(word_ids))  # (batch, T, word_dim)
        if elmo is not None:  # already dropped out by the mix (elmo_dropout)
            x = self.concat([x, elmo])  # (batch, T, word_dim + 2P)
        x = self.bilstm(x)
        return self.softmax(self.output_dropout(x))

    def training_model(self, num_layers=None):
        """Inputs `word_ids` (and `elmo_layers` `(batch, L + 1, T, 2P)` with ELMo)."""
        word_ids = keras.Input((None,), dtype="int32", name="word_ids")
        if self.mix is None:
            return keras.Model(word_ids, self._head(word_ids, None))
        layers = keras.Input((num_layers, None, self.elmo_dim), name="elmo_layers")
        mask = keras.ops.not_equal(word_ids, PAD_ID)  # (batch, T)
        elmo = self.mix(layers, mask=mask)  # (batch, T, 2P)
        return keras.Model([word_ids, layers], self._head(word_ids, elmo))

    def text_model(self, words, options_file=None, weight_file=None):
        """Padded string tokens in; `words` are the vocabulary in id order (from id 2).

        With ELMo, an `ElmoLayer` over `options_file` / `weight_file` gets the trained mix.
        """
        tokens = keras.Input((None,), dtype="string", name="tokens")
        lookup = keras.layers.StringLookup(vocabulary=list(words), mask_token="",
                                           num_oov_indices=OOV_ID, name="word_lookup")
        word_ids = lookup(tokens)  # "" -> 0, OOV -> 1, words[i] -> i + 2
        elmo = None
        if self.mix is not None:
            elmo_layer = ElmoLayer.from_weights(options_file, weight_file,
                                                dropout=self.elmo_dropout,
                                                do_layer_norm=self.do_layer_norm, name="elmo")
            elmo_layer.build()
            elmo_layer.scalar_mixes[0].set_weights(self.mix.get_weights())
            elmo = elmo_layer(tokens)  # (batch, T, 2P)
        return keras.Model(tokens, self._head(word_ids, elmo))

    def mix_weights(self):
        """`{"softmax_s": [...], "gamma": g}` of the trained mix (None without ELMo)."""
        if self.mix is None:
            return None
        return {"softmax_s": self.mix.layer_weights().tolist(),
                "gamma": float(self.mix.gamma.numpy())}


class Batches(keras.utils.PyDataset):
    """Length-bucketed batches of `(word ids[, biLM layers]), targets[, weights]`.

    Args:
        word_ids: list of lists of int (one per example).
        targets: tagger: list of lists of int (one per token); classifier: list of int.
        indices: the rows of `store` that the examples are (None: 0..n-1).
        store: a `LayerStore` (None: no ELMo input).
        batch_size: int; max_len: None or int, tokens kept per example.
        shuffle: reshuffle the batch order every epoch (seeded); seed: int.
    """

    def __init__(self, word_ids, targets, indices=None, store=None, batch_size=32,
                 max_len=None, shuffle=False, seed=0, **kwargs):
        super().__init__(**kwargs)
        self.word_ids, self.targets, self.store = word_ids, targets, store
        self.indices = list(range(len(word_ids))) if indices is None else list(indices)
        self.max_len, self.shuffle, self.seed, self.epoch = max_len, shuffle, seed, 0
        order = sorted(range(len(word_ids)), key=lambda i: len(word_ids[i]))
        self.batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
        self.order = list(range(len(self.batches)))
        self.on_epoch_end()

    def __len__(self):
        return len(self.batches)

    def on_epoch_end(self):
        if self.shuffle:
            np.random.default_rng(self.seed + self.epoch).shuffle(self.order)
            self.epoch += 1

    def __getitem__(self, index):
        rows = self.batches[self.order[index]]
        width = max(1, max(len(self.word_ids[i]) for i in rows))
        if self.max_len is not None:
            width = min(width, self.max_len)
        ids = np.zeros((len(rows), width), np.int32)
        for r, i in enumerate(rows):
            n = min(len(self.word_ids[i]), width)
            ids[r, :n] = self.word_ids[i][:n]
        inputs = ids
        if self.store is not None:
            inputs = (ids, self.store.batch([self.indices[i] for i in rows], width))
        if isinstance(self.targets[rows[0]], (list, tuple, np.ndarray)):
            y = np.zeros_like(ids)
            for r, i in enumerate(rows):
                n = min(len(self.targets[i]), width)
                y[r, :n] = self.targets[i][:n]
            return inputs, y, (ids != PAD_ID).astype(np.float32)
        return inputs, np.array([self.targets[i] for i in rows], np.int32)

    def rows(self, index):
        """Example indices of batch `index` (in the current order)."""
        return self.batches[self.order[index]]


def predict(model, batches):
    """Predicted label per example (classifier) or list of labels per token (tagger)."""
    out = [None] * len(batches.word_ids)
    for b in range(len(batches)):
        inputs = batches[b][0]
        probabilities = np.asarray(model.predict_on_batch(inputs))
        labels = probabilities.argmax(axis=-1)
        for r, i in enumerate(batches.rows(b)):
            out[i] = (labels[r, :len(batches.word_ids[i])].tolist() if labels.ndim == 2
                      else int(labels[r]))
    return out


def accuracy(predicted, gold):
    """Share of equal labels: per token for lists (tagger), per example otherwise."""
    if predicted and isinstance(gold[0], (list, tuple)):
        pairs = [(p, g) for ps, gs in zip(predicted, gold) for p, g in zip(ps, gs)]
    else:
        pairs = list(zip(predicted, gold))
    return sum(p == g for p, g in pairs) / max(len(pairs), 1)


def predict_text(model, sentences, batch_size=64):
    """Like `predict`, for a `text_model`: sentences are lists of str tokens."""
    import tensorflow as tf

    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    out = [None] * len(sentences)
    for start in range(0, len(order), batch_size):
        rows = order[start:start + batch_size]
        width = max(1, max(len(sentences[i]) for i in rows))
        tokens = [list(sentences[i]) + [""] * (width - len(sentences[i])) for i in rows]
        labels = np.asarray(model.predict_on_batch(tf.constant(tokens))).argmax(axis=-1)
        for r, i in enumerate(rows):
            out[i] = (labels[r, :len(sentences[i])].tolist() if labels.ndim == 2
                      else int(labels[r]))
    return out
