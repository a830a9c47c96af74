"""Rate of embedding a file (`keras-elmo embed`'s path) against the model's own rate.

One process, one biLM (loaded with `BiLM.from_weights` from a file written by our own
writer, like `inference.py --weights file`, in `--dtype`: float32 or the explicit
reduced-precision bfloat16, for both paths timed), one text file of `--sentences` lines of
realistic, varying lengths (lengths drawn from a log-normal with median `--median-length`
tokens, 1..`--max-length`; words drawn Zipf-like from a vocabulary of random words of
realistic character lengths, so that a batch repeats words as text does). In interleaved
rounds (`--repeats`), with a 2048^3 matmul sample after each timed pass:

    model alone      `bilm(char_ids)` in a `tf.function` (one trace for every shape) on
                     pre-built char-id batches of `--batch-size` sentences sorted by length,
                     each padded to its longest (the model's own batched call); outputs
                     fetched to numpy. Nothing else is timed.
    model, file order  (with `--file-order`) the same on batches of `--batch-size` in the
                     file's order: what sorting by length saves.
    embed file       `keras_elmo.embedding.embed_file.embed_file` on the text file, all
                     layers, `--batch-size`, a new `TokenEmbeddingCache` each time (no
                     vocabulary, as one `keras-elmo embed` run without one): reading,
                     tokenising, the char CNN once per distinct token, packing sentences
                     into rows (`keras_elmo.embedding.row_packing`), the biLSTM, HDF5
                     writing and `sentence_to_index` included (what
                     `keras-elmo embed` runs after loading the model).

The biLM is frozen (`trainable = False`) after loading, as the embedders freeze theirs.

Rates are the caller's tokens per second (the sentences' tokens; <S> and </S> not
counted); the ratio is embed file / model alone, per round and of the medians (above 100%
where packing saves more padding than the file's own work costs). The issue's target: >= 90%
at batch 32.

Example:
    python benchmarks/embed_rate.py                               # published size, batch 32
    python benchmarks/embed_rate.py --config small --sentences 1000 --repeats 5 --file-order
    python benchmarks/embed_rate.py --dtype bfloat16              # as embed --dtype bfloat16
"""

import os
import sys
import tempfile

from _common import (
    MatmulProbe, doc_parser, format_samples, median_spread, print_load, report,
    report_matmul_rates, time_call)
from inference import published_files, random_sentences

from keras_elmo import constants
from keras_elmo.cli.tensorflow_start import import_tensorflow

_CONFIGS = ("published", "small", "tiny")


def parse_args(argv):
    parser = doc_parser(__doc__)
    parser.add_argument("--config", default="published", choices=_CONFIGS,
                        help="BiLMOptions preset (default: published)")
    parser.add_argument("--batch-size", type=int, default=32, help="sentences per call (32)")
    parser.add_argument("--sentences", type=int, default=160, help="lines of the file (160)")
    parser.add_argument("--median-length", type=int, default=20,
                        help="median tokens per sentence (20)")
    parser.add_argument("--max-length", type=int, default=80, help="longest sentence (80)")
    parser.add_argument("--vocab-size", type=int, default=5000, help="distinct words (5000)")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds (5)")
    parser.add_argument("--file-order", action="store_true",
                        help="also time the model on batches in the file's order (slow)")
    parser.add_argument("--dtype", default="float32", choices=constants.DTYPES,
                        help="the biLM's dtype policy, for both the model-alone and the "
                             "embed-file rate: float32 (default) or the explicit reduced-"
                             "precision bfloat16 (weights and compute; outputs float32)")
    parser.add_argument("--weights-dir", default=None,
                        help="model kept between runs (default: $TMPDIR/keras-elmo-bench-CONFIG)")
    args = parser.parse_args(argv)
    for name in ("batch_size", "sentences", "median_length", "max_length", "vocab_size",
                 "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1; received "
                         f"{getattr(args, name)}")
    return args


def corpus(num_sentences, median_length, max_length, vocab_size, rng):
    """`num_sentences` token lists: log-normal lengths, Zipf-like words (p ~ 1 / rank)."""
    import numpy as np

    words = [w[0] for w in random_sentences(vocab_size, 1, rng)]
    p = 1.0 / np.arange(1, vocab_size + 1)
    lengths = np.clip(np.round(median_length * rng.lognormal(0.0, 0.5, num_sentences)),
                      1, max_length).astype(int)
    return [[words[i] for i in rng.choice(vocab_size, size=n, p=p / p.sum())] for n in lengths]


