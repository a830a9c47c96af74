"""`<S>` and `</S>` around each sentence, and off the outputs again (docs/model.md section 1).

The biLM runs over `<S> t1 ... tn </S>`; callers give only `t1 ... tn` and get back
representations of those. `BiLM` frames token *vectors*, on every path (its call, token
vectors given, rows packed with several sentences), with these layers:

    with_boundary_tokens     ids (B, T, ...) -> (B, T + 2, ...): the two boundary tokens
                             after each row's positions, so one token-encoder call also
                             encodes them
    AddSentenceBoundaries    vectors (B, T, D) -> framed (B, T + 2, D) and its mask; or, for
                             packed rows, the frame's vectors put in place
    RemoveSentenceBoundaries (B, ..., T + 2, D) -> (B, ..., T, D), zero past each sentence

Real tokens come first in each row (the layout `batch_to_ids` and the string converters
produce).
"""

import keras
import numpy as np
from keras import ops

#: Positions a frame adds to a sentence: `<S>` before, `</S>` after.
NUM_BOUNDARIES = 2


def with_boundary_tokens(ids, boundary_ids):
    """`ids` `(batch, T, ...)` with the two boundary tokens appended to every row:
    `(batch, T + 2, ...)`, positions T and T + 1 `<S>` and `</S>`.

    Args:
        ids: int tensor (or Keras tensor) `(batch, T, ...)`.
        boundary_ids: `(2, ...)`: the `<S>` and `</S>` tokens' ids, one position each.
    """
    ids = ops.cast(ids, "int32")
    # numpy, a constant of any backend (a JAX array made here would compile its conversion)
    boundary_ids = np.asarray(boundary_ids, "int32")
    # (batch, 1, 1..) zeros from the ids themselves: any T, a batch of no rows too
    zeros = ops.zeros_like(ops.sum(ids, axis=1, keepdims=True))  # (batch, 1, ...)
    return ops.concatenate([ids, zeros + boundary_ids[None]], axis=1)  # (batch, T + 2, ...)


