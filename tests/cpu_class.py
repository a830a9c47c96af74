"""What this process's CPU class can run, for tests that need more than float32.

`needs_bfloat16_products` skips a test where `cpu_setup.check_bfloat16_runs` refuses
bfloat16 (the product refuses it there in one line, which test_cpu_setup checks): on a CPU
with native bfloat16 whose oneDNN is capped below it (`ONEDNN_MAX_CPU_ISA=AVX2`, the setting
that shows an AVX2 machine's behaviour on an AVX512 one) TensorFlow aborts the process on the
first bfloat16 product, and a real AVX2 CPU, which has no such kernels to lose, runs the test.
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
