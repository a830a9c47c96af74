"""The LSTM step's products in each weight layout: backward with a transposed operand vs a
contiguous copy, forward with the kernel stored `(in, out)` vs `(out, in)`.

The gradient of `y = x W` with respect to `x` is `dy W^T`. Written as
`tf.matmul(dy, W, transpose_b=True)` it runs slower on CPU than `tf.matmul(dy, W_t)` with
`W_t = tf.transpose(W)` made once, at the row counts of one LSTM time step (batch 32 or 1);
at hundreds of rows the gap is small (figures in docs/performance.md). This script times,
for the per-step backward products of the small (512/128) and published (4096/512) LSTM:

- `transpose_b`: `tf.matmul(a, b, transpose_b=True)`;
- `contiguous`:  `tf.matmul(a, b_t)` with the copy made beforehand (what the backward
  loop of `keras_elmo.backend.tensorflow.sequence_gradient` uses);
- `copy`:        one `tf.transpose(b)` (paid once per loop, not per step).

Each timing is a `tf.function` running the product `--inner` times; the variants are
interleaved and repeated (median and range). The training loop's backward pass
(`keras_elmo.backend.tensorflow.sequence_gradient`) makes the copies once per call.

The forward products of a step (`h W_h`, `m W_p`, float32) are timed in two layouts:

- `in_out`:  `tf.matmul(h, W)`, the kernel stored `(in, out)` (the layout of the weight
  files and of this project's releases before the feature-major LSTM);
- `out_in`:  `tf.transpose(tf.matmul(W_t, h, transpose_b=True))`, the kernel stored
  `(out, in)`: the product computed as `W^T h^T`, one row of `W^T` per output. The cell of
  `keras_elmo.layers.lstm_projection_cell` keeps this layout and runs feature-major (state
  `(features, batch)`, so no transpose per step); at one row it computes `x^T W^T`, which
  reads the same bytes in the order the `in_out` timing favours.

Which is faster depends on the rows and the CPU class (AVX2 behaviour with
`ONEDNN_MAX_CPU_ISA=AVX2`); the line `out_in / in_out` below prints the ratio of the times.
Its figures decided the cell's layout (docs/performance.md): `(out, in)` for the wide
products training and batched inference make, `x^T W^T` for a one-row batch.

Example:
    python benchmarks/matmul_layouts.py
    python benchmarks/matmul_layouts.py --sizes published --batch 1 --repeats 7
    ONEDNN_MAX_CPU_ISA=AVX2 python benchmarks/matmul_layouts.py --sizes published
"""

import statistics
import sys
import time

from _common import doc_parser, print_load

from keras_elmo.cli.tensorflow_start import import_tensorflow

#: (rows of the product, `(units, projection)`) per preset: the step's shapes.
_SIZES = {"small": (512, 128), "published": (4096, 512)}


def products(units, projection, batch):
    """`{name: (a_shape, b_shape)}` of the step gradient's `a @ b^T` products."""
    return {
        "dz @ W_h^T": ((batch, 4 * units), (projection, 4 * units)),
        "dh @ W_p^T": ((batch, projection), (units, projection)),
    }


def forward_products(units, projection, batch):
    """`{name: (h_shape, kernel_shape)}` of the step's forward `h @ W` products, W `(in, out)`."""
    return {
        "h @ W_h": ((batch, projection), (projection, 4 * units)),
        "m @ W_p": ((batch, units), (units, projection)),
    }


def main(argv=None):
    parser = doc_parser(__doc__)
    parser.add_argument("--sizes", nargs="+", default=["small", "published"],
                        choices=sorted(_SIZES))
    parser.add_argument("--batch", type=int, default=32, help="rows of one step (32)")
    parser.add_argument("--inner", type=int, default=20, help="products per timing (20)")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved repeats (5)")
    args = parser.parse_args(argv)
    print_load("before")
    tf = import_tensorflow()

    def timed(fn, *tensors):
        @tf.function
        def loop(*xs):
            total = tf.zeros(())
            for _ in tf.range(args.inner):
                total += tf.reduce_sum(fn(*xs)[:1, :1])
            return total

        loop(*tensors).numpy()  # trace + warm up
        return lambda: _seconds(loop, tensors) / args.inner

    cases = {}
    for size in args.sizes:
        units, projection = _SIZES[size]
        for name, (a_shape, b_shape) in products(units, projection, args.batch).items():
            a, b = tf.random.normal(a_shape), tf.random.normal(b_shape)
            b_t = tf.transpose(b)
            label = f"{size} {name} ({a_shape[0]}x{a_shape[1]} @ {b_shape[1]}x{b_shape[0]})"
            cases[label] = {
                "transpose_b": timed(lambda x, y: tf.matmul(x, y, transpose_b=True), a, b),
                "contiguous": timed(tf.matmul, a, b_t),
                "copy": timed(tf.transpose, b),
            }
        for name, (h_shape, w_shape) in forward_products(units, projection,
                                                         args.batch).items():
            h, w = tf.random.normal(h_shape), tf.random.normal(w_shape)
            w_t = tf.transpose(w)
            label = (f"{size} forward {name} ({h_shape[0]}x{h_shape[1]} @ "
                     f"{w_shape[0]}x{w_shape[1]})")
            cases[label] = {
                "in_out": timed(tf.matmul, h, w),
                "out_in": timed(lambda x, y: tf.transpose(tf.matmul(y, x, transpose_b=True)),
                                h, w_t),
            }
    samples = {(c, v): [] for c, variants in cases.items() for v in variants}
    for _ in range(args.repeats):
        for case, variants in cases.items():
            for variant, run in variants.items():
                samples[(case, variant)].append(run())
    print_load("after")
    for case in cases:
        med = {v: statistics.median(samples[(case, v)]) for v in cases[case]}
        spread = {v: (min(samples[(case, v)]), max(samples[(case, v)])) for v in cases[case]}
        print(f"{case}:")
        for variant, seconds in med.items():
            low, high = spread[variant]
            print(f"  {variant:12s} {1e6 * seconds:9.1f} us (range {1e6 * low:.1f}.."
                  f"{1e6 * high:.1f})")
        if "transpose_b" in med:
            print(f"  transpose_b / contiguous: {med['transpose_b'] / med['contiguous']:.2f}x")
        else:
            print(f"  out_in / in_out: {med['out_in'] / med['in_out']:.2f}x")
    return 0


def _seconds(fn, tensors):
    start = time.perf_counter()
    fn(*tensors).numpy()
    return time.perf_counter() - start


if __name__ == "__main__":
    sys.exit(main())
