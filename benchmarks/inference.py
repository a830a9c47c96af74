"""Inference speed of `keras_elmo.BiLM` on CPU, as a fraction of a same-run matmul rate.

Builds `BiLM` with random weights, runs it inside a `tf.function` (warm-up first) on
sentences of `--length` random tokens of realistic character lengths, one call per batch
size in turn (`--calls-per-round` in a row), `--repeats` rounds (a 2048^3 float32 matmul
is timed right after every variant's calls), and prints `name: value` lines: tokens/s
(median, range, spread) per batch size, peak memory, analytic FLOPs per token, achieved
GFLOP/s, and that as a fraction of the median matmul rate, paired call by call, of the
matmul timed right after the calls, and best-of (fastest call / fastest matmul: the least
load-sensitive on a busy machine).
With `--peer LABEL=COMMAND` (repeatable) each round also runs a peer's own inference
benchmark in its own process (`_peers.py`) and prints, round by round, ours against the
fastest peer (ours: the median of the round's calls, as the peer's figure is the median of
its own). Then `--back-to-back` calls of each batch size in a row, nothing between
them, as bilm-tf's own inference script and a server handling one request after another
time it: the probes between interleaved calls evict what the caches held of the weights,
which costs batch 1 most (figures in docs/performance.md).

With batch 1, two variants: `batch 1` is `bilm(char_ids)` as a user calls it, in a
`tf.function`; `batch 1, embedders' path` is the path of `ElmoEmbedder` and `keras-elmo
embed`: the char CNN, then `BiLM.layers_from_token_embeddings` in a `tf.function` whose
batch dimension is statically 1 (the biLM frozen, as the embedders freeze it).
The target is >= 50% of the matmul rate at batch 32. `--breakdown` also times the char CNN
(`bilm.token_embedder`) and the biLSTM (`bilm.contextual_encoder`) on their own.

Weights (`--weights`): `file` (default) loads them as a user does, `BiLM.from_weights` on
an options.json + weights.hdf5 written by our own writer (`save_published`) in a child
process (so the writer's memory is not counted here) and kept in `--weights-dir` for the
next run; `random` builds the model with its random initialisers.

Memory (MiB, Linux `/proc/self/status`, see `_memory.py`): per stage, the peak anonymous
memory (`RssAnon`, what the process allocated: weights, activations, TensorFlow's buffers;
sampled every 5 ms) with the RSS peak beside it (`VmHWM`: anonymous memory plus the pages of
mapped files such as TensorFlow's libraries), and both at the stage's end. The stages: the
imports (`import tensorflow, keras` as the `keras-elmo` command imports them, whose
anonymous memory is the floor no model goes below), loading, the first calls of each
variant, the probes, the timed calls; then the size of the weights, the model's peak
(probes excluded) against floor + weights, and the process's peak, the largest of them.

Batch 1 is bound by streaming the recurrent weights from memory (every step reads each
direction's and layer's `W_h` `(P, 4D)` and `W_P` `(D, P)` once; the input product is one
matmul per call). A sum over exactly those weights, timed between the calls, gives the
streaming rate; `bytes per position / rate` is the batch-1 bound, reported with the
fraction of it reached.

Analytic FLOPs (a multiply-add = 2 FLOPs; element-wise ops, gathers and the max-pool are
not counted), per position the model processes (each sentence's tokens plus <S>, </S>):

    char CNN    sum over filters (w, n): 2 * (C - w + 1) * w * E * n   (C = 50 char slots,
                all convolved whatever the token's length; E = char embedding size)
    highway     num_highway * 2 * (2 * F * F)                          (F = total filters)
    projection  2 * F * P                                              (if F != P)
    biLSTM      num_layers * 2 directions * (2 * (in + P) * 4 * D + 2 * D * P)
                (in = P: every layer's input has the projection size; D = lstm units)

Published size: 17.6 + 33.6 + 2.1 + 150.9 = 204.2 MFLOP per position. Tokens/s counts
the caller's tokens (`--length` per sentence); GFLOP/s counts the work actually done on
`--length + 2` positions per sentence.

Example:
    python benchmarks/inference.py                   # published size, batch 1 and 32
    python benchmarks/inference.py --config small --batch-sizes 1 8 32 --repeats 7
    python benchmarks/inference.py --breakdown       # also time char CNN and biLSTM alone
    python benchmarks/inference.py --batch-sizes 1 --weights random  # batch 1 only, no file
    python benchmarks/inference.py --dtype bfloat16  # the explicit reduced-precision option
    python benchmarks/inference.py --peer "bilm-tf=bash bench_bilmtf.sh infer"  # peer beside
"""

