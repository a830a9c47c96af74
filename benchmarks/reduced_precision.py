"""How far the explicit bfloat16 option (`BiLM(..., dtype="bfloat16")`) is from float32.

Loads one weight file twice, `BiLM.from_weights(..., dtype="float32")` and
`dtype="bfloat16"` (weights rounded to bfloat16, computed in bfloat16, outputs float32),
runs both on the same `--batch-size` sentences of `--length` random tokens of realistic
character lengths, and prints, per output layer, the largest absolute difference, the
largest absolute float32 value, and mean |difference| / mean |float32 value| over the real
tokens. Speed and memory of the option: `inference.py --dtype bfloat16`.

Models (`--models`, any of):
    tiny        the tests' tiny preset, random weights written by our own writer
    published   2x4096_512_2048cnn_2xhighway, random weights written by our own writer
    DIR         a model directory with options.json and weights.hdf5 (a trained biLM,
                e.g. runs/people_daily_small from `bash scripts/main.sh`)

Example:
    python benchmarks/reduced_precision.py                       # tiny and published
    python benchmarks/reduced_precision.py --models runs/people_daily_small
"""

import os
import sys

from _common import doc_parser, report
from inference import published_files, random_sentences

from keras_elmo.cli.tensorflow_start import import_tensorflow

_PRESETS = ("tiny", "published")


def parse_args(argv):
    parser = doc_parser(__doc__)
    parser.add_argument("--models", nargs="+", default=list(_PRESETS),
                        help="tiny, published or model directories (default: tiny published)")
    parser.add_argument("--batch-size", type=int, default=8, help="sentences (8)")
    parser.add_argument("--length", type=int, default=20, help="tokens per sentence (20)")
    parser.add_argument("--weights-dir", default=None,
                        help="where a preset's model is kept (default: "
                             "$TMPDIR/keras-elmo-bench-PRESET; written once)")
    args = parser.parse_args(argv)
    for name in ("batch_size", "length"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1; received "
                         f"{getattr(args, name)}")
    for model in args.models:
        if model not in _PRESETS and not os.path.isdir(model):
            parser.error(f"--models: {model!r} is neither one of {_PRESETS} nor a directory")
    return args


def model_files(model, weights_dir=None):
    """`(options.json, weights.hdf5)` of a preset (written once) or a model directory."""
    if model in _PRESETS:
        return published_files(model, weights_dir)
    from keras_elmo.formats.model_files import find_model_files

    return find_model_files(model)[:2]


def compare(files, char_ids):
    """Per layer `(max |diff|, max |float32|, mean |diff| / mean |float32|)` on real tokens."""
    import numpy as np

    from keras_elmo.models.bilm import BiLM

    layers = {}
    for dtype in ("float32", "bfloat16"):
        out = BiLM.from_weights(*files, dtype=dtype)(char_ids)
        layers[dtype] = np.asarray(out["layers"], np.float32)  # (batch, L + 1, T, 2P)
        mask = np.asarray(out["mask"])  # (batch, T)
    rows = []
    for j in range(layers["float32"].shape[1]):
        exact = layers["float32"][:, j][mask]  # (real tokens, 2P)
        diff = np.abs(layers["bfloat16"][:, j][mask] - exact)
        rows.append((float(diff.max()), float(np.abs(exact).max()),
                     float(diff.mean() / np.abs(exact).mean())))
    return rows


def main(argv=None):
    args = parse_args(argv)
    import numpy as np

    import_tensorflow()
    import keras_elmo

    rng = np.random.default_rng(0)
    char_ids = keras_elmo.batch_to_ids(random_sentences(args.batch_size, args.length, rng))
    report("sentences", f"{args.batch_size} x {args.length} random tokens")
    for model in args.models:
        for j, (worst, largest, relative) in enumerate(compare(model_files(model, args.weights_dir),
                                                           char_ids)):
            report(f"{model} layer {j}",
                   f"max |bfloat16 - float32| {worst:.4g} (largest |float32| {largest:.4g}), "
                   f"mean |diff| / mean |float32| {relative:.2%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
