"""PyTorch's LSTM loop of `ResidualBiLSTM`: a plain Python loop over the steps, in torch.

Keras' own `backend/torch/rnn.py` is the model: the input gates `W_x x + b` of many steps are
one product (`GATE_COLUMNS` columns, steps x rows, at a time, as TensorFlow's loop computes
them: a packed embedding call's gates are never all held at once), and nothing between the
steps goes through `keras.ops`. Each
step is `step`, the cell's `step_values` written in torch calls, op for op (the math has one
definition, the cell's; tests/test_backend_loops.py holds `step` to it bit for bit): the
same step in `keras.ops` costs several times more in dispatch alone, as much as the
products of a one-row step at the published size (docs/performance.md has the figures).
Without autograd (`torch.no_grad()`, `torch.inference_mode()`, or no tensor that needs a
gradient) each step's output is written into one preallocated `(T, P, batch)` tensor;
under autograd the outputs are stacked at the end, as Keras' loop does, so the graph holds
no chain of in-place writes.

The thread layout (`DIRECTION_THREADS`): the two directions of a layer are independent, so
each runs its own loop in a thread of its own with one intra-op thread, the two side by side,
as TensorFlow runs them (`keras_elmo.process.cpu_setup`, one thread per op, two ops at
once). A step is then never split across cores that wait on each other: with another
process busy on one core, a 2-thread product waits at every step for its descheduled half.
Autograd's grad mode and inference mode are thread-local: each loop thread runs in the
caller's.
"""

import concurrent.futures
import os
import threading

import torch

from keras_elmo import constants
from keras_elmo.backend.lstm_types import GATE_COLUMNS

#: Run the directions of a layer in threads of their own, one intra-op thread each, on the
#: CPU when the caller has at least this many intra-op threads (`torch.get_num_threads()`);
#: else (a GPU, one thread, `torch.compile` tracing) one after the other on the caller's.
DIRECTION_THREADS = 2

_pool = {}
_pool_lock = threading.Lock()


def _executor():
    """The process's pool of loop threads (made at first use, per process: a fork gets its
    own)."""
    with _pool_lock:
        if _pool.get("pid") != os.getpid():
            _pool["executor"] = concurrent.futures.ThreadPoolExecutor(
                max_workers=len(constants.DIRECTIONS), thread_name_prefix="keras_elmo_lstm")
            _pool["pid"] = os.getpid()
        return _pool["executor"]


