"""`TracedBiLM`: a biLM's two inference functions for the embedders, prepared once for the
Keras backend that runs them.

- `token_vectors(ids)`: the token encoder, float32 numpy `(batch, T, P)`;
- `packed_layers(vectors, rows)` (`packed` once laid out): the biLSTM over rows that hold
  sentences back to back (`BiLM.layers_from_packed_token_embeddings`), float32 numpy
  `(R, L + 1, S, 2P)`.

How each backend runs them (the only backend-specific code of `keras_elmo.embedding`):

- TensorFlow: `tf.function`s whose input signatures leave the sizes open, so each is one
  graph whatever the shapes; the packed biLSTM has one for calls of one row and one for
  the rest (`ResidualBiLSTM` chooses its loop from the batch size traced). No autograph:
  the model's control flow is TensorFlow ops already.
- JAX: `jax.jit` of a function of the model's variable values (read through
  `keras.StatelessScope`, as Keras' own JAX trainer does) and the inputs, so a compiled
  function reads the weights as they are at each call. XLA compiles once per shape, so
  the inputs are padded first to a few sizes (`bucket`: powers of two): token rows of
  zeros, and whole rows that each hold an empty sentence (`<S> </S>`), which change no
  real output and are cut off after.
- PyTorch: the model's eager call under `torch.no_grad()`.

The biLM is held weakly (the token cache keeps one `TracedBiLM` per biLM, keyed by it).

Example:
>>> traced = TracedBiLM(keras_elmo.BiLM(keras_elmo.BiLMOptions.tiny()))  # doctest: +SKIP
>>> traced.token_vectors(keras_elmo.batch_to_ids([["a", "b"]])).shape  # (1, 2, P)
"""

import weakref

import keras
import numpy as np

from keras_elmo import backend
from keras_elmo.embedding.row_packing import Piece, piece_size

#: Smallest padded size of a step or token axis under JAX (`bucket`).
MIN_BUCKET = 8


def bucket(size, minimum=1):
    """The padded size of an axis of `size` under JAX: the next power of two, at least
    `minimum` (a few shapes, each compiled once; at most twice the work)."""
    return max(minimum, 1 << max(int(size) - 1, 0).bit_length())


