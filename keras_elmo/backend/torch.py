"""The PyTorch backend's functions (see `keras_elmo.backend`): eager, so every shape may
depend on values and every id is read where it is."""

import torch

from keras_elmo.backend.portable import (LOOP_IMPLEMENTATIONS, check_at_most, check_id_range,
                                         kernel_product, read_variable, reverse_sequence,
                                         run_cells, run_layer_with_sequence_gradient,
                                         take_positions)

__all__ = ["LOOP_IMPLEMENTATIONS", "check_at_most", "check_id_range", "kernel_product",
           "needs_static_shapes", "read_variable", "reverse_sequence", "run_cells",
           "run_layer_with_sequence_gradient", "take_positions", "unique_rows"]


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
