"""Building a biLM whose weights a file fills next: zeros instead of random draws.

A biLM loaded from a weight file does not need its random initial values, and on CPU they
cost more than time: TensorFlow's allocator keeps every block it frees for the life of the
process, so the published model's 357 MiB of draws (and the initializers' temporaries)
stayed resident after the file's values replaced them (measured: +471 MiB to build the
model, +358 MiB more to load it).

Inside `zeros_until_filled()`, the layers create the weights a published-layout file
holds (char embeddings, convolutions, highway, projection, LSTM kernels and biases) as
zeros: one fill each, no temporaries. `weight_file.load_bilm_weights` then adds the file's
values into those same buffers (`0 + x = x`), so the process holds one copy of the model.
Weights the file does not hold (the scalar mixes, an LSTM's carried state) keep their own
initializers.

Example:
>>> with zeros_until_filled():
...     bilm = keras_elmo.BiLM(options)  # every file-held weight is 0 here
>>> load_bilm_weights(bilm, "weights.hdf5")  # doctest: +SKIP
"""

import contextlib
import contextvars

_ZEROS = contextvars.ContextVar("keras_elmo_zeros_until_filled", default=False)


@contextlib.contextmanager
def zeros_until_filled():
    """Within this block, keras-elmo layers create their file-held weights as zeros."""
    token = _ZEROS.set(True)
    try:
        yield
    finally:
        _ZEROS.reset(token)


def file_weight_initializer(initializer):
    """`initializer`, or `"zeros"` inside `zeros_until_filled()`.

    Layers pass the initializer of every weight a published-layout file holds through this.
    """
    return "zeros" if _ZEROS.get() else initializer