class TracedBiLM:
    """A biLM's token encoder and packed biLSTM as functions of numpy inputs (see the
    module docstring for how each backend runs them).

    Args:
        bilm: a stateless `keras_elmo.BiLM`.
    """

    def __init__(self, bilm):
        model = weakref.ref(bilm)
        self.backend = keras.config.backend()
        self.num_output_layers, self.output_dim = bilm.num_output_layers, bilm.output_dim
        self.projection_dim = bilm.options.projection_dim
        self._boundary_ids = bilm.boundary_token_ids()

        def token_vectors(ids):  # char ids, or a word model's dict
            return keras.ops.cast(model().token_embeddings(ids), "float32")  # (batch, T, P)

        def packed(vectors, mask, starts, boundaries):
            return model().layers_from_packed_token_embeddings(vectors, mask, starts,
                                                               boundaries)

        if self.backend == "tensorflow":
            self._token_vectors, self._one_row, self._rows = _tensorflow_functions(
                bilm, token_vectors, packed)
        elif self.backend == "jax":
            self._token_vectors = _jax_function(model, token_vectors)
            self._one_row = self._rows = _jax_function(model, packed)
        else:
            self._token_vectors = _eager_function(token_vectors)
            self._one_row = self._rows = _eager_function(packed)

    def token_vectors(self, ids):
        """float32 numpy `(batch, T, P)` of the model's inputs (char ids `(batch, T, C)`, or
        a word model's dict with word ids `(batch, T)` beside)."""
        if self.backend != "jax":
            return _numpy(self._token_vectors(ids))
        steps = _steps(ids)
        out = self._token_vectors(_pad_steps(ids, bucket(steps, MIN_BUCKET)))
        return _numpy(out)[:, :steps]  # (batch, T, P) of (batch, bucket, P)

    def warm_up(self, rows):
        """Prepares the biLSTM's function for calls of `rows` rows (TensorFlow: traced, and
        run once on a tiny input, as TensorFlow prepares a function's graph at its first
        call whatever the shapes), so that the first real call does not wait for it. Under
        JAX a compiled function serves one shape and the first call compiles its own;
        PyTorch has nothing to prepare: both return at once."""
        if self.backend != "tensorflow":
            return
        size = 1 if rows == 1 else 2
        steps = 2 * piece_size(Piece(0, 0, 1))  # two one-token sentences per row
        starts = np.zeros((size, steps), bool)
        starts[:, ::steps // 2] = True
        self.packed(np.zeros((size, steps, self.projection_dim), np.float32),
                    np.ones((size, steps), bool), starts)

    def packed(self, vectors, mask, starts):
        """`packed_layers` of a call already laid out: float32 numpy `(R, S, P)` token
        vectors, bool `(R, S)` mask and sequence starts -> float32 numpy
        `(R, L + 1, S, 2P)`."""
        function = self._one_row if len(mask) == 1 else self._rows
        # The frame's vectors by the token encoder (the weights as they are now), so the
        # biLSTM's function holds no copy of the token encoder.
        boundaries = self.token_vectors(self._boundary_ids)[0]  # (2, P)
        if self.backend != "jax":
            return _numpy(function(vectors, mask, starts, boundaries))
        rows, steps = mask.shape
        shape = (bucket(rows), bucket(steps, MIN_BUCKET))
        out = function(*_pad_rows(vectors, mask, starts, shape), boundaries)
        return _numpy(out)[:rows, :, :steps]

    def packed_layers(self, vectors, rows):
        """float32 numpy `(R, L + 1, S, 2P)` of one call.

        Args:
            vectors: per sentence its token vectors, float32 `(n, P)`.
            rows: the call's rows, each a list of `Piece`s (their `sentence` indexes
                `vectors`), in row order.
        """
        steps = max((sum(piece_size(p) for p in row) for row in rows), default=0)
        if not steps:  # nothing to run
            return np.zeros((len(rows), self.num_output_layers, 0, self.output_dim), np.float32)
        packed = np.zeros((len(rows), steps, self.projection_dim), np.float32)
        mask = np.zeros((len(rows), steps), bool)
        starts = np.zeros((len(rows), steps), bool)
        for row, pieces in enumerate(rows):
            offset = 0
            for piece in pieces:  # `<S>` at offset, the tokens, then `</S>`
                size = piece_size(piece)
                packed[row, offset + 1:offset + size - 1] = \
                    vectors[piece.sentence][piece.start:piece.stop]
                starts[row, offset] = True
                offset += size
            mask[row, :offset] = True
        return self.packed(packed, mask, starts)


def _tensorflow_functions(bilm, token_vectors, packed):
    """`(token_vectors, one_row, rows)` as `tf.function`s with open sizes."""
    import tensorflow as tf

    chars, dim = bilm.options.max_characters_per_token, bilm.options.projection_dim
    ids_spec = tf.TensorSpec([None, None, chars], tf.int32)
    if bilm.word_embedder is not None:
        ids_spec = {"char_ids": ids_spec, "word_ids": tf.TensorSpec([None, None], tf.int32)}

    def packed_function(rows):
        return tf.function(packed, autograph=False, input_signature=[
            tf.TensorSpec([rows, None, dim], tf.float32),
            tf.TensorSpec([rows, None], tf.bool), tf.TensorSpec([rows, None], tf.bool),
            tf.TensorSpec([2, dim], tf.float32)])

    return (tf.function(token_vectors, input_signature=[ids_spec], autograph=False),
            packed_function(1), packed_function(None))


def _jax_function(model, function):
    """`function(*inputs)` compiled by `jax.jit`, the model's variables passed in at each
    call (their current values) and read through `keras.StatelessScope`."""
    import jax

    def pure(values, *inputs):
        with keras.StatelessScope(state_mapping=list(zip(model().variables, values))):
            return function(*inputs)

    compiled = jax.jit(pure)

    def call(*inputs):
        return compiled([variable.value for variable in model().variables], *inputs)

    return call


def _eager_function(function):
    """`function` run eagerly without gradient tracking (PyTorch)."""
    import torch

    def call(*inputs):
        with torch.no_grad():
            return function(*inputs)

    return call


def _numpy(tensor):
    """A backend tensor as a numpy array (no copy where the backend allows)."""
    return backend.numpy_view(tensor)


def _steps(ids):
    """T of the model's inputs `(batch, T, ...)`."""
    return (ids["char_ids"] if isinstance(ids, dict) else ids).shape[1]


def _pad_steps(ids, steps):
    """The model's inputs with zero tokens (no token) appended up to `steps` positions."""
    if isinstance(ids, dict):
        return {key: _pad_steps(value, steps) for key, value in ids.items()}
    ids = np.asarray(ids)
    widths = [(0, 0), (0, steps - ids.shape[1])] + [(0, 0)] * (ids.ndim - 2)
    return np.pad(ids, widths)


def _pad_rows(vectors, mask, starts, shape):
    """A call's inputs padded to `shape = (rows, steps)`: steps past each row's end are
    masked; each new row holds an empty sentence, `<S> </S>` at its first two steps."""
    rows, steps = mask.shape
    padded_vectors = np.zeros(shape + vectors.shape[2:], np.float32)
    padded_vectors[:rows, :steps] = vectors
    padded_mask = np.zeros(shape, bool)
    padded_mask[:rows, :steps] = mask
    padded_mask[rows:, :2] = True
    padded_starts = np.zeros(shape, bool)
    padded_starts[:rows, :steps] = starts
    padded_starts[rows:, 0] = True
    return padded_vectors, padded_mask, padded_starts
