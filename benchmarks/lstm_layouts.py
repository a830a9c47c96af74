"""Speed of three step-loop layouts of one LSTM-with-projection layer (one direction).

Documents the layout `keras_elmo` chose. All three run the same `LSTMProjectionCell`
weights over the same inputs in a `tf.while_loop` inside a `tf.function`, feature-major as
the cell is (states `(features, batch)`, kernels stored `(out, in)`):

    hoisted       keras_elmo's layout: `W_x x + b` for ALL steps in one matmul
                  (`cell.input_gates`), only `W_h h` inside the loop (`cell.step`)
    naive         concat [x_t; h] and one `[W_x, W_h] [x_t; h] + b` matmul per step
    hoisted+xla   hoisted, compiled with `jit_compile=True`

Each round times every layout once, each call followed by a 2048^3 float32 matmul; prints
tokens/s (median, range, spread), the achieved GFLOP/s and its fraction of the median
matmul rate, call by call of the matmul timed right after it, and best-of (fastest call /
fastest matmul sample).
Per step the analytic work is 2 * (in + P) * 4 * D + 2 * D * P FLOPs (in = P = input size;
D = units). The outputs of the layouts are compared once (max |difference|).

Example:
    python benchmarks/lstm_layouts.py                 # published size, batch 32 x 20
    python benchmarks/lstm_layouts.py --batch-size 1 --repeats 9
"""

import sys

from _common import (
    MatmulProbe, doc_parser, format_samples, median_spread, print_load, report,
    report_matmul_rates, time_call)

from keras_elmo.cli.tensorflow_start import import_tensorflow


def parse_args(argv):
    parser = doc_parser(__doc__)
    parser.add_argument("--units", type=int, default=4096, help="LSTM units D (4096)")
    parser.add_argument("--projection-dim", type=int, default=512,
                        help="projection size P, also the input size (512)")
    parser.add_argument("--batch-size", type=int, default=32, help="sentences per call (32)")
    parser.add_argument("--length", type=int, default=20, help="time steps (20)")
    parser.add_argument("--repeats", type=int, default=5,
                        help="timed calls per layout, interleaved (5)")
    args = parser.parse_args(argv)
    for name in ("units", "projection_dim", "batch_size", "length", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1; "
                         f"received {getattr(args, name)}")
    return args


def make_layouts(cell):
    """`{name: tf.function}` each mapping `(batch, T, P)` inputs to `(T, batch, P)` outputs."""
    tf = import_tensorflow()

    from keras_elmo import constants

    def run(inputs, step):
        """The step loop; `step(t, (h, c))` returns the new `(h, c)`, `(P, batch)` and
        `(D, batch)`."""
        batch, steps = inputs.shape[0], tf.shape(inputs)[1]
        outputs = tf.TensorArray(inputs.dtype, size=steps)

        def body(t, state, outputs):
            h, c = step(t, state)
            return t + 1, (h, c), outputs.write(t, h)

        _, _, outputs = tf.while_loop(lambda t, *_: t < steps, body,
                                      (tf.constant(0), cell.zero_state(batch), outputs))
        return tf.transpose(outputs.stack(), (0, 2, 1))  # (T, P, batch) -> (T, batch, P)

    def hoisted(inputs):
        # As keras_elmo's ResidualBiLSTM: gates of all steps first, then only W_h h per step.
        features = tf.transpose(inputs, (2, 1, 0))  # (P, T, batch)
        gates = tf.transpose(cell.input_gates(features), (1, 0, 2))  # (T, 4D, batch)
        gates = tf.TensorArray(gates.dtype, size=tf.shape(gates)[0]).unstack(gates)
        return run(inputs, lambda t, state: cell.step(gates.read(t), state))

    def naive(inputs):
        time_major = tf.transpose(inputs, (1, 2, 0))  # (T, P, batch)
        kernel = tf.concat([cell.input_kernel, cell.recurrent_kernel], axis=1)  # (4D, in + P)

        def step(t, state):
            h, c = state
            z = tf.matmul(kernel, tf.concat([time_major[t], h], axis=0)) + cell.bias[:, None]
            return _finish_step(cell, *tf.split(z, constants.NUM_GATES, axis=0), c)

        return run(inputs, step)

    return {"hoisted": tf.function(hoisted), "naive": tf.function(naive),
            "hoisted+xla": tf.function(hoisted, jit_compile=True)}


