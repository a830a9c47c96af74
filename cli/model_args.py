"""The biLM a subcommand reads: `MODEL_DIR`, or `--options FILE --weights FILE` with any names.

`add_model_arguments(parser)` adds the optional positional MODEL_DIR and the two flags (with
AllenNLP's spellings `--options-file` / `--weight-file` as aliases); `model_files(args)`
checks the combination and the files (no TensorFlow import) and returns them.

Example:
    keras-elmo embed runs/pd sentences.txt elmo.hdf5
    keras-elmo embed sentences.txt elmo.hdf5 --options elmo_options.json --weights elmo_weights.hdf5
"""

from keras_elmo.formats.model_files import resolve_model_files


def add_model_arguments(parser):
    """Adds MODEL_DIR (optional positional, first) and --options/--weights to `parser`."""
    parser.add_argument("model_dir", nargs="?", metavar="MODEL_DIR",
                        help="directory with options.json and weights.hdf5, or an "
                             "ELMoForManyLangs model directory as downloaded; leave out when "
                             "giving --options and --weights")
    parser.add_argument("--options", "--options-file", dest="options", metavar="FILE",
                        help="the biLM's options JSON (any name; with --weights)")
    parser.add_argument("--weights", "--weight-file", dest="weights", metavar="FILE",
                        help="the biLM's weights HDF5 (any name; with --options)")


def model_files(args):
    """The `keras_elmo.formats.model_files.ModelFiles` of the arguments.

    Raises:
        ValueError / FileNotFoundError: one line naming what was wrong (see
            `keras_elmo.formats.model_files.resolve_model_files`).
    """
    return resolve_model_files(args.model_dir, args.options, args.weights)
