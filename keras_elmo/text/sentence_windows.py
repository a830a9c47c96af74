"""Over-long sentences: the one rule of the Python path, `keras-elmo embed` and the SavedModel.

A sentence of `n > max_length` tokens is embedded as consecutive windows of `max_length`
tokens (the last one shorter): tokens `[0, M)`, `[M, 2M)`, ... each run through the biLM as
a sentence of its own (its own `<S>` ... `</S>`, a zero LSTM state), and the windows'
vectors are put back side by side. `n` tokens in, `n` vectors out: never an error, never a
token dropped. A token near a window's edge sees only its own window's context, so its
vectors differ from a whole-sentence run; choose `max_length` above your longest sentence
to avoid that (the published models were trained on sentences of any length).

`windows` and `num_windows` state the rule (no TensorFlow: the command line plans its
batches and checks its options before loading it); `split_windows` and `join_windows` are
its one implementation in TensorFlow ops, which the embedders' traced functions and the
SavedModel's signatures both run.

Example:
>>> windows(7, 3)
[(0, 3), (3, 6), (6, 7)]
>>> windows(0, 3)  # an empty sentence is one empty window
[(0, 0)]
"""

from keras_elmo.validation import check_int

#: Tokens per window unless told otherwise (`max_length`, `--max-length`).
DEFAULT_MAX_LENGTH = 512


def check_max_length(max_length, name="max_length"):
    """`max_length` if it is an int >= 1, else a `ValueError` naming what was received."""
    return check_int(name, max_length, hint="(Tokens per biLM window: a longer sentence runs "
                                            "in windows of that many.)")


def windows(num_tokens, max_length):
    """`(start, stop)` token ranges of a sentence's windows; one `(0, 0)` for no tokens."""
    return [(start, min(start + max_length, num_tokens))
            for start in range(0, max(num_tokens, 1), max_length)]


def num_windows(num_tokens, max_length):
    """How many windows `windows(num_tokens, max_length)` gives (at least 1)."""
    return max(-(-num_tokens // max_length), 1)


def split_windows(values, lengths, max_length):
    """Rows of `lengths` real entries -> the windows of `windows(length, max_length)`.

    Dense index arithmetic only (no ragged ops: those have no GPU kernel).

    Args:
        values: `(batch, steps, ...)`, real entries first in each row.
        lengths: int32 `(batch,)`.
        max_length: int or int32 scalar, entries per window.

    Returns:
        `(window_values, window_lengths, firsts)`: `(W, window_steps, ...)` zero past each
        window's end, int32 `(W,)`, and int32 `(batch,)` the index of each row's first
        window; a row of `n` entries has `max(ceil(n / max_length), 1)` windows, in order,
        and `window_steps = min(max_length, steps)`.
    """
    import tensorflow as tf

    size = tf.cast(max_length, tf.int32)
    counts = tf.maximum((lengths + size - 1) // size, 1)  # (batch,)
    ends = tf.cumsum(counts)  # (batch,): one past each row's last window
    firsts = ends - counts  # (batch,)
    window = tf.range(tf.reduce_sum(counts))  # (W,)
    # The row of each window: how many rows end at or before it.
    row = tf.reduce_sum(tf.cast(window[:, tf.newaxis] >= ends[tf.newaxis, :], tf.int32),
                        axis=1)  # (W,)
    start = (window - tf.gather(firsts, row)) * size  # (W,): its first entry in the row
    window_lengths = tf.minimum(size, tf.gather(lengths, row) - start)  # (W,)
    steps = tf.shape(values)[1]
    window_steps = tf.minimum(size, steps)
    offset = tf.range(window_steps)  # (window_steps,)
    position = tf.minimum(start[:, tf.newaxis] + offset, tf.maximum(steps - 1, 0))  # (W, ws)
    index = tf.stack([tf.broadcast_to(row[:, tf.newaxis], tf.shape(position)), position],
                     axis=-1)  # (W, window_steps, 2): (row, entry)
    gathered = tf.gather_nd(values, index)  # (W, window_steps, ...)
    real = offset[tf.newaxis, :] < window_lengths[:, tf.newaxis]  # (W, window_steps)
    real = tf.reshape(real, tf.concat([tf.shape(real), tf.ones(
        [len(values.shape) - 2], tf.int32)], axis=0))  # (W, window_steps, 1...)
    return tf.where(real, gathered, tf.zeros_like(gathered)), window_lengths, firsts


def join_windows(window_values, firsts, lengths, max_length):
    """The inverse of `split_windows`: each row's windows side by side again.

    Args:
        window_values: `(W, window_steps, ...)`, one output per window entry.
        firsts: int32 `(batch,)`, each row's first window (`split_windows`).
        lengths: int32 `(batch,)`, each row's entries.
        max_length: int or int32 scalar, entries per window.

    Returns:
        `(batch, steps, ...)` with `steps = max(lengths)` (0 for no rows), zero past each
        row's length.
    """
    import tensorflow as tf

    size = tf.cast(max_length, tf.int32)
    steps = tf.reduce_max(tf.concat([lengths, [0]], axis=0))  # the longest row
    position = tf.range(steps)[tf.newaxis, :]  # (1, steps)
    # Entry p of row b is entry p % M of window firsts[b] + p // M.
    window = firsts[:, tf.newaxis] + position // size  # (batch, steps)
    real = position < lengths[:, tf.newaxis]  # (batch, steps)
    index = tf.stack([tf.where(real, window, 0), tf.where(real, position % size, 0)],
                     axis=-1)  # (batch, steps, 2)
    rows = tf.gather_nd(window_values, index)  # (batch, steps, ...)
    real = tf.reshape(real, tf.concat([tf.shape(real), tf.ones(
        [len(window_values.shape) - 2], tf.int32)], axis=0))  # (batch, steps, 1...)
    return tf.where(real, rows, tf.zeros_like(rows))