def _finish_step(cell, z_i, z_f, z_c, z_o, c):
    """The rest of `LSTMProjectionCell.step` after the gate pre-activations `(D, batch)`
    (forget bias not added yet): the new `(h, c)`."""
    tf = import_tensorflow()

    from keras_elmo import constants

    c = tf.sigmoid(z_f + constants.FORGET_BIAS) * c + tf.sigmoid(z_i) * tf.tanh(z_c)
    if cell.cell_clip is not None:
        c = tf.clip_by_value(c, -cell.cell_clip, cell.cell_clip)
    h = tf.matmul(cell.projection_kernel, tf.sigmoid(z_o) * tf.tanh(c))  # (P, batch)
    if cell.proj_clip is not None:
        h = tf.clip_by_value(h, -cell.proj_clip, cell.proj_clip)
    return h, c


def main(argv=None):
    args = parse_args(argv)
    print_load("before")

    import numpy as np

    tf = import_tensorflow()
    from keras_elmo import LSTMProjectionCell

    units, proj = args.units, args.projection_dim
    cell = LSTMProjectionCell(units, proj, cell_clip=3.0, proj_clip=3.0)
    cell.build((None, proj))
    cell.bias.assign(tf.random.normal(cell.bias.shape, stddev=0.1))
    inputs = tf.random.normal((args.batch_size, args.length, proj), seed=0)
    layouts = make_layouts(cell)

    results = {name: fn(inputs) for name, fn in layouts.items()}  # warm-up (and trace)
    reference = results["hoisted"].numpy()
    differences = {name: float(np.max(np.abs(out.numpy() - reference)))
                   for name, out in results.items() if name != "hoisted"}
    probe = MatmulProbe()
    seconds = {name: [] for name in layouts}
    paired = {name: [] for name in layouts}  # the matmul sample taken right after each call
    for _ in range(args.repeats):
        for name, fn in layouts.items():
            seconds[name].append(time_call(fn, inputs))
            paired[name].append(probe.sample())

    step_flops = 2 * (proj + proj) * 4 * units + 2 * units * proj
    tokens = args.batch_size * args.length
    matmul_rate = median_spread(probe.samples)[0]
    report("lstm", f"{units} units, {proj} projection, one layer, one direction; "
           f"batch {args.batch_size} x {args.length} steps")
    report("analytic MFLOP per token", f"{step_flops / 1e6:.4g}")
    report_matmul_rates(probe)
    for name in layouts:
        rates = [tokens / s for s in seconds[name]]
        gflops = median_spread(rates)[0] * step_flops / 1e9
        fractions = [100 * r * step_flops / 1e9 / m for r, m in zip(rates, paired[name])]
        report(f"{name} tokens/s", format_samples(rates, "tokens/s"))
        report(f"{name} achieved", f"{gflops:.1f} GFLOP/s = {gflops / matmul_rate:.0%} "
               "of the median matmul rate")
        report(f"{name} fraction of the matmul timed next",
               format_samples(fractions, "%", 0))
        best = max(rates) * step_flops / 1e9 / max(probe.samples)
        report(f"{name} best-of fraction", f"{best:.0%} (fastest call / fastest matmul sample)")
    for name, difference in differences.items():
        report(f"{name} max |difference| from hoisted", f"{difference:.2e}")
    print_load("after")
    return 0


if __name__ == "__main__":
    sys.exit(main())
