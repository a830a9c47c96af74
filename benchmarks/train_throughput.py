"""Training throughput of the biLM on this machine, with a same-run matmul rate for scale.

For each preset (`tiny`, `small`, `published` by default; `mid` is the small preset with
bilm-tf's `mid` LSTM, 2048 units and 256 projection, the second size its peer script
trains) one real training step (the
`Trainer`'s: forward + backward LM, shared softmax, gradient all-reduce, global-norm
clipping, Adagrad) is timed on a fixed batch of `--batch` sentences of `--length`
positions (`<S>` and `</S>` included), with a `--vocab-size` softmax (sampled or full as
the preset decides). Tokens/s counts every position of the batch (`batch * length` per
step). The variants and a plain float32 2048^3 matmul are interleaved and repeated; the
median and the spread (min-max) of the repeats are printed.

    python benchmarks/train_throughput.py
    python benchmarks/train_throughput.py --sizes small published --repeats 5
    python benchmarks/train_throughput.py --sizes small mid --vocab-size 55313 --negatives 1024
    python benchmarks/train_throughput.py --sizes small --vocab-size 55313 --negatives 1024 \
        --repeats 5 --peer "bilm-tf=bash bench_bilmtf.sh train small"   # the peer beside, 40 steps a round

A peer's run averages its rate over a minute or more, so beside one a round times 40 of our
steps by default (several seconds) instead of 2: a round's figure is then not one short sample.

The estimated model rate uses `3 x` the forward multiply-adds per token (forward pass plus
the two products of the backward pass), so `model GFLOP/s / matmul GFLOP/s` says how much
of the machine's dense rate the step reaches.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

# _common starts as the keras-elmo command does (CPU settings, log level) before TensorFlow.
from _common import print_load
from _peers import Peers

import numpy as np

from keras_elmo.cli.tensorflow_start import import_tensorflow

tf = import_tensorflow()

from keras_elmo.text.characters import batch_to_ids  # noqa: E402
from keras_elmo.formats.options import BiLMOptions  # noqa: E402
from keras_elmo.process.cpu_setup import native_bfloat16  # noqa: E402
from keras_elmo.training.config import TrainingConfig  # noqa: E402
from keras_elmo.training.distribute import make_strategy  # noqa: E402
from keras_elmo.training.model_dir import ModelDir  # noqa: E402
from keras_elmo.training.trainer import Trainer  # noqa: E402
from keras_elmo.training.vocabulary import SPECIAL_TOKENS, Vocabulary  # noqa: E402

MATMUL_SIZE = 2048
#: Timed steps a round: alone, and beside a peer whose run lasts a minute or more.
STEPS_ALONE, STEPS_BESIDE_A_PEER = 2, 40


def forward_flops_per_token(config):
    """Floating-point operations of the forward pass per position (2 per multiply-add)."""
    o = config.options
    chars = o.max_characters_per_token
    cnn = sum(2 * width * o.char_embedding_dim * count * (chars - width + 1)
              for width, count in o.filters)
    highway = o.num_highway * 2 * (2 * o.num_filters * o.num_filters)
    projection = 2 * o.num_filters * o.projection_dim
    gates = 2 * (2 * o.projection_dim) * 4 * o.lstm_units  # [x, h] W
    lstm = 2 * o.num_layers * (gates + 2 * o.lstm_units * o.projection_dim)
    classes = config.num_sampled + 1 if config.use_sampled_softmax else config.n_tokens_vocab
    softmax = 2 * 2 * o.projection_dim * classes  # two directions
    return cnn + highway + projection + lstm + softmax


def make_batch(vocab_size, batch, length, seed=0):
    """A fixed batch: `batch` rows of `<S> w1 ... w_{length-2} </S>`.

    Word ids are drawn as text has them, Zipf-distributed (`p(rank) ~ 1 / rank`, what the
    log-uniform sampler assumes): such a batch holds more distinct tokens than a window of
    People's Daily text of the same size (docs/performance.md), so this is not kinder than
    real text to the per-distinct-token char CNN.
    """
    rng = np.random.default_rng(seed)
    ranks = np.arange(1, vocab_size - len(SPECIAL_TOKENS) + 1)
    ids = len(SPECIAL_TOKENS) + rng.choice(len(ranks), size=(batch, length),
                                           p=(1.0 / ranks) / np.sum(1.0 / ranks))
    ids[:, 0], ids[:, -1] = 0, 1
    words = [["<S>"] + [f"w{i}" for i in row[1:-1]] + ["</S>"] for row in ids]
    return {"char_ids": tf.constant(batch_to_ids(words)), "token_ids": tf.constant(ids, tf.int32)}


class TrainVariant:
    """A preset's `Trainer` and the closure that runs `steps` training steps."""

    def __init__(self, size, vocab_size, batch, length, directory, negatives=None,
                 optimizer="adagrad"):
        vocab = Vocabulary(list(SPECIAL_TOKENS) + [f"w{i}" for i in range(3, vocab_size)])
        changes = dict(n_tokens_vocab=vocab_size, max_sentence_tokens=max(length - 2, 1),
                       batch_tokens=max(batch * length, length))
        if negatives is not None:
            changes["n_negative_samples_batch"] = negatives
        if optimizer == "adagrad":  # bilm-tf's optimizer and learning rate
            changes.update(optimizer="adagrad", learning_rate=0.2)
        if size == "small":  # bilm-tf's small, LSTM 512 / 128 (the preset trains 384 units)
            changes["options"] = BiLMOptions.small()
        if size == "mid":  # bilm-tf's mid: the small char CNN, LSTM 2048 / 256
            changes["options"] = BiLMOptions.small(lstm_units=2048, projection_dim=256)
        self.config = TrainingConfig.preset("small" if size == "mid" else size).replace(
            **changes)
        self.name = size
        self.tokens_per_step = batch * length
        self.trainer = Trainer(self.config, vocab, ModelDir(directory),
                               strategy=make_strategy())
        self.softmax_name = (f"sampled {self.config.num_sampled}"
                             if self.config.use_sampled_softmax else "full")
        data = make_batch(vocab_size, batch, length)
        self.batch = data
        dataset = tf.data.Dataset.from_tensors(data).repeat()
        self.distributed = self.trainer.strategy.experimental_distribute_dataset(dataset)
        self.iterator = iter(self.distributed)
        self.step(1)  # trace

    def step(self, steps):
        for _ in range(steps):
            _, _, norm = self.trainer.train_step(next(self.iterator),
                                                 self.distributed.element_spec)
        float(norm)  # wait for the last step

    def gradients(self):
        """The gradients of one step's loss on the fixed batch (for profiling the update)."""
        model = self.trainer.model
        with tf.GradientTape() as tape:
            sums = model.nll_sums(self.batch["char_ids"], self.batch["token_ids"], training=True)
            loss = 0.5 * (sums["forward"] + sums["backward"]) / sums["count"]
        return tape.gradient(loss, model.trainable_variables)


