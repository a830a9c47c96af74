"""`keras-elmo perplexity MODEL_DIR --heldout FILE`: held-out perplexity, full softmax.

Prints the forward, backward and average perplexity (exp of the mean NLL per target; the
`</S>` / `<S>` targets of every sentence are included, see `keras_elmo.evaluation.perplexity`).

Held-out lines are tokenised as MODEL_DIR was trained (its options.json `tokenizer`; raw
Chinese under jieba) unless `--tokenizer` says otherwise.

Example:
    keras-elmo perplexity runs/small --heldout data/people_daily/heldout.txt
"""

import json
import os

from keras_elmo.cli.path_checks import check_text_inputs
from keras_elmo.cli.keras_start import require_tensorflow_backend
from keras_elmo.cli.tensorflow_start import import_tensorflow
from keras_elmo.cli.tokenizer_option import add_tokenizer_argument, resolve_tokenizer

#: The state file `tf.train.CheckpointManager` writes beside its checkpoints (names the newest).
CHECKPOINT_STATE = "checkpoint"


def add_parser(subparsers):
    """Registers `perplexity` (no TensorFlow import here)."""
    parser = subparsers.add_parser(
        "perplexity", help="forward / backward / average held-out perplexity of a trained biLM",
        description="Evaluates the newest checkpoint of MODEL_DIR on held-out sentences with "
                    "the full softmax.")
    parser.add_argument("model_dir", metavar="MODEL_DIR", help="directory of `keras-elmo train`")
    parser.add_argument("--heldout", required=True, nargs="+", metavar="GLOB",
                        help="held-out files, one sentence per line (quote globs)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    add_tokenizer_argument(parser, from_model=True)
    parser.set_defaults(run=run)


def run(args):
    """Evaluates and prints the report; returns the exit code."""
    require_tensorflow_backend("perplexity", "tf.data")
    from keras_elmo.formats.model_files import OPTIONS_FILE, VOCAB_FILE
    from keras_elmo.training.corpus import expand_corpus

    files = expand_corpus(args.heldout)
    # TensorFlow reads them in-graph: the one UTF-8 policy, and some text, checked first
    check_text_inputs(files, "held-out file",
                      no_text=f"the held-out files {files} contain no token; expected one "
                              "sentence per line.")
    from keras_elmo.formats.efml_model import CONFIG_FILE

    if not os.path.isfile(os.path.join(args.model_dir, OPTIONS_FILE)) and os.path.isfile(
            os.path.join(args.model_dir, CONFIG_FILE)):
        raise ValueError(f"{args.model_dir} is an ELMoForManyLangs model, which has no softmax "
                         "(its releases carry none), so no perplexity; expected a `keras-elmo "
                         "train` run: fine-tune it with `keras-elmo train RUN --init-from "
                         f"{args.model_dir} --train ... --vocab ...` and evaluate RUN.")
    if not os.path.isfile(os.path.join(args.model_dir, OPTIONS_FILE)):
        raise FileNotFoundError(f"model directory {args.model_dir}: {OPTIONS_FILE} not found; "
                                "expected the directory of a `keras-elmo train` run.")
    # what `ModelDir.load_model` reads besides (keras_elmo.training.model_dir), before TF
    vocab = os.path.join(args.model_dir, VOCAB_FILE)
    if not os.path.isfile(vocab):
        raise FileNotFoundError(f"{vocab} not found: expected the vocabulary copied by "
                                "`keras-elmo train`.")
    checkpoints = os.path.join(args.model_dir, "checkpoints")
    if not os.path.isfile(os.path.join(checkpoints, CHECKPOINT_STATE)):
        raise FileNotFoundError(f"no checkpoint in {checkpoints}: train the model first "
                                "(`keras-elmo train`).")
    tokenizer = resolve_tokenizer(args, args.model_dir)
    import_tensorflow()
    from keras_elmo.evaluation.perplexity import evaluate_model_dir, format_report
    result = evaluate_model_dir(args.model_dir, files, tokenizer)
    if args.json:
        print(json.dumps(result, sort_keys=True))
    else:
        print(format_report(result, " ".join(args.heldout)))
    return 0