def run_cells(cells, inputs, lengths, initial_states, freeze_after_length, keeps=None,
              one_row=False):
    """Runs independent cells over their own inputs, each in its own time loop.

    The arguments and results of every backend's `run_cells` (TensorFlow's in
    keras_elmo/backend/tensorflow/lstm_loop.py says each); `one_row` is ignored here.

    Args:
        cells: list of `LSTMProjectionCell`.
        inputs: list of feature-major `(input_dim, T, batch)`, real steps first.
        lengths: int `(batch,)`.
        initial_states: list of `(h, c)`, `(P, batch)` and `(U, batch)`.
        freeze_after_length: keep each row's state after its last real step.
        keeps: None, or per cell a `(T, batch)` factor of the state before each step.
        one_row: ignored.

    Returns:
        `(outputs, final_states)`: a list of `(P, T, batch)` and one of `(h, c)`.
    """
    # Read once per call, in the caller's thread (Keras' scopes are thread-local).
    kernels = [cell.step_kernels() for cell in cells]
    weights = [cell.input_gate_weights() for cell in cells]
    num_steps, batch = inputs[0].shape[1], inputs[0].shape[2]
    chunk = max(GATE_COLUMNS // max(batch, 1), 1)  # steps whose input gates exist at once
    running = None
    if freeze_after_length:
        steps = torch.arange(num_steps, device=inputs[0].device)
        running = (steps[:, None] < lengths.to(steps.device)[None, :])[:, None]  # (T, 1, b)
    jobs = [(cell, kernel, weight, x, state, None if keeps is None else keeps[k])
            for k, (cell, kernel, weight, x, state) in enumerate(
                zip(cells, kernels, weights, inputs, initial_states))]
    if (len(jobs) > 1 and inputs[0].device.type == "cpu" and not torch.compiler.is_compiling()
            and torch.get_num_threads() >= DIRECTION_THREADS):
        grad, inference = torch.is_grad_enabled(), torch.is_inference_mode_enabled()
        futures = [_executor().submit(_run_in_thread, grad, inference, running, chunk, *job)
                   for job in jobs]
        results = [future.result() for future in futures]
    else:
        results = [_run_one(running, chunk, *job) for job in jobs]
    return [out for out, _ in results], [final for _, final in results]


def _run_in_thread(grad, inference, running, *job):
    """`_run_one` in a loop thread: the caller's autograd modes, one intra-op thread (this
    thread's OpenMP and MKL setting; PyTorch also keeps it as the count a thread that starts
    using torch later begins with)."""
    if torch.get_num_threads() != 1:
        torch.set_num_threads(1)
    with torch.inference_mode(inference), torch.set_grad_enabled(grad):
        return _run_one(running, *job)


def _run_one(running, chunk, cell, kernels, weights, inputs, state, keeps):
    """One cell's loop over `inputs` `(input_dim, T, batch)` from `state`, its input gates
    `chunk` steps at a time: `((P, T, batch), (h, c))`."""
    num_steps, batch = inputs.shape[1], inputs.shape[2]
    h, c = state
    tracked = torch.is_grad_enabled() and any(
        t.requires_grad for t in (inputs, h, c, kernels.recurrent, kernels.projection,
                                  *weights))
    if tracked:
        # A stateful layer assigns its state variables in place after the call, and the
        # first step's products save the state it read (a view of them) for backward.
        h, c = h.clone(), c.clone()
        outputs = []
    else:
        outputs = torch.empty((num_steps, cell.projection_dim, batch), dtype=inputs.dtype,
                              device=inputs.device)  # (T, P, batch), written step by step
    for start in range(0, num_steps, chunk):
        gates = input_gates(weights, inputs[:, start:start + chunk])  # (4U, K, batch)
        for t in range(start, min(start + chunk, num_steps)):
            if keeps is not None:  # a new sequence begins here: from a zero state
                keep = keeps[t][None, :]  # (1, batch)
                h, c = h * keep, c * keep
            new_h, new_c = step(cell, gates[:, t - start], h, c, kernels)
            if tracked:
                outputs.append(new_h)
            else:
                outputs[t].copy_(new_h)
            if running is not None:
                h, c = torch.where(running[t], new_h, h), torch.where(running[t], new_c, c)
            else:
                h, c = new_h, new_c
    if tracked:
        outputs = (torch.stack(outputs) if outputs else
                   torch.zeros((0, cell.projection_dim, batch), dtype=inputs.dtype,
                               device=inputs.device))
    return outputs.permute(1, 0, 2), (h, c)  # (P, T, batch)


def input_gates(weights, inputs):
    """`LSTMProjectionCell.input_gates(inputs, weights)` in one torch call: the bias is the
    product's starting value (`addmm`), so no second `(4U, K, batch)` buffer is made.
    `weights` `(W_x, b)` as `input_gate_weights` reads them; `inputs` `(input_dim, K, batch)`
    -> `(4U, K, batch)`."""
    kernel, bias = weights
    size, steps, batch = inputs.shape
    return torch.addmm(bias[:, None], kernel, inputs.reshape(size, steps * batch)).reshape(
        kernel.shape[0], steps, batch)


def step(cell, input_gates, h, c, kernels):
    """`LSTMProjectionCell.step_values(input_gates, (h, c), kernels)[:2]` in torch calls, op
    for op: the new `h` `(P, batch)` and `c` `(U, batch)`."""
    recurrent = kernels.recurrent.T if kernels.recurrent_in_out else kernels.recurrent
    z = input_gates + torch.matmul(recurrent, h)  # (4U, batch)
    z_i, z_f, z_c, z_o = torch.chunk(z, constants.NUM_GATES, dim=-2)  # gates i, f, c, o
    c = torch.sigmoid(z_f) * c + torch.sigmoid(z_i) * torch.tanh(z_c)
    if cell.cell_clip is not None:
        c = torch.clip(c, -cell.cell_clip, cell.cell_clip)
    h = torch.matmul(kernels.projection, torch.sigmoid(z_o) * torch.tanh(c))  # (P, batch)
    if cell.proj_clip is not None:
        h = torch.clip(h, -cell.proj_clip, cell.proj_clip)
    return h, c