def matmul_rate(repeats=3, dtype="float32"):
    """GFLOP/s of 2048^3 matmuls (float32, or `dtype`), two independent ones at a time (the
    whole machine under either thread layout), best of `repeats` runs of a few calls."""
    a = tf.cast(tf.random.normal((MATMUL_SIZE, MATMUL_SIZE)), dtype)
    b = tf.cast(tf.random.normal((MATMUL_SIZE, MATMUL_SIZE)), dtype)
    pair = tf.function(lambda a, b: (tf.matmul(a, b), tf.matmul(b, a)))
    pair(a, b)[0].numpy()
    best = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(4):
            c, d = pair(a, b)
        c.numpy(), d.numpy()
        best = max(best, 4 * 2 * 2 * MATMUL_SIZE ** 3 / (time.perf_counter() - start) / 1e9)
    return best


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", default=["tiny", "small", "published"],
                        choices=["tiny", "small", "mid", "published"])
    parser.add_argument("--vocab-size", type=int, default=50000,
                        help="softmax size (50000: the sampled softmax for small/published)")
    parser.add_argument("--negatives", type=int, default=None,
                        help="sampled-softmax negatives (default: each preset's own)")
    parser.add_argument("--batch", type=int, default=32, help="sentences per step (32)")
    parser.add_argument("--length", type=int, default=20,
                        help="positions per sentence, <S> and </S> included (20)")
    parser.add_argument("--optimizer", default="adagrad", choices=["adagrad", "preset"],
                        help="adagrad (bilm-tf's, default: like for like with its training) "
                             "or each preset's own (small: Adam)")
    parser.add_argument("--steps", type=int, default=None,
                        help="steps per timed repeat (default 2; 40 beside a --peer)")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats (median shown)")
    parser.add_argument("--peer", action="append", default=[], metavar="LABEL=COMMAND",
                        help="a peer's training benchmark, run once per repeat between ours "
                             "and compared with the first of --sizes (repeatable; its output "
                             "names 'N tokens/s'; see _peers.py)")
    args = parser.parse_args(argv)
    if args.steps is None:
        args.steps = STEPS_BESIDE_A_PEER if args.peer else STEPS_ALONE

    print(f"TF {tf.__version__}")
    print_load("before")
    with tempfile.TemporaryDirectory() as directory:
        variants = []
        for size in args.sizes:
            start = time.perf_counter()
            variants.append(TrainVariant(size, args.vocab_size, args.batch, args.length,
                                         os.path.join(directory, size), args.negatives,
                                         args.optimizer))
            print(f"built + traced {size} in {time.perf_counter() - start:.1f} s", flush=True)
        rates = {v.name: [] for v in variants}
        matmul = []
        peers = Peers(args.peer, Peers.training_figures(args.sizes[0]))
        for _ in range(args.repeats):  # interleaved: every variant sees the same load
            matmul.append(matmul_rate())
            for variant in variants:
                start = time.perf_counter()
                variant.step(args.steps)
                rates[variant.name].append(
                    variant.tokens_per_step * args.steps / (time.perf_counter() - start))
            if peers:
                peers.run_round()
    print_load("after")
    med_matmul = statistics.median(matmul)
    print(f"\nmatmul {MATMUL_SIZE}^3 float32: {med_matmul:,.1f} GFLOP/s "
          f"(spread {min(matmul):,.1f}-{max(matmul):,.1f}, {args.repeats} repeats)")
    if native_bfloat16():
        print(f"matmul {MATMUL_SIZE}^3 bfloat16: {matmul_rate(dtype='bfloat16'):,.1f} GFLOP/s "
              "(native, measured after the rounds)")
    else:
        print(f"matmul {MATMUL_SIZE}^3 bfloat16: not measured, not native on this CPU")
    distinct = len(np.unique(make_batch(args.vocab_size, args.batch, args.length)["token_ids"]))
    print(f"training step, batch {args.batch} x {args.length} positions ({distinct} distinct "
          f"tokens), vocabulary {args.vocab_size:,}:")
    for variant in variants:
        values = rates[variant.name]
        median = statistics.median(values)
        softmax = (f"sampled {variant.config.num_sampled}" if variant.config.use_sampled_softmax
                   else "full")
        model_rate = 3 * forward_flops_per_token(variant.config) * median / 1e9
        print(f"  {variant.name:9s} {median:10,.0f} tokens/s (spread {min(values):,.0f}-"
              f"{max(values):,.0f}); softmax {softmax}; {variant.config.optimizer}; "
              f"~{model_rate:,.1f} model GFLOP/s = "
              f"{model_rate / med_matmul:.0%} of the matmul rate")
    if peers:
        peers.report({args.sizes[0]: rates[args.sizes[0]]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
