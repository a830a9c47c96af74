"""What this process's CPU class can run, for tests that need more than float32, and the
branches a CPU class chooses, for tests to take all of them on any CPU.

`needs_bfloat16_products` skips a test where `cpu_setup.check_bfloat16_runs` refuses
bfloat16 (the product refuses it there in one line, which test_cpu_setup checks): on a CPU
with native bfloat16 whose oneDNN is capped below it (`ONEDNN_MAX_CPU_ISA=AVX2`, the setting
that shows an AVX2 machine's behaviour on an AVX512 one) TensorFlow aborts the process on the
first bfloat16 product, and a real AVX2 CPU, which has no such kernels to lose, runs the test.

`ONE_ROW_READS` with `force_one_row_read` runs a test with each way a one-row step reads `W_h`,
the one this CPU would take and the other.
"""

import pytest

from keras_elmo.process import cpu_setup


def bfloat16_refusal():
    """The one-line reason this process cannot run bfloat16 products, or None."""
    try:
        cpu_setup.check_bfloat16_runs()
    except ValueError as error:
        return str(error)
    return None


needs_bfloat16_products = pytest.mark.skipif(
    bfloat16_refusal() is not None,
    reason=f"bfloat16 products cannot run in this process: {bfloat16_refusal()}")


#: The two ways a float32 step of one row reads `W_h` (`LSTMProjectionCell.step_kernels`): as
#: stored `(4U, P)`, or from a transpose `(P, 4U)` made in the call. The CPU class picks one
#: (`cpu_setup.one_row_transposes_pay`: transposed with oneDNN on an AVX2-only CPU), so a test
#: of a one-row path takes both, each forced by `force_one_row_read`, whatever this CPU is.
ONE_ROW_READS = pytest.mark.parametrize("transposed", [False, True],
                                        ids=["W_h-as-stored", "W_h-transposed"])


def force_one_row_read(monkeypatch, transposed):
    """Makes every float32 one-row step of this test read `W_h` transposed in the call
    (`transposed=True`) or as stored, in place of this CPU's choice.

    Returns:
        list, filled with one entry each time a cell reads the choice: a test checks that it
        is not empty, so that the branch it forced did run.
    """
    from keras_elmo.layers import lstm_projection_cell

    decisions = []

    def decide():
        decisions.append(transposed)
        return transposed

    monkeypatch.setattr(lstm_projection_cell, "one_row_transposes_pay", decide)
    return decisions