@keras.saving.register_keras_serializable(package="keras_elmo")
class AddSentenceBoundaries(keras.layers.Layer):
    """Frames token vectors: the `<S>` vector before and the `</S>` vector after each
    sentence; or, in rows that hold several sentences back to back, each sentence's frame.

    Call arguments:
        vectors: float `(batch, T, dim)`, the tokens' vectors, real tokens first; values at
            padded positions are ignored. With `sequence_starts`, the rows' vectors with a
            slot at each sentence's two ends (values there ignored).
        boundaries: float, `(2, dim)` or per row `(batch, 2, dim)`: the `<S>` and `</S>`
            vectors.
        mask: bool `(batch, T)`, True on real tokens (on every position of a packed row).
        sequence_starts: optional bool `(batch, T)`, True at each packed sentence's `<S>`
            slot; a sentence's `</S>` slot is just before the next start, or its row's last
            position.

    Returns:
        `(framed, framed_mask)`: float `(batch, T + 2, dim)` with `<S>` at position 0, the
        tokens at 1..n, `</S>` at n + 1 and zeros after, and bool `(batch, T + 2)`; with
        `sequence_starts`, `(batch, T, dim)` and the mask as given.

    Example:
    >>> frame = AddSentenceBoundaries()
    >>> framed, mask = frame(np.ones((2, 3, 4), "float32"), np.zeros((2, 4), "float32"),
    ...                      mask=np.array([[1, 1, 0], [1, 1, 1]], bool))
    >>> framed.shape, mask.numpy().sum(axis=1)  # <S> t1 t2 </S>, <S> t1 t2 t3 </S>
    ((2, 5, 4), array([4, 5]))
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True  # the framed mask is an output of its own

    def call(self, vectors, boundaries, mask, sequence_starts=None):
        mask = ops.cast(mask, "bool")
        lengths = ops.sum(ops.cast(mask, "int32"), axis=1)  # (batch,)
        boundaries = ops.cast(boundaries, vectors.dtype)
        if len(boundaries.shape) == 2:
            boundaries = boundaries[None]  # (1, 2, dim)
        begin, end = boundaries[:, :1], boundaries[:, 1:]  # (batch or 1, 1, dim) each
        if sequence_starts is None:
            # Each row's tokens move one position on; its frame is then a packed row's of one
            # sentence starting at 0.
            vectors = ops.pad(vectors, ((0, 0), (1, 1), (0, 0)))  # (batch, T + 2, dim)
            positions = ops.arange(ops.shape(vectors)[1])[None, :]  # (1, T + 2)
            mask = positions < (lengths + NUM_BOUNDARIES)[:, None]  # (batch, T + 2)
            starts = ops.logical_and(ops.equal(positions, 0), mask)
            ends = ops.equal(positions, (lengths + 1)[:, None])
        else:
            starts = ops.logical_and(ops.cast(sequence_starts, "bool"), mask)
            ends = sequence_ends(starts, lengths)
        framed = ops.where(ends[..., None], end, vectors)
        framed = ops.where(starts[..., None], begin, framed)
        return ops.where(mask[..., None], framed, ops.zeros_like(framed)), mask

    def compute_mask(self, vectors, boundaries=None, mask=None, sequence_starts=None):
        return None

    def compute_output_spec(self, vectors, boundaries, mask, sequence_starts=None):
        steps = vectors.shape[1]
        if sequence_starts is None:
            steps = None if steps is None else steps + NUM_BOUNDARIES
        shape = (vectors.shape[0], steps)
        return (keras.KerasTensor(shape + (vectors.shape[2],), dtype=vectors.dtype),
                keras.KerasTensor(shape, dtype="bool"))


def sequence_ends(starts, lengths):
    """bool `(batch, T)`, True at the last position of each sequence of rows that hold
    several back to back: just before the next start, and at each row's last real position.

    Args:
        starts: bool `(batch, T)`, True where a sequence begins (real positions only).
        lengths: int32 `(batch,)`, real positions per row (first in each row).
    """
    positions = ops.arange(ops.shape(starts)[1])[None, :]  # (1, T)
    following = ops.pad(starts[:, 1:], ((0, 0), (0, 1)))  # a start comes next
    return ops.logical_or(ops.logical_and(following, positions < lengths[:, None]),
                          ops.equal(positions, lengths[:, None] - 1))


@keras.saving.register_keras_serializable(package="keras_elmo")
class RemoveSentenceBoundaries(keras.layers.Layer):
    """Drops the `<S>` and `</S>` positions again and zeroes everything past each sentence.

    Call arguments:
        inputs: float `(batch, ..., T + 2, dim)`, time on axis -2.
        mask: bool `(batch, T + 2)`, True on `<S>`, the tokens and `</S>`.

    Returns:
        float `(batch, ..., T, dim)`, exactly zero past each sentence's end.

    Example:
    >>> out = RemoveSentenceBoundaries()(np.ones((1, 3, 4, 2), "float32"),
    ...                                  mask=np.array([[1, 1, 1, 0]], bool))
    >>> out.shape, out.numpy()[0, 0, :, 0]  # one token kept
    ((1, 3, 2, 2), array([1., 0.], dtype=float32))
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, inputs, mask):
        mask = ops.cast(mask, "bool")
        lengths = ops.sum(ops.cast(mask, "int32"), axis=1) - NUM_BOUNDARIES  # tokens
        steps = ops.shape(inputs)[-2] - NUM_BOUNDARIES
        inner = inputs[..., 1:-1, :]  # (batch, ..., T, dim)
        keep = ops.arange(steps)[None, :] < lengths[:, None]  # (batch, T)
        # (batch, T) -> (batch, 1.., T, 1): axes added, not a reshape with -1, which no
        # backend but TensorFlow resolves for a batch of no rows or rows of no tokens
        for _ in range(len(inputs.shape) - 3):
            keep = ops.expand_dims(keep, 1)
        keep = ops.expand_dims(keep, -1)
        return ops.where(keep, inner, ops.zeros_like(inner))

    def compute_mask(self, inputs, mask=None):
        return None  # the caller's token mask is the meaningful one

    def compute_output_shape(self, input_shape):
        steps = None if input_shape[-2] is None else input_shape[-2] - NUM_BOUNDARIES
        return tuple(input_shape[:-2]) + (steps, input_shape[-1])
