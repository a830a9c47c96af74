"""Speed-up of `TokenEmbeddingCache` (char-CNN output precomputed for a vocabulary).

For each `--configs` preset (random weights; the biLM frozen, `trainable = False`, as the
embedders freeze theirs), builds a vocabulary of `--vocab-size` random tokens of realistic
character lengths, fills the cache (timed once: the one-time cost), and then, in
interleaved rounds, times on the same batch of `--batch-size` sentences of `--length`
tokens drawn from the vocabulary (`--oov-rate` of them replaced by unseen tokens, which
fall back to the char CNN; the cache is made with `max_entries=0`, so it does not keep
them and every round meets them as new, as the new words of running text):

    biLM, char path     bilm(batch_to_ids(sentences))   (tf.function; Python id conversion
                                                         included, as in real use)
    biLM, cached path   cache(sentences)                (lookup + biLSTM, tf.function)
    layer 0, char path  token_embedder(batch_to_ids(sentences))
    layer 0, cached     cache.embed_tokens(sentences)   (lookup; the char CNN only for OOV)

and prints `name: value` lines: tokens/s (median, range, spread) per variant, the speed-up
(ratio of medians, and the median of the per-round ratios, which is less load-sensitive),
the fill rate and the break-even point (tokens embedded after which the cache has paid for
its fill time). Outputs of the two biLM paths are compared (max |difference|). Last, the
process's peak anonymous memory with its RSS peak beside (`_memory.py`).

Example:
    python benchmarks/token_cache.py                          # small and published configs
    python benchmarks/token_cache.py --configs small --repeats 9 --oov-rate 0.05
"""

import statistics
import sys
import time

from _common import doc_parser, format_samples, print_load, report, time_call
from _memory import MemoryStages
from inference import random_sentences

from keras_elmo.cli.tensorflow_start import import_tensorflow

_CONFIGS = ("published", "small", "tiny")


def parse_args(argv):
    parser = doc_parser(__doc__)
    parser.add_argument("--configs", nargs="+", default=["small", "published"],
                        choices=_CONFIGS, help="BiLMOptions presets (default: small published)")
    parser.add_argument("--vocab-size", type=int, default=10000,
                        help="tokens in the cache (10000)")
    parser.add_argument("--batch-size", type=int, default=32, help="sentences per call (32)")
    parser.add_argument("--length", type=int, default=20, help="tokens per sentence (20)")
    parser.add_argument("--oov-rate", type=float, default=0.02,
                        help="fraction of tokens not in the cache (0.02)")
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds (5)")
    args = parser.parse_args(argv)
    for name in ("vocab_size", "batch_size", "length", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1; received "
                         f"{getattr(args, name)}")
    if not 0.0 <= args.oov_rate <= 1.0:
        parser.error(f"--oov-rate must be in [0, 1]; received {args.oov_rate}")
    return args


def make_batch(vocab, args, rng):
    """`batch_size` sentences of `length` vocabulary tokens, `oov_rate` of them unseen."""
    fresh = random_sentences(args.batch_size, args.length, rng)
    batch = []
    for row in fresh:
        sentence = []
        for token in row:
            if rng.random() < args.oov_rate:
                sentence.append(token + "\u00e9")  # a byte sequence no vocabulary token has
            else:
                sentence.append(vocab[int(rng.integers(len(vocab)))])
        batch.append(sentence)
    return batch


def run_config(name, args):
    import numpy as np

    tf = import_tensorflow()
    import keras_elmo
    from keras_elmo.embedding.token_cache import TokenEmbeddingCache

    options = getattr(keras_elmo.BiLMOptions, name)()
    bilm = keras_elmo.BiLM(options)
    bilm.trainable = False  # as the embedders freeze theirs
    rng = np.random.default_rng(0)
    vocab = sorted({t for s in random_sentences(args.vocab_size, 1, rng) for t in s})
    while len(vocab) < args.vocab_size:  # random tokens can repeat; top up
        vocab = sorted(set(vocab) | {t for s in random_sentences(
            args.vocab_size - len(vocab), 1, rng) for t in s})
    start = time.perf_counter()
    cache = TokenEmbeddingCache(bilm, vocab, max_entries=0)  # unseen tokens stay unseen
    fill_seconds = time.perf_counter() - start
    sentences = make_batch(vocab, args, rng)
    chars = options.max_characters_per_token

    infer = tf.function(lambda ids: bilm(ids, training=False))
    encode = tf.function(lambda ids: bilm.token_embedder(ids))
    variants = {
        "biLM, char path": lambda: infer(keras_elmo.batch_to_ids(sentences, chars)),
        "biLM, cached path": lambda: cache(sentences),
        "layer 0, char path": lambda: encode(keras_elmo.batch_to_ids(sentences, chars)),
        "layer 0, cached path": lambda: cache.embed_tokens(sentences),
    }
    for fn in variants.values():  # warm-up: trace and run
        fn()
        fn()
    difference = float(np.abs(np.asarray(variants["biLM, char path"]()["layers"])
                              - np.asarray(variants["biLM, cached path"]()["layers"])).max())
    cache.hits = cache.misses = 0
    seconds = {key: [] for key in variants}
    for _ in range(args.repeats):
        for key, fn in variants.items():
            seconds[key].append(time_call(fn))

    tokens = args.batch_size * args.length
    report("config", f"{name} ({options.lstm_units} units, {options.projection_dim} "
           f"projection, {options.num_filters} filters, {options.num_highway} highway, "
           f"{options.num_layers} layers)")
    report(f"{name} batch", f"{args.batch_size} x {args.length} tokens, "
           f"{cache.misses / max(cache.hits + cache.misses, 1):.1%} OOV (char CNN fallback)")
    report(f"{name} cache fill", f"{len(cache)} tokens in {fill_seconds:.2f} s = "
           f"{len(cache) / fill_seconds:,.0f} tokens/s (one-time)")
    for key in variants:
        report(f"{name} {key} tokens/s",
               format_samples([tokens / s for s in seconds[key]], "tokens/s"))
    for part in ("biLM", "layer 0"):
        char, cached = seconds[f"{part}, char path"], seconds[f"{part}, cached path"]
        ratio = statistics.median(char) / statistics.median(cached)
        paired = statistics.median(c / k for c, k in zip(char, cached))
        report(f"{name} {part} speed-up", f"{ratio:.2f}x (ratio of medians; median of "
               f"per-round ratios {paired:.2f}x)")
        saved_per_token = (statistics.median(char) - statistics.median(cached)) / tokens
        if saved_per_token > 0:
            report(f"{name} {part} break-even", f"after {fill_seconds / saved_per_token:,.0f} "
                   "embedded tokens the fill time is paid back")
    report(f"{name} max |char path - cached path|", f"{difference:.2e} (biLM layers)")


def main(argv=None):
    args = parse_args(argv)
    print_load("before")
    stages = MemoryStages()
    for name in args.configs:
        run_config(name, args)
        stages.mark(name)
    for name, text in stages.lines():
        report(f"memory {name}", text)
    report("peak memory", stages.peak_text())
    stages.close()
    print_load("after")
    return 0


if __name__ == "__main__":
    sys.exit(main())