import os
import statistics
import sys

from _common import (
    MatmulProbe, doc_parser, format_samples, median_spread, print_load, report,
    report_matmul_rates, time_call)
from _memory import MemoryStages, StreamingProbe, peak_text, tensorflow_allocator
from _peers import Peers

from keras_elmo import constants  # (no TensorFlow: the memory floor stays)
from keras_elmo.cli.tensorflow_start import import_tensorflow

_CONFIGS = ("published", "small", "tiny")
#: The variant of batch 1 on the embedders' path (`embedders_path`).
_EMBEDDERS_PATH = "batch 1, embedders' path"
#: Character lengths of English tokens (punctuation included), roughly as in running text.
_TOKEN_LENGTHS = list(range(1, 14))
_LENGTH_WEIGHTS = [16, 17, 20, 15, 10, 8, 7, 4, 3, 2, 1, 0.6, 0.4]
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_MIB = float(1 << 20)
#: Below this many bytes of recurrent weights, the caches hold them (32 MiB L3 here).
_CACHE_BYTES = 64 << 20
_PROBES = ("matmul probe", "streaming probe", "timed calls")
#: The stage whose anonymous memory at its end is the floor no model goes below.
_FLOOR = "import tensorflow + keras (the floor)"
#: Run in a child process: writes a random-weight model in the published layout.
_WRITE_MODEL = ("import sys; from keras_elmo.cli.tensorflow_start import import_tensorflow; "
                "import_tensorflow(); import keras_elmo; "
                "from keras_elmo.formats.weight_file import save_published; "
                "save_published(keras_elmo.BiLM(getattr(keras_elmo.BiLMOptions, sys.argv[1])())"
                ", sys.argv[2])")


def flops_per_position(options):
    """Analytic FLOPs of one position, by part (see the module docstring for the formula).

    Returns:
        dict with `"char_cnn"`, `"highway"`, `"projection"`, `"bilstm"`, `"total"`.
    """
    chars, embed, filters = (options.max_characters_per_token, options.char_embedding_dim,
                             options.num_filters)
    proj, units = options.projection_dim, options.lstm_units
    parts = {
        "char_cnn": sum(2 * (chars - w + 1) * w * embed * n for w, n in options.filters),
        "highway": options.num_highway * 2 * (2 * filters * filters),
        "projection": 2 * filters * proj if filters != proj else 0,
        "bilstm": options.num_layers * 2 * (2 * (proj + proj) * 4 * units + 2 * units * proj),
    }
    parts["total"] = sum(parts.values())
    return parts


def random_sentences(batch_size, length, rng):
    """`batch_size` lists of `length` random tokens with realistic character lengths."""
    weights = [w / sum(_LENGTH_WEIGHTS) for w in _LENGTH_WEIGHTS]
    sizes = rng.choice(_TOKEN_LENGTHS, size=(batch_size, length), p=weights)
    return [["".join(rng.choice(list(_LETTERS), size=int(n))) for n in row] for row in sizes]


