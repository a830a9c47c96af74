"""Where a biLM training step spends its time: each part timed alone, forward + backward.

Parts, each one `tf.function` over the same fixed batch as `train_throughput.py`:

- `char_cnn`:  token encoder forward + gradient of its weights;
- `lstm`:      both LSTM stacks forward + gradient of their weights and of their inputs;
- `softmax`:   forward and backward NLL (sampled or full, as the preset decides) + gradient;
- `update`:    clipping by global norm + the optimizer's update, on gradients of a real step;
- `step`:      the `Trainer`'s whole step (what `train_throughput.py` times).

The parts are interleaved and repeated; medians are printed in ms per step and as a share
of the whole step (the shares need not add up to 100%: the step also reduces, masks, and
runs parts side by side on two cores).

    python benchmarks/train_step_profile.py --size small --vocab-size 55313 --negatives 1024
"""

import argparse
import statistics
import sys
import tempfile
import time

from _common import print_load  # (starts as the keras-elmo command does, before TensorFlow)
from train_throughput import TrainVariant

from keras_elmo.cli.tensorflow_start import import_tensorflow

tf = import_tensorflow()

from keras_elmo.text.characters import token_mask  # noqa: E402
from keras_elmo.training.optimizers import SparseAdagrad, scale_gradient  # noqa: E402


def part_functions(variant):
    """`{name: no-argument callable}` running one part once (forward + backward)."""
    model, trainer = variant.trainer.model, variant.trainer
    batch = variant.batch
    char_ids, token_ids = batch["char_ids"], batch["token_ids"]
    mask = token_mask(char_ids)
    embeddings = model.backbone.token_embedder(char_ids)
    p = model.options.projection_dim
    hidden = tf.random.normal((int(tf.reduce_sum(tf.cast(mask[:, 1:], tf.int32))), p))
    targets = tf.boolean_mask(token_ids[:, 1:], mask[:, 1:])
    sampled = model.use_sampled_softmax
    nll = model.softmax.sampled_nll if sampled else model.softmax.full_nll

    @tf.function
    def char_cnn():
        with tf.GradientTape() as tape:
            out = model.backbone.token_embedder(char_ids)
            loss = tf.reduce_sum(out * out)
        return tape.gradient(loss, model.backbone.token_embedder.trainable_variables)

    encoder = model.backbone.contextual_encoder

    @tf.function
    def lstm():
        with tf.GradientTape() as tape:
            tape.watch(embeddings)
            out = encoder(embeddings, mask=mask, training=True)  # the hand-written gradient
            loss = tf.reduce_sum(out * out)
        return tape.gradient(loss, [embeddings] + encoder.trainable_variables)

    @tf.function
    def softmax():
        with tf.GradientTape() as tape:
            tape.watch(hidden)
            loss = tf.reduce_sum(nll(hidden, targets)) + tf.reduce_sum(nll(-hidden, targets))
        return tape.gradient(loss, [hidden] + model.softmax.trainable_variables)

    variables = model.trainable_variables
    grads = variant.gradients()  # IndexedSlices for the softmax rows, as the step has them
    if not isinstance(trainer.optimizer, SparseAdagrad):
        grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g
                 for g in grads]

    @tf.function
    def update():
        clipped, _ = tf.clip_by_global_norm(grads, trainer.config.all_clip_norm_val)
        trainer.optimizer.apply([scale_gradient(g, 0.0) for g in clipped], variables)
        return clipped[0]  # the weights stay unchanged: every gradient is scaled to 0

    def step():
        variant.step(1)

    return {"char_cnn": char_cnn, "lstm": lstm, "softmax": softmax, "update": update,
            "step": step}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="small", choices=["tiny", "small", "published"])
    parser.add_argument("--vocab-size", type=int, default=55313)
    parser.add_argument("--negatives", type=int, default=None,
                        help="sampled-softmax negatives (default: the preset's)")
    parser.add_argument("--optimizer", default="adagrad", choices=["adagrad", "preset"],
                        help="adagrad (bilm-tf's, default) or the preset's own")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    print_load("before")
    with tempfile.TemporaryDirectory() as directory:
        variant = TrainVariant(args.size, args.vocab_size, args.batch, args.length, directory,
                               negatives=args.negatives, optimizer=args.optimizer)
        parts = part_functions(variant)
        for fn in parts.values():  # trace + warm up
            fn()
            fn()
        times = {name: [] for name in parts}
        for _ in range(args.repeats):
            for name, fn in parts.items():
                start = time.perf_counter()
                result = fn()
                if result is not None:
                    tf.nest.map_structure(lambda t: t.numpy() if hasattr(t, "numpy") else t,
                                          result)
                times[name].append(time.perf_counter() - start)
    print_load("after")
    whole = statistics.median(times["step"])
    print(f"{args.size}, batch {args.batch} x {args.length}, vocabulary {args.vocab_size:,}, "
          f"softmax {variant.softmax_name}; median of {args.repeats}:")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"  {name:9s} {1000 * median:8.1f} ms  ({median / whole:4.0%} of the step; "
              f"range {1000 * min(values):.1f}..{1000 * max(values):.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
