"""The TensorFlow backend's functions (see `keras_elmo.backend`).

TensorFlow keeps its own LSTM loops for speed: a `tf.while_loop` over chunks of input
gates with one-row products (lstm_loop.py), and a training loop whose backward pass is
written by hand (sequence_gradient.py).
"""

import numpy as np
import tensorflow as tf

from keras_elmo.backend.portable import conv_max
from keras_elmo.backend.tensorflow.lstm_loop import run_cells
from keras_elmo.backend.tensorflow.sequence_gradient import run_layer_with_sequence_gradient

__all__ = ["LOOP_IMPLEMENTATIONS", "check_at_most", "check_id_range", "conv_max",
           "in_xla_function", "kernel_product", "needs_static_shapes", "reverse_sequence",
           "run_cells", "read_variable", "run_layer_with_sequence_gradient", "take_positions",
           "unique_rows"]

#: Every `ResidualBiLSTM` loop runs here, "auto" first.
LOOP_IMPLEMENTATIONS = ("auto", "sequence_gradient", "batched_loop", "one_row_loop")
#: Seed of the weights of `unique_rows`' row keys (any fixed weights give exact results).
_KEY_SEED = 20260


def in_xla_function():
    """True while a function compiled with XLA (`tf.function(jit_compile=True)`) is traced."""
    return tf.__internal__.get_enclosing_xla_context() is not None


def needs_static_shapes(x=None):
    """True inside an XLA-compiled function: shapes may not depend on values."""
    return in_xla_function()


def unique_rows(ids):
    """The distinct rows of a char-id matrix, exactly: `ids == rows[positions]`.

    `(n, chars)` int32 -> `rows` `(U, chars)` in order of first occurrence and
    `positions` `(n,)` int32. Each row gets a 64-bit key, the bits of two float32 weighted
    sums of its ids (one `(n, chars) x (chars, 2)` product), and `tf.unique` groups equal
    keys: it has a GPU kernel, where TensorFlow's row-wise `UniqueV2` runs on the CPU only.
    Equal rows always get equal keys; distinct rows sharing a key (a collision, which the
    random weights make very unlikely) are caught by comparing every row with its group's
    first row, and then every row is its own group: distinct rows never merge.
    """
    ids = tf.convert_to_tensor(ids, tf.int32)
    num_chars = int(ids.shape[-1])
    weights = tf.constant(_row_key_weights(num_chars), tf.float32)  # (chars, 2)
    sums = tf.matmul(tf.cast(ids, tf.float32), weights)  # (n, 2)
    keys, positions = tf.unique(tf.bitcast(sums, tf.int64))  # (U,), (n,)
    num_rows = tf.shape(ids)[0]
    first = tf.math.unsorted_segment_min(tf.range(num_rows), positions,
                                         tf.shape(keys)[0])  # (U,): each key's first row
    exact = tf.reduce_all(tf.equal(tf.gather(ids, tf.gather(first, positions)), ids))
    return tf.cond(exact, lambda: (tf.gather(ids, first), positions),
                   lambda: (ids, tf.range(num_rows)))


def _row_key_weights(num_chars):
    """The fixed random weights of `unique_rows`' keys, `(num_chars, 2)`."""
    return np.random.default_rng(_KEY_SEED).uniform(0.5, 1.0, (num_chars, 2))


def check_id_range(ids, max_id, message):
    """Refuses ids outside `[0, max_id]`. Eager: a `ValueError` quoting the smallest and
    largest id received. Traced (Keras functional model, tf.function, SavedModel): an
    assertion op that fails the call with `message`."""
    if tf.executing_eagerly():
        if int(tf.size(ids)) == 0:
            return
        low, high = int(tf.reduce_min(ids)), int(tf.reduce_max(ids))
        if low < 0 or high > max_id:
            raise ValueError(f"{message}; received ids from {low} to {high}.")
        return
    tf.debugging.assert_greater_equal(ids, 0, message=message)
    tf.debugging.assert_less_equal(ids, max_id, message=message)


def check_at_most(value, limit, message):
    """Refuses an int scalar above `limit`: an assertion op (traced) or its error (eager)."""
    tf.debugging.assert_less_equal(value, limit, message=message)


def reverse_sequence(x, lengths, seq_axis, batch_axis):
    """Each sequence of `x` reversed within its own length (`tf.reverse_sequence`)."""
    return tf.reverse_sequence(x, lengths, seq_axis=seq_axis, batch_axis=batch_axis)


def read_variable(variable):
    """A Keras variable's value as a tensor read once, here (Keras' own conversion hands a
    TensorFlow variable back unread: read inside a `tf.while_loop` under `stateless_call`,
    as the export runs the biLM, its gradient was lost)."""
    return tf.convert_to_tensor(variable)


def take_positions(x, order, axis):
    """`x` `(batch, ..., T, ...)` with its positions along `axis` (>= 1) taken in each
    row's `order` `(batch, T)`: one `tf.gather` with `batch_dims=1`."""
    return tf.gather(x, order, axis=axis, batch_dims=1)


def kernel_product(kernel, x, one_row=False, in_out=False):
    """`W @ x` of a kernel `W` `(out, in)` (or given as its transpose `(in, out)`, `in_out`),
    feature-major `x` `(in, batch)` -> `(out, batch)`.

    `one_row` (`x` `(in, 1)`): computed as a row `(1, in)` (the same bytes) times the kernel
    read in its own order, `x^T W^T` (or `x^T W` of the transpose), the faster form at one
    row.
    """
    if not one_row:
        return tf.matmul(kernel, x, transpose_a=in_out)
    row = tf.reshape(x, (1, -1))  # (1, in): no copy
    return tf.reshape(tf.matmul(row, kernel, transpose_b=not in_out), (-1, 1))  # (out, 1)
