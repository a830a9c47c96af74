"""The PyTorch backend's functions (see `keras_elmo.backend`): eager, so every shape may
depend on values and every id is read where it is. The LSTM loop is torch's own
(`torch_lstm.run_cells`), and the per-row reversals and reorderings are `torch.gather`s of
broadcast (not copied) indices, with no `keras.ops` dispatch in between."""

import torch

from keras_elmo.backend.portable import (LOOP_IMPLEMENTATIONS, check_at_most, check_id_range,
                                         read_variable, run_layer_with_sequence_gradient)
from keras_elmo.backend.torch_lstm import run_cells

__all__ = ["LOOP_IMPLEMENTATIONS", "check_at_most", "check_id_range", "kernel_product",
           "needs_static_shapes", "numpy_view", "read_variable", "reverse_sequence", "run_cells",
           "run_layer_with_sequence_gradient", "take_positions", "unique_rows"]


def numpy_view(tensor):
    """A tensor's values as numpy, without a copy where it is on the CPU (Keras'
    `convert_to_numpy` copies); bfloat16, which numpy lacks, by Keras' conversion."""
    if tensor.dtype == torch.bfloat16:
        import keras

        return keras.ops.convert_to_numpy(tensor)
    return tensor.detach().cpu().numpy()


def needs_static_shapes(x=None):
    """True while `torch.compile` traces: it compiles fixed shapes best."""
    return torch.compiler.is_compiling()


def unique_rows(ids):
    """The distinct rows of `(n, chars)` int ids `(U, chars)` and each row's index `(n,)`
    int32 into them (`torch.unique`)."""
    ids = torch.as_tensor(ids).to(torch.int32)
    if ids.shape[0] == 0:
        return ids, torch.zeros((0,), dtype=torch.int32, device=ids.device)
    rows, positions = torch.unique(ids, dim=0, return_inverse=True)
    return rows, positions.to(torch.int32)


def kernel_product(kernel, x, one_row=False, in_out=False):
    """`W @ x` of a kernel `W` `(out, in)` (or its transpose `(in, out)`, `in_out`) and a
    feature-major `x` `(in, batch)` -> `(out, batch)` (`torch.matmul`)."""
    return torch.matmul(kernel.T if in_out else kernel, x)


def reverse_sequence(x, lengths, seq_axis, batch_axis):
    """Each sequence of `x` reversed within its own length `lengths` `(batch,)`; positions
    past a sequence's length stay where they are (`tf.reverse_sequence`'s rule)."""
    steps = x.shape[seq_axis]
    positions = torch.arange(steps, device=x.device)[None, :]  # (1, T)
    lengths = torch.as_tensor(lengths, device=x.device).to(torch.int64)[:, None]  # (batch, 1)
    source = torch.where(positions < lengths, lengths - 1 - positions, positions)  # (batch, T)
    if batch_axis > seq_axis:
        source = source.T  # (T, batch)
    shape = [1] * x.dim()
    shape[batch_axis], shape[seq_axis] = x.shape[batch_axis], steps
    return torch.gather(x, seq_axis, source.reshape(shape).expand(x.shape))


def take_positions(x, order, axis):
    """`x` `(batch, ..., T, ...)` with its positions along `axis` (>= 1) taken in each
    row's `order` `(batch, T)` (the order broadcast over the other axes)."""
    order = torch.as_tensor(order, device=x.device).to(torch.int64)
    shape = [1] * x.dim()  # (batch, T) -> (batch, 1.., T, 1..), T at `axis`
    shape[0], shape[axis] = order.shape[0], order.shape[1]
    index = order.reshape(shape)
    return torch.gather(x, axis, index.expand(*x.shape[:axis], order.shape[1],
                                              *x.shape[axis + 1:]))
