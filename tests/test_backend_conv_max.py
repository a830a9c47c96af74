"""`backend.conv_max`, the char CNN's convolution and max over positions, against plain
numpy loops: the portable `keras.ops` form (run here, on TensorFlow) and PyTorch's unfold +
matrix product (`keras_elmo.backend.torch.conv_max`, plain torch, also run here), with
filters split into calls of fewer filters than the kernel has (a partial last call among
them), and PyTorch's gradients against autodiff of torch's own convolution."""

import numpy as np
import pytest

from keras_elmo.backend import portable

ROWS, LENGTH, DIM = 3, 7, 5
#: (width, filters): one filter, the whole row (width = LENGTH), and 10 filters in calls of 4.
KERNELS = ((1, 1), (3, 10), (LENGTH, 6))
PER_CALL = 4


def conv_max_reference(chars, kernel):
    """`(rows, n)`: `max_p sum_{k,e} chars[r, p + k, e] * kernel[k, e, f]`, in float64."""
    chars, kernel = np.asarray(chars, np.float64), np.asarray(kernel, np.float64)
    width = kernel.shape[0]
    out = np.full((chars.shape[0], kernel.shape[-1]), -np.inf)
    for r in range(chars.shape[0]):
        for p in range(chars.shape[1] - width + 1):
            for f in range(kernel.shape[-1]):
                out[r, f] = max(out[r, f], float(np.sum(chars[r, p:p + width] * kernel[..., f])))
    return out


def _arrays(width, filters, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((ROWS, LENGTH, DIM)).astype(np.float32),
            rng.standard_normal((width, DIM, filters)).astype(np.float32))


@pytest.mark.parametrize("width, filters", KERNELS)
def test_the_portable_conv_max_is_the_max_of_the_convolution(width, filters):
    chars, kernel = _arrays(width, filters, seed=width)
    got = np.asarray(portable.conv_max(chars, kernel, PER_CALL))
    np.testing.assert_allclose(got, conv_max_reference(chars, kernel), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("width, filters", KERNELS)
def test_the_torch_conv_max_is_the_max_of_the_convolution_and_has_its_gradients(width,
                                                                                 filters):
    torch = pytest.importorskip("torch")
    from keras_elmo.backend import torch as torch_backend

    chars, kernel = _arrays(width, filters, seed=width)
    x = torch.tensor(chars, requires_grad=True)
    w = torch.tensor(kernel, requires_grad=True)
    got = torch_backend.conv_max(x, w, PER_CALL)
    np.testing.assert_allclose(got.detach().numpy(), conv_max_reference(chars, kernel),
                               rtol=1e-5, atol=1e-5)
    probe = torch.tensor(np.random.default_rng(1).standard_normal(got.shape), dtype=torch.float32)
    grads = torch.autograd.grad((got * probe).sum(), (x, w))
    # Autodiff of torch's own convolution (channels first), max over positions.
    x2 = torch.tensor(chars, requires_grad=True)
    w2 = torch.tensor(kernel, requires_grad=True)
    conv = torch.nn.functional.conv1d(x2.transpose(1, 2), w2.permute(2, 1, 0))
    want = torch.autograd.grad((conv.amax(dim=2) * probe).sum(), (x2, w2))
    for mine, theirs, name in zip(grads, want, ("chars", "kernel")):
        np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-5,
                                   err_msg=name)
