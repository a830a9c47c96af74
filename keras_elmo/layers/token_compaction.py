"""Positions with no token between real ones: read as if they were not there.

An empty string token is no token (docs/model.md section 1): `batch_to_ids`, the string
converters and the vocabulary lookups give it an all-zero char row, wherever it stands.
`"a  b".split(" ")` puts one between two words. The biLM frames and reads each row's real
tokens as one sentence, so before it runs, each row's real tokens move to its front (in
order), and after it, every output moves back to its input position; a position with no
token gets the zeros of a padded one. A row whose tokens already come first is unchanged.

    compaction_order(mask)          bool (batch, T) -> int32 (batch, T): real positions
                                    first, in order, then the others
    restoring_order(order)          its inverse permutation, per row
    take_positions(x, order, axis)  x's positions along `axis` in that order

Example:
>>> mask = np.array([[True, False, True]])   # "人民", "", "日报"
>>> order = compaction_order(mask)           # [[0, 2, 1]]
>>> compact = take_positions(ids, order, axis=1)            # "人民", "日报", no token
>>> restored = take_positions(out, restoring_order(order), axis=2)  # aligned to the input
"""

import keras
from keras import ops

from keras_elmo import backend


def compaction_order(mask):
    """For each row of a bool `(batch, T)` mask, the positions of its True entries in
    order, then those of its False ones: int32 `(batch, T)`."""
    ones = ops.ones_like(mask, dtype="int32")  # (batch, T): a symbolic T works too
    positions = ops.cumsum(ones, axis=1) - 1  # (batch, T)
    steps = ops.sum(ones, axis=1, keepdims=True)  # (batch, 1), T
    # Distinct keys, so the order is the same on every backend (no stable sort needed).
    keys = ops.where(mask, positions, positions + steps)  # (batch, T)
    return ops.cast(ops.argsort(keys, axis=1), "int32")


def restoring_order(order):
    """The inverse of each row's permutation `order` `(batch, T)`: taking positions by it
    puts compacted values back where they came from."""
    return ops.cast(ops.argsort(order, axis=1), "int32")


def take_positions(x, order, axis):
    """`x` `(batch, ..., T, ...)` with its positions along `axis` taken in each row's
    `order` `(batch, T)`; same shape as `x` (a Keras tensor too, in a functional model)."""
    return _TakePositions(axis % len(x.shape))(x, order)


class _TakePositions(keras.Operation):
    """`take_positions` as a Keras operation: each backend's gather
    (`keras_elmo.backend.take_positions`; TensorFlow's `tf.gather(batch_dims=1)` reads the
    order once per row, where broadcasting it to `x`'s shape for `take_along_axis` made the
    gather of the biLM's layers several times slower), symbolic in a functional model."""

    def __init__(self, axis):
        super().__init__()
        self.axis = axis

    def call(self, x, order):
        return backend.take_positions(x, order, self.axis)

    def compute_output_spec(self, x, order):
        return keras.KerasTensor(x.shape, dtype=x.dtype)