def parse_args(argv):
    parser = doc_parser(__doc__)
    parser.add_argument("--config", default="published", choices=_CONFIGS,
                        help="BiLMOptions preset (default: published, 2x4096_512_2048cnn)")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 32],
                        help="sentences per call (default: 1 32)")
    parser.add_argument("--length", type=int, default=20, help="tokens per sentence (20)")
    parser.add_argument("--repeats", type=int, default=5,
                        help="rounds, each timing every batch size in turn (5)")
    parser.add_argument("--calls-per-round", type=int, default=1,
                        help="calls of each variant in a row in every round, the round's "
                             "figure their median, as a peer's own script takes the median of "
                             "its calls (1)")
    parser.add_argument("--back-to-back", type=int, default=20,
                        help="calls per batch size in a row after the interleaved rounds "
                             "(20; 0 skips them)")
    parser.add_argument("--breakdown", action="store_true",
                        help="also time the char CNN and the biLSTM alone (at each batch size)")
    parser.add_argument("--dtype", default="float32", choices=constants.DTYPES,
                        help="the biLM's dtype policy: float32 (default) or the explicit "
                             "reduced-precision bfloat16 (weights and compute; outputs float32)")
    parser.add_argument("--weights", default="file", choices=("file", "random"),
                        help="file: load a weights.hdf5 written by save_published, as a user "
                             "does (default); random: random initialisers, no file")
    parser.add_argument("--weights-dir", default=None,
                        help="where --weights file keeps its model (default: "
                             "$TMPDIR/keras-elmo-bench-CONFIG; written once)")
    parser.add_argument("--peer", action="append", default=[], metavar="LABEL=COMMAND",
                        help="a peer's inference benchmark, run once per round between ours "
                             "(repeatable; its output names tokens/s as 'b1x20 95.0 tok/s' or "
                             "'b1=41.6'; see _peers.py)")
    args = parser.parse_args(argv)
    for name in ("length", "repeats", "calls_per_round"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1; received "
                         f"{getattr(args, name)}")
    if args.back_to_back < 0:
        parser.error(f"--back-to-back must be >= 0; received {args.back_to_back}")
    if min(args.batch_sizes) < 1:
        parser.error(f"--batch-sizes must all be >= 1; received {args.batch_sizes}")
    return args


def published_files(config, directory):
    """`(options.json, weights.hdf5)` of a random `config` model written by our own writer
    (in a child process, once; reused when present)."""
    import subprocess
    import tempfile

    directory = directory or os.path.join(tempfile.gettempdir(), f"keras-elmo-bench-{config}")
    options_file, weight_file = (os.path.join(directory, n) for n in ("options.json",
                                                                       "weights.hdf5"))
    if not (os.path.isfile(options_file) and os.path.isfile(weight_file)):
        subprocess.run([sys.executable, "-c", _WRITE_MODEL, config, directory], check=True)
    return options_file, weight_file


def round_medians(samples, calls_per_round):
    """The median of each round's calls: `samples` holds `calls_per_round` consecutive
    values per round (a round's figure, as a peer's own script takes the median of its calls).

    >>> round_medians([3.0, 1.0, 2.0, 10.0, 30.0, 20.0], 3)
    [2.0, 20.0]
    """
    return [statistics.median(samples[i:i + calls_per_round])
            for i in range(0, len(samples), calls_per_round)]


def embedders_path(bilm):
    """`char_ids -> layers` at one row as `ElmoEmbedder` and `keras-elmo embed` run it: the
    char CNN, then `bilm.layers_from_token_embeddings(vectors, mask)["layers"]` in a
    `tf.function` whose batch dimension is statically 1.


    Example:
    >>> layers = embedders_path(bilm)  # doctest: +SKIP
    >>> bilm.trainable = False  # doctest: +SKIP
    >>> layers(keras_elmo.batch_to_ids([["a", "b"]])).shape  # doctest: +SKIP
    TensorShape([1, 3, 2, 16])
    """
    tf = import_tensorflow()
    dim = bilm.options.projection_dim
    encode = tf.function(lambda ids: (tf.cast(bilm.token_embedder(ids), tf.float32),
                                      tf.reduce_any(ids != 0, axis=-1)), autograph=False)
    layers = tf.function(
        lambda vectors, mask: bilm.layers_from_token_embeddings(vectors, mask)["layers"],
        input_signature=[tf.TensorSpec([1, None, dim], tf.float32),
                         tf.TensorSpec([1, None], tf.bool)], autograph=False)
    return lambda ids: layers(*encode(ids))


