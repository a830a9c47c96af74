"""The biLM a subcommand reads: `MODEL_DIR` (a directory, a catalog name or a model archive's
URL), or `--options FILE|URL --weights FILE|URL` with any names.

`add_model_arguments(parser)` adds the optional positional MODEL_DIR and the two flags (with
AllenNLP's spellings `--options-file` / `--weight-file` as aliases); `model_files(args)`
fetches a name or URL into the download cache (`keras_elmo.pretrained`, no TensorFlow
import), checks the combination and the files, and returns them.

Example:
    keras-elmo embed runs/pd sentences.txt elmo.hdf5
    keras-elmo embed elmo-small sentences.txt elmo.hdf5
    keras-elmo embed sentences.txt elmo.hdf5 --options elmo_options.json --weights elmo_weights.hdf5
"""

from keras_elmo.formats.model_files import resolve_model_files


def add_model_arguments(parser):
    """Adds MODEL_DIR (optional positional, first) and --options/--weights to `parser`."""
    parser.add_argument("model_dir", nargs="?", metavar="MODEL_DIR",
                        help="directory with options.json and weights.hdf5, or an "
                             "ELMoForManyLangs model directory as downloaded; or a model "
                             "name (`keras-elmo models` lists them) or a model archive's URL, "
                             "downloaded into the cache once; leave out when giving --options "
                             "and --weights")
    parser.add_argument("--options", "--options-file", dest="options", metavar="FILE",
                        help="the biLM's options JSON (any name, or a URL; with --weights)")
    parser.add_argument("--weights", "--weight-file", dest="weights", metavar="FILE",
                        help="the biLM's weights HDF5 (any name, or a URL; with --options)")


def model_files(args):
    """The `keras_elmo.formats.model_files.ModelFiles` of the arguments.

    A catalog name or a URL is fetched into the download cache first (once; progress on
    stderr unless `args.quiet` or `args.no_progress`), and `args.model_dir`, `args.options`
    and `args.weights` are set to the local paths; `args.model_source` keeps what was given,
    `(model_dir, options, weights)`, for a name or URL (None for local files): a Beam worker
    on another machine fetches it into its own cache.

    Raises:
        ValueError / FileNotFoundError: one line naming what was wrong (see
            `keras_elmo.formats.model_files.resolve_model_files`; an unknown name lists the
            nearest ones).
        OSError: a download that failed (one line; exit 75 when a rerun may succeed).
    """
    from keras_elmo.pretrained.resolve import resolve_model

    quiet = getattr(args, "quiet", False) or getattr(args, "no_progress", False)
    given = (args.model_dir, args.options, args.weights)
    local = resolve_model(*given, progress=not quiet)
    args.model_source = given if local.remote else None
    args.model_dir, args.options, args.weights = (local.model_dir, local.options_file,
                                                  local.weight_file)
    return resolve_model_files(args.model_dir, args.options, args.weights)
