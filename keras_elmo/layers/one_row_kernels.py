"""`OneRowKernels`: `(in, out)` copies of a `ResidualBiLSTM`'s kernels for one-row batches.

A batch of one sentence is bound by memory: every step streams each cell's `W_h` and `W_p`
(32 + 8 MiB at the published size) for one row. The cell stores its kernels `(out, in)`, the
layout of the fastest products for batches (`keras_elmo.layers.lstm_projection_cell`);
oneDNN's one-row float32 product streams an `(in, out)` kernel faster. Measured on a 2-core
AMD EPYC, both directions at once: 0.73 against 0.97 ms per `W_h` product with AVX512
kernels, 0.58 against 0.75 with AVX2 ones; the published biLSTM of a 20-token sentence at
one row 84.9 against 97.5 ms (1.15x) with AVX512 kernels, 89.2 against 103.6 ms (1.16x) with
AVX2 ones. Not everywhere: with TensorFlow's Eigen kernels (oneDNN off) 0.93x, in bfloat16
0.57x. Transposing inside every call costs more than it gains (about 12 ms for two `W_h`),
so a caller that runs many one-row batches on weights that no longer change
(`BiLM.traced_layers_from_token_embeddings`: `keras-elmo embed`, `ElmoEmbedder`,
`TokenEmbeddingCache`) keeps copies: `L * 2` cells of `P * 4U + U * P` floats (160 MiB at
the published size).

The copies are a snapshot: `refresh()` makes them again from the encoder's weights as they
are now (after loading other weights or training); until then one-row calls given them use
the weights of the last `refresh()`. Nothing is saved or exported with them.

Example (a tiny encoder: `P = 8`):
>>> encoder = ResidualBiLSTM(units=12, projection_dim=8, num_layers=2)
>>> encoder.build((None, None, 8))
>>> kernels = OneRowKernels(encoder)  # (8, 48) copies, one per cell
>>> x = np.random.rand(1, 5, 8).astype("float32")
>>> encoder(x, one_row=True, one_row_kernels=kernels).shape
(1, 2, 5, 16)
>>> kernels.refresh()  # after the encoder's weights changed
"""

import tensorflow as tf

_DIRECTIONS = ("forward", "backward")


class OneRowKernels:
    """Copies `(in, out)` of every cell's `W_h` and `W_p`, for `ResidualBiLSTM`'s one-row
    loop.

    Args:
        encoder: a built `ResidualBiLSTM`.

    Attributes:
        kernels: dict direction -> list (one per layer) of pairs of non-trainable
            `tf.Variable`: the transposed `recurrent_kernel` `(projection_dim, 4 * units)` and
            `projection_kernel` `(units, projection_dim)`.
    """

    def __init__(self, encoder):
        if not getattr(encoder, "built", False) or not hasattr(encoder, "cells"):
            raise ValueError(f"OneRowKernels needs a built ResidualBiLSTM; received "
                             f"{type(encoder).__name__} {getattr(encoder, 'name', '')!r} "
                             "that is not built.")
        self.encoder_name = encoder.name
        self._cells = encoder.cells
        # Plain tf.Variables held outside the layer: no checkpoint, weight file or export
        # sees them.
        self.kernels = {d: [tuple(tf.Variable(tf.transpose(kernel), trainable=False,
                                              name=f"{cell.name}_{name}_in_out")
                                  for name, kernel in _stored(cell))
                            for cell in encoder.cells[d]] for d in _DIRECTIONS}

    def refresh(self):
        """Copies the encoder's kernels again, as they are now."""
        for direction in _DIRECTIONS:
            for cell, copies in zip(self._cells[direction], self.kernels[direction]):
                for copy, (_, kernel) in zip(copies, _stored(cell)):
                    copy.assign(tf.transpose(kernel))

    def check_encoder(self, encoder):
        """Raises ValueError unless `encoder` is the one the copies were made from."""
        if encoder.cells is not self._cells:
            raise ValueError(f"one_row_kernels were made from the encoder "
                             f"{self.encoder_name!r}; received them for {encoder.name!r}, "
                             "another one: make them with OneRowKernels(this encoder).")


def _stored(cell):
    """The cell's kernels a one-row step reads, as stored `(out, in)`, with their names."""
    return (("recurrent", cell.recurrent_kernel), ("projection", cell.projection_kernel))