def main(argv=None):
    args = parse_args(argv)
    print_load("before")
    stages = MemoryStages()
    if args.weights == "file":
        files = published_files(args.config, args.weights_dir)
    stages.mark("python start")

    import numpy as np

    tf = import_tensorflow()
    import keras  # noqa: F401  (counted in the floor, as any Keras user imports it)

    import keras_elmo
    from keras_elmo.layers.sentence_boundaries import with_boundary_tokens

    stages.mark(_FLOOR)
    allocator = tensorflow_allocator()
    print(f"allocator of large tensors: {allocator}" + (
        " (oneDNN's pool keeps freed blocks for reuse: TF_ONEDNN_USE_SYSTEM_ALLOCATOR=1 returns "
        "them)"
        if allocator == "onednn-pool" else ""))
    options = getattr(keras_elmo.BiLMOptions, args.config)()
    if args.weights == "file":
        bilm = keras_elmo.BiLM.from_weights(*files, dtype=args.dtype)
        stages.mark(f"BiLM.from_weights ({files[1]})")
    else:
        bilm = keras_elmo.BiLM(options, dtype=args.dtype)
        stages.mark("BiLM with random weights")
    weight_bytes = sum(int(np.prod(v.shape)) * tf.as_dtype(v.dtype).size for v in bilm.weights)
    num_parameters = sum(int(np.prod(v.shape)) for v in bilm.weights)
    flops = flops_per_position(options)
    positions = args.length + 2  # <S> and </S> are processed too
    rng = np.random.default_rng(0)
    inputs = {b: tf.constant(keras_elmo.batch_to_ids(random_sentences(b, args.length, rng)))
              for b in args.batch_sizes}

    # Variants timed in every round: name -> (callable, argument, batch size, FLOPs/position).
    variants = {}
    infer = tf.function(lambda ids: bilm(ids, training=False))
    for b in args.batch_sizes:
        variants[f"batch {b}"] = (infer, inputs[b], b, flops["total"])
    if 1 in args.batch_sizes:  # the embedders' one-row path (traced frozen, below)
        variants[_EMBEDDERS_PATH] = (embedders_path(bilm), inputs[1], 1, flops["total"])
    whole_model = list(variants)  # the variants compared with the peers, timed back to back
    if args.breakdown:
        encode_tokens = tf.function(lambda ids: bilm.token_embedder(ids))
        encode_context = tf.function(lambda x: bilm.contextual_encoder(x, training=False))
        for b in args.batch_sizes:
            framed = with_boundary_tokens(inputs[b], options.boundary_char_ids)  # (b, T+2, C)
            vectors = tf.random.normal((b, positions, options.projection_dim),
                                       dtype=bilm.contextual_encoder.compute_dtype)  # (b, T+2, P)
            variants[f"batch {b} char CNN"] = (
                encode_tokens, framed, b,
                flops["char_cnn"] + flops["highway"] + flops["projection"])
            variants[f"batch {b} biLSTM"] = (encode_context, vectors, b, flops["bilstm"])

    # Warm-up: trace and run each variant twice; the embedders' path last, the biLM frozen
    # as the embedders freeze it.
    for name in sorted(variants, key=lambda name: name == _EMBEDDERS_PATH):
        if name == _EMBEDDERS_PATH:
            bilm.trainable = False
        fn, x, _, _ = variants[name]
        fn(x)
        fn(x)
        stages.mark(f"{name}: first two calls")
    probe = MatmulProbe(dtype=args.dtype)  # the model's dtype: fractions of its own rate
    stages.mark("matmul probe")
    cells = [c for d in bilm.contextual_encoder.cells.values() for c in d]
    stream = StreamingProbe([w for c in cells for w in (c.recurrent_kernel,
                                                       c.projection_kernel)])
    stages.mark("streaming probe")
    seconds = {name: [] for name in variants}
    paired = {name: [] for name in variants}  # the matmul sample taken right after each call
    peers = Peers(args.peer, Peers.inference_figures(args.batch_sizes))
    for _ in range(args.repeats):
        for name, (fn, x, _, _) in variants.items():
            calls = [time_call(fn, x) for _ in range(args.calls_per_round)]
            seconds[name] += calls
            paired[name] += [probe.sample()] * len(calls)
            stream.sample()
        if peers:
            peers.run_round()
    back_to_back = {name: [time_call(variants[name][0], variants[name][1])
                           for _ in range(args.back_to_back)] for name in whole_model}
    stages.mark("timed calls")

    matmul_rate = median_spread(probe.samples)[0]
    report("config", f"{args.config} ({options.lstm_units} units, {options.projection_dim} "
           f"projection, {options.num_filters} filters, {options.num_layers} layers)")
    report("sentences", f"{args.length} tokens (+ <S>, </S> = {positions} positions)")
    report("analytic MFLOP per position",
           f"{flops['total'] / 1e6:.4g} (char CNN {flops['char_cnn'] / 1e6:.4g}, highway "
           f"{flops['highway'] / 1e6:.4g}, projection {flops['projection'] / 1e6:.4g}, biLSTM "
           f"{flops['bilstm'] / 1e6:.4g})")
    report("analytic MFLOP per caller token",
           f"{flops['total'] * positions / args.length / 1e6:.4g}")
    report_matmul_rates(probe)
    for name, (_, _, b, part_flops) in variants.items():
        tokens = [b * args.length / s for s in seconds[name]]
        gflops = [part_flops * b * positions / s / 1e9 for s in seconds[name]]
        median_gflops = median_spread(gflops)[0]
        fractions = [100 * g / m for g, m in zip(gflops, paired[name])]
        report(f"{name} tokens/s", format_samples(tokens, "tokens/s"))
        report(f"{name} seconds/call", format_samples(seconds[name], "s", digits=3))
        report(f"{name} achieved", f"{median_gflops:.1f} GFLOP/s = "
               f"{median_gflops / matmul_rate:.0%} of the median matmul rate")
        report(f"{name} fraction of the matmul timed next",
               format_samples(fractions, "%", 0))
        report(f"{name} best-of fraction", f"{max(gflops) / max(probe.samples):.0%} "
               "(fastest call / fastest matmul sample)")
    for name, samples in back_to_back.items():
        if samples:
            b = variants[name][2]
            report(f"{name} back-to-back tokens/s ({len(samples)} calls in a row)",
                   format_samples([b * args.length / s for s in samples], "tokens/s"))
    if peers:
        peers.report({name: [variants[name][2] * args.length / s for s in
                             round_medians(seconds[name], args.calls_per_round)]
                      for name in whole_model}, figure_of={_EMBEDDERS_PATH: "batch 1"})
    stream_rate = median_spread(stream.samples)[0]
    report("memory streaming (sum over the recurrent weights)",
           format_samples(stream.samples, "GB/s", 2) + f" over {stream.total_bytes / 1e6:.0f} MB")
    if 1 in args.batch_sizes:
        bound = stream_rate * 1e9 / stream.total_bytes * args.length / positions
        for name in ("batch 1", _EMBEDDERS_PATH):
            reached = median_spread([args.length / s for s in seconds[name]])[0]
            in_a_row = (median_spread([args.length / s for s in back_to_back[name]])[0]
                        if back_to_back[name] else None)
            report(f"{name} bound (recurrent weights per position / streaming rate)",
                   f"{stream.total_bytes / 1e6:.0f} MB per position -> {bound:.1f} tokens/s; "
                   f"reached {reached:.1f} tokens/s = {reached / bound:.0%} of the bound" +
                   (f" (back to back {in_a_row:.1f} = {in_a_row / bound:.0%})"
                    if in_a_row else "") +
                   (" (weights fit in the caches here: no memory bound)"
                    if stream.total_bytes < _CACHE_BYTES else ""))
    report(f"memory weights ({args.dtype})", f"{weight_bytes / _MIB:.0f} MiB "
           f"({weight_bytes / 1e6:.0f} MB, {num_parameters:,} parameters)")
    for name, text in stages.lines():
        report(f"memory {name}", text)
    model = [f for name, f in stages.stages if f and not name.endswith(_PROBES)]
    if model:  # (no figures without /proc/self/status)
        floor = dict(stages.stages)[_FLOOR]["anon"]
        report("peak memory of the model (loading and calls, probes excluded)",
               f"{peak_text(max(f['anon_peak'] for f in model), max(f['rss_peak'] for f in model))}"
               f"; anonymous floor after import {floor:.0f} + weights "
               f"{weight_bytes / _MIB:.0f} = {floor + weight_bytes / _MIB:.0f} MiB")
    report("peak memory", f"{stages.peak_text()} (whole process, with the matmul probe's "
           "2048^2 operands)")
    stages.close()
    print_load("after")
    return 0


if __name__ == "__main__":
    sys.exit(main())
