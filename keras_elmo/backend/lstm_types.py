"""What one LSTM step reads and returns, shared by the cell and every backend's loop.

    StepKernels   the two kernels a step reads (`LSTMProjectionCell.step_kernels`)
    StepValues    what a step computes (`LSTMProjectionCell.step_values`)
    GATE_COLUMNS  how many input gates a loop holds at once
"""

import collections

#: Columns (steps x batch rows) of input gates a loop computes at once, per direction, on
#: every backend: a long sentence's or a packed embedding call's gates, `4U` floats per
#: column, are never all held at once (docs/performance.md).
GATE_COLUMNS = 1024

#: What one step computes: the new state `(h, c)` and the values a hand-written backward
#: pass needs: the gate pre-activations `z` `(4U, batch)`, the memory before its clip
#: `c_raw` `(U, batch)` and the projection before its clip `h_raw` `(P, batch)`.
StepValues = collections.namedtuple("StepValues", ["h", "c", "z", "c_raw", "h_raw"])

#: The two kernels a step reads, as tensors: `W_h` `(4U, P)` and `W_p` `(P, U)` as stored,
#: or `W_h` `(P, 4U)` transposed in the call (`recurrent_in_out`, TensorFlow's one-row loop).
StepKernels = collections.namedtuple("StepKernels",
                                     ["recurrent", "projection", "recurrent_in_out"],
                                     defaults=[False])