def model_batches(runner, sentences, sort):
    """Char-id tensors of batches of `runner.batch_size` sentences, sorted by length
    (`sort`) or in the file's order."""
    import keras_elmo

    tf = import_tensorflow()
    ordered = sorted(sentences, key=len) if sort else sentences
    batches = [ordered[b:b + runner.batch_size]
               for b in range(0, len(ordered), runner.batch_size)]
    chars = runner.bilm.options.max_characters_per_token
    return [tf.constant(keras_elmo.batch_to_ids(batch, chars)) for batch in batches]


def main(argv=None):
    args = parse_args(argv)
    print_load("before")
    files = published_files(args.config, args.weights_dir)
    import numpy as np

    tf = import_tensorflow()

    import keras_elmo
    from keras_elmo.embedding.bilm_runner import BiLMRunner
    from keras_elmo.embedding.embed_file import embed_file

    bilm = keras_elmo.BiLM.from_weights(*files, dtype=args.dtype)
    bilm.trainable = False  # as the embedders freeze theirs
    rng = np.random.default_rng(0)
    sentences = corpus(args.sentences, args.median_length, args.max_length, args.vocab_size,
                       rng)
    num_tokens = sum(map(len, sentences))
    scratch = tempfile.TemporaryDirectory(prefix="keras-elmo-embed-rate-")
    text_file = os.path.join(scratch.name, "sentences.txt")
    with open(text_file, "w", encoding="utf-8") as handle:
        handle.writelines(" ".join(s) + "\n" for s in sentences)
    output = os.path.join(scratch.name, "elmo.hdf5")

    runner = BiLMRunner(bilm, batch_size=args.batch_size)
    sorted_batches = model_batches(runner, sentences, sort=True)
    file_batches = model_batches(runner, sentences, sort=False) if args.file_order else None
    chars = bilm.options.max_characters_per_token
    infer = tf.function(lambda ids: bilm(ids, training=False)["layers"], autograph=False,
                        input_signature=[tf.TensorSpec([None, None, chars], tf.int32)])

    def model_alone(batches):
        for ids in batches:
            infer(ids).numpy()

    def embed():
        embed_file(bilm, text_file, output, batch_size=args.batch_size, output="all",
                   progress=False)

    variants = {"model alone": (model_alone, sorted_batches), "embed file": (embed,)}
    if args.file_order:
        variants["model, file order"] = (model_alone, file_batches)
    for fn, *x in variants.values():  # warm-up: every shape traced once
        fn(*x)
    probe = MatmulProbe()
    seconds = {name: [] for name in variants}
    for _ in range(args.repeats):
        for name, (fn, *x) in variants.items():
            seconds[name].append(time_call(fn, *x))
            probe.sample()

    rates = {name: [num_tokens / s for s in samples] for name, samples in seconds.items()}
    report("config", f"{args.config}, batch {args.batch_size}, {args.dtype}")
    report("file", f"{args.sentences} sentences, {num_tokens} tokens (lengths "
           f"{min(map(len, sentences))}..{max(map(len, sentences))}, median "
           f"{int(np.median([len(s) for s in sentences]))})")
    report_matmul_rates(probe)
    for name, samples in rates.items():
        report(f"{name} tokens/s", format_samples(samples, "tokens/s"))
    ratios = [100 * e / m for e, m in zip(rates["embed file"], rates["model alone"])]
    median_ratio = 100 * median_spread(rates["embed file"])[0] / median_spread(
        rates["model alone"])[0]
    report("embed file / model alone", f"{median_ratio:.0f}% of the medians; per round "
           + format_samples(ratios, "%", 0))
    if args.file_order:
        sorting = [100 * s / f for s, f in zip(rates["model alone"],
                                               rates["model, file order"])]
        report("model, sorted / file order", format_samples(sorting, "%", 0))
    scratch.cleanup()
    print_load("after")
    return 0


if __name__ == "__main__":
    sys.exit(main())
