"""`keras-elmo export`: write a SavedModel (TF Serving / plain TensorFlow) from a biLM.

Example:
    keras-elmo export runs/small serving/elmo --version 1
    keras-elmo export --options options.json --weights weights.hdf5 serving/elmo --version 1
"""

import os
import time

from keras_elmo.cli.keras_start import require_tensorflow_backend
from keras_elmo.cli.tensorflow_start import import_tensorflow
from keras_elmo.cli.model_args import add_model_arguments, model_files
from keras_elmo.cli.path_checks import MIX_WEIGHTS, check_json_input, check_writable


def add_parser(subparsers):
    """Registers `export` (no heavy imports here)."""
    parser = subparsers.add_parser(
        "export", help="export a biLM as a SavedModel with TF Hub-style ELMo signatures",
        description="Writes a SavedModel with the signatures 'tokens', 'default' "
                    "(= serving_default, untokenised text) and 'char_ids'. It loads with "
                    "TensorFlow alone (no keras-elmo, Keras or tensorflow-text needed). "
                    "See docs/serving.md.")
    add_model_arguments(parser)
    parser.add_argument("out_dir", metavar="OUT_DIR",
                        help="SavedModel directory to create (TF Serving's model base path "
                             "with --version)")
    parser.add_argument("--mix-weights", metavar="FILE",
                        help="scalar_mix.json with trained mix weights for the 'elmo' output "
                             "(default: MODEL_DIR/scalar_mix.json if present, else the even "
                             "mix softmax(0), gamma 1)")
    parser.add_argument("--version", type=int, metavar="N",
                        help="write OUT_DIR/N, the version folder TF Serving expects")
    parser.add_argument("--max-length", type=int, default=None, metavar="N",
                        help="tokens per window (default 512): a longer sentence is embedded "
                             "in windows of N tokens, one vector per token still")
    parser.add_argument("--trainable-bilm", action="store_true",
                        help="list the biLM's weights among the export's trainable_variables "
                             "too (default: only the mix's s and gamma, as TF Hub's ELMo; "
                             "hub.KerasLayer(..., trainable=True) then fine-tunes the biLM)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace an existing non-empty export directory")
    parser.set_defaults(run=run)


def run(args):
    """Exports and prints where, which signatures, size and time; returns the exit code."""
    require_tensorflow_backend("export", "a TensorFlow SavedModel")  # before any download
    if args.version is not None and args.version < 0:
        raise ValueError(f"--version must be >= 0; received {args.version}.")
    if args.max_length is not None and args.max_length < 1:
        raise ValueError(f"--max-length must be >= 1; received {args.max_length}.")
    out_dir = check_target(args.out_dir, args.version, args.overwrite)
    if args.mix_weights:
        check_json_input(args.mix_weights, *MIX_WEIGHTS)
    try:  # one clear line for a bad model, before loading TF
        files = model_files(args)
    except FileNotFoundError as error:
        hint = " Or give --options and --weights instead of MODEL_DIR." if args.model_dir else ""
        raise FileNotFoundError(f"{error}{hint}") from None
    mix_file = args.mix_weights or files.mix_file
    module_mix = (f"the TF Hub module's own ({files.module_dir})"
                  if files.module_dir is not None else None)
    import_tensorflow()
    from keras_elmo.export.elmo_module import DEFAULT_MAX_LENGTH, SIGNATURES
    from keras_elmo.export.saved_model import export_model_files

    start = time.perf_counter()
    path = export_model_files(files, out_dir,
                              mix_weights_file=mix_file,
                              max_length=args.max_length or DEFAULT_MAX_LENGTH,
                              trainable_bilm=args.trainable_bilm, overwrite=args.overwrite)
    seconds = time.perf_counter() - start
    size = sum(os.path.getsize(os.path.join(root, name))
               for root, _, names in os.walk(path) for name in names)
    print(f"wrote SavedModel {path} ({size / 2**20:.1f} MB, {seconds:.1f} s); signatures: "
          f"{', '.join(SIGNATURES)}; mix: {mix_file or module_mix or 'even (softmax(0), gamma 1)'}; "
          f"trainable: {'mix and biLM' if args.trainable_bilm else 'mix only'}")
    from keras_elmo.text.tokenizers import model_tokenizer

    tokenizer = model_tokenizer(files.options_file) if files.options_file else "whitespace"
    if tokenizer != "whitespace":  # the `default` signature splits on whitespace only
        print(f"note: the model was trained with --tokenizer {tokenizer}; the `default` "
              "signature splits on whitespace only: segment text the same way before it "
              "(docs/serving.md, \"Chinese and other text without spaces between words\")")
    return 0


def check_target(out_dir, version, overwrite):
    """The SavedModel directory to write, `OUT_DIR[/VERSION]` (TF Serving's layout), checked
    before TensorFlow starts: not a file, not an export already unless `overwrite`, its
    folders writable (`keras_elmo.cli.path_checks.check_writable`). The export checks the
    same again when it writes (`keras_elmo.export.saved_model`)."""
    path = os.fspath(out_dir) if version is None else os.path.join(out_dir, str(version))
    if os.path.isfile(path):
        raise ValueError(f"export path {path} is a file; expected a directory to create.")
    if os.path.isdir(path) and os.listdir(path) and not overwrite:
        raise ValueError(f"export path {path} already exists and is not empty; choose a new "
                         "path (or --version) or pass --overwrite.")
    check_writable(path, "the SavedModel")
    return path
