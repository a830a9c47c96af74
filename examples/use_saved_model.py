"""Use an exported ELMo SavedModel with TensorFlow alone (nothing of keras_elmo runs it).

Embeds sentences through the `default` signature (raw text, split on whitespace in the graph)
and shows what "contextual" means: the same word in two sentences has the SAME layer-0
vector (the character CNN sees only the word) but DIFFERENT biLSTM vectors.

Where keras-elmo is installed, TensorFlow starts as the `keras-elmo` command starts it
(`keras_elmo.cli.tensorflow_start`: its native start-up lines held back, nothing on stderr);
without it, TensorFlow alone imports and runs the script the same (with those lines). The
argument is checked before TensorFlow starts.

Usage:
    python examples/use_saved_model.py SAVED_MODEL_DIR [--word W] [SENTENCE ...]

Example:
    python examples/use_saved_model.py runs/people_daily_small/saved_model/1 \\
        --word 花 "她 买 了 一 束 花 。" "他 花 了 很多 钱 。"
"""

import argparse
import os
import sys

import numpy as np

DEFAULT_WORD = "花"
DEFAULT_SENTENCES = ["她 买 了 一 束 花 。", "他 花 了 很多 钱 。", "公园 里 的 花 都 开 了 。"]


def _cosine(a, b):
    return float(np.dot(a, b) / max(np.linalg.norm(a) * np.linalg.norm(b), 1e-12))


def _import_tensorflow():
    """TensorFlow, started as `keras-elmo` starts it when keras-elmo is installed (no native
    start-up lines), else imported alone (TF_CPP_MIN_LOG_LEVEL=3 unless set)."""
    try:
        from keras_elmo.cli.tensorflow_start import import_tensorflow
    except ImportError:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        import tensorflow

        return tensorflow
    return import_tensorflow()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("saved_model", help="SavedModel directory (a version folder)")
    parser.add_argument("sentences", nargs="*", default=DEFAULT_SENTENCES,
                        help="whitespace-tokenised sentences (default: three with 花)")
    parser.add_argument("--word", default=DEFAULT_WORD, help="word to compare across sentences")
    args = parser.parse_intermixed_args(argv)  # --word before or after the sentences
    if not os.path.isfile(os.path.join(args.saved_model, "saved_model.pb")):
        print(f"use_saved_model: error: no saved_model.pb in {args.saved_model} (expected a "
              "SavedModel directory: a version folder of `keras-elmo export`)", file=sys.stderr)
        return 2

    tf = _import_tensorflow()
    model = tf.saved_model.load(args.saved_model)
    embed = model.signatures["default"]
    out = embed(text=tf.constant(args.sentences))
    tokens = [[t.decode("utf-8") for t in row] for row in out["tokens"].numpy()]
    print(f"signatures: {sorted(model.signatures)}")
    print(f"elmo: {tuple(out['elmo'].shape)}  default (sentence vectors): "
          f"{tuple(out['default'].shape)}  mask: {out['sequence_mask'].numpy().sum(1).tolist()}")

    layer_names = ["word_emb"] + sorted(k for k in out if k.startswith("lstm_outputs")) + ["elmo"]
    occurrences = [(i, row.index(args.word)) for i, row in enumerate(tokens) if args.word in row]
    if len(occurrences) < 2:
        print(f"the word {args.word!r} occurs in fewer than two sentences; nothing to compare")
        return 0
    print(f"\ncosine similarity of {args.word!r} across sentences, per layer "
          "(word_emb is context-free, so it is 1.000):")
    first, position = occurrences[0]
    for other, other_position in occurrences[1:]:
        sims = []
        for name in layer_names:
            a, b = out[name][first, position].numpy(), out[name][other, other_position].numpy()
            sims.append(f"{name}={_cosine(a, b):.3f}")
        print(f"  [{args.sentences[first]}] vs [{args.sentences[other]}]: " + "  ".join(sims))
    return 0


if __name__ == "__main__":
    sys.exit(main())
