"""What one LSTM step reads and returns, shared by the cell and every backend's loop.

    StepKernels   the two kernels a step reads (`LSTMProjectionCell.step_kernels`)
    StepValues    what a step computes (`LSTMProjectionCell.step_values`)
"""

import collections

#: What one step computes: the new state `(h, c)` and the values a hand-written backward
#: pass needs: the gate pre-activations `z` `(4U, batch)`, the memory before its clip
#: `c_raw` `(U, batch)` and the projection before its clip `h_raw` `(P, batch)`.
StepValues = collections.namedtuple("StepValues", ["h", "c", "z", "c_raw", "h_raw"])

#: The two kernels a step reads, as tensors: `W_h` `(4U, P)` and `W_p` `(P, U)` as stored,
#: or `W_h` `(P, 4U)` transposed in the call (`recurrent_in_out`, TensorFlow's one-row loop).
StepKernels = collections.namedtuple("StepKernels",
                                     ["recurrent", "projection", "recurrent_in_out"],
                                     defaults=[False])
