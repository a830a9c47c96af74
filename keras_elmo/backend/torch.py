"""The PyTorch backend's functions (see `keras_elmo.backend`): eager, so every shape may
depend on values and every id is read where it is. The LSTM loop is torch's own
(`torch_lstm.run_cells`), and the per-row reversals and reorderings are `torch.gather`s of
broadcast (not copied) indices, with no `keras.ops` dispatch in between."""

import torch

from keras_elmo.backend.portable import (LOOP_IMPLEMENTATIONS, check_at_most, check_id_range,
                                         read_variable, run_layer_with_sequence_gradient)
from keras_elmo.backend.torch_lstm import run_cells

__all__ = ["LOOP_IMPLEMENTATIONS", "check_at_most", "check_id_range", "conv_max", "kernel_product",
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


def conv_max(chars, kernel, filters_per_call):
    """The portable `conv_max` (max over positions of a valid 1-D convolution, `(rows, K,
    E)` * `(w, E, n)` -> `(rows, n)`) as one matrix product per group of filters: each
    position's window of `w` chars is a row of `w * E` values (`unfold`), times the kernel
    as a `(w * E, n)` matrix. A char CNN has few input channels (16 in the published
    models) and PyTorch's CPU convolution runs such narrow convolutions below its matrix
    product's rate (docs/performance.md). Its buffers: the windows `(rows, K - w + 1, w *
    E)` and each group's product `(rows, K - w + 1, filters_per_call)`."""
    rows, length, dim = chars.shape
    width = kernel.shape[0]
    positions = length - width + 1
    windows = chars.unfold(1, width, 1).transpose(2, 3).reshape(rows, positions, width * dim)
    matrix = kernel.reshape(width * dim, kernel.shape[-1])  # row k * E + e: kernel[k, e]
    maxima = [torch.matmul(windows, matrix[:, start:start + filters_per_call]).amax(dim=1)
              for start in range(0, matrix.shape[1], filters_per_call)]  # (rows, filters)
    return torch.cat(maxima, dim=-1) if len(maxima) > 1 else maxima[0]


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
