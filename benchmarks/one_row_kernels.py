"""A one-row biLSTM call reading `W_h` as stored against a transpose made in the call.

The figure behind `keras_elmo.process.cpu_setup.one_row_transposes_pay`: the published
biLM's layers from the token vectors of one sentence (`BiLM.layers_from_token_embeddings`
traced for a batch of one row, the `one_row_loop`), run two ways in one process, the calls
interleaved: every step's `W_h` product as `x^T W^T` from the stored `(out, in)` kernel,
and as `x^T W` from an `(in, out)` transpose of it made at the start of the call. Prints
each way's milliseconds per call (median, range), their ratio pair by pair, the largest
difference of their outputs, the same run's 2048^3 float32 matmul rate and the CPU line.

Example:
    python benchmarks/one_row_kernels.py                       # published size, 20 tokens
    TF_ENABLE_ONEDNN_OPTS=0 python benchmarks/one_row_kernels.py --calls 15
"""

import statistics
import sys

from _common import MatmulProbe, doc_parser, format_samples, print_load, report, time_call

from keras_elmo.cli.tensorflow_start import import_tensorflow


def parse_args(argv):
    parser = doc_parser(__doc__)
    parser.add_argument("--length", type=int, default=20, help="tokens of the sentence (20)")
    parser.add_argument("--calls", type=int, default=25,
                        help="timed calls of each way, interleaved (25)")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    print_load("before")
    tf = import_tensorflow()
    import keras_elmo
    from keras_elmo.layers import lstm_projection_cell

    options = keras_elmo.BiLMOptions()  # published size, random weights
    bilm = keras_elmo.BiLM(options)
    bilm.trainable = False
    dim = options.projection_dim
    signature = [tf.TensorSpec([1, None, dim], tf.float32), tf.TensorSpec([1, None], tf.bool)]
    vectors = tf.random.normal((1, args.length, dim))
    mask = tf.ones((1, args.length), tf.bool)
    ways = {}
    for name, transposed in (("as stored", False), ("transposed in the call", True)):
        # The choice is read when the function is traced: each way gets its own trace.
        lstm_projection_cell.one_row_transposes_pay = lambda transposed=transposed: transposed
        ways[name] = tf.function(
            lambda v, m: bilm.layers_from_token_embeddings(v, m)["layers"],
            input_signature=signature, autograph=False)
        ways[name](vectors, mask)
    outputs = [way(vectors, mask).numpy() for way in ways.values()]
    report("max |difference| of the two ways", f"{abs(outputs[0] - outputs[1]).max():.2e}")
    probe = MatmulProbe()
    times = {name: [] for name in ways}
    names = list(ways)
    for call in range(args.calls):
        for name in names if call % 2 else names[::-1]:
            times[name].append(1e3 * time_call(lambda: ways[name](vectors, mask).numpy()))
        probe.sample()
    for name in names:
        report(f"one-row biLSTM, W_h {name}", format_samples(times[name], "ms"))
    ratios = [a / b for a, b in zip(*(times[name] for name in names))]
    report("as stored / transposed, pair by pair", f"median {statistics.median(ratios):.3f} "
           f"(range {min(ratios):.3f}..{max(ratios):.3f})")
    report("matmul 2048^3 float32", format_samples(probe.samples, "GFLOP/s"))
    print_load("after")


if __name__ == "__main__":
    sys.exit(main())
