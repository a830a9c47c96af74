"""`keras-elmo train MODEL_DIR`: train a biLM, resumably, on one or many devices.

The config comes from a preset (`--size`), then an options.json-shaped JSON (`--config`,
may be partial), then flags; it is saved as MODEL_DIR/options.json. `--init-from
SOURCE_DIR` starts a new MODEL_DIR from an existing biLM's weights and architecture
(fine-tuning on a new domain; `keras_elmo.training.warm_start`); SOURCE_DIR may be a catalog
name (`keras-elmo models`) or a model archive's URL, fetched into the cache once. On an existing MODEL_DIR the run
resumes from the last checkpoint with the saved config; flags may only change `--epochs`,
`--checkpoint-every` and `--keep-checkpoints` (anything else that differs is refused).
See `keras_elmo.training.model_dir` for the directory layout.

Example:
    keras-elmo train runs/small --train 'data/people_daily/train*.txt' \\
        --vocab data/vocab.txt --size small --max-minutes 15 --heldout data/people_daily/heldout.txt
    keras-elmo train runs/reviews --init-from runs/small --train reviews.txt \\
        --vocab reviews_vocab.txt --max-minutes 10
"""

import argparse
import contextlib
import os
import sys

from keras_elmo.cli.keras_start import require_tensorflow_backend
from keras_elmo.cli.tensorflow_start import import_tensorflow
from keras_elmo.process.cpu_setup import describe_cpu
from keras_elmo.cli.path_checks import check_text_inputs, check_writable
from keras_elmo.cli.train_config import CONFIG_FLAGS, read_config_file, resolve_config
from keras_elmo.training.config import PRECISIONS
from keras_elmo.text.tokenizers import TOKENIZERS, resolve_tokenizer

#: Exit codes of a run stopped by a signal (128 + signal number, as a shell reports it).
_SIGNAL_EXIT = {"SIGINT": 130, "SIGTERM": 143}

def add_parser(subparsers):
    """Registers `train` (no TensorFlow import here)."""
    parser = subparsers.add_parser(
        "train", help="train a biLM (resumes an existing MODEL_DIR)",
        description="Trains the joint forward/backward biLM on one-sentence-per-line text "
                    "with tf.distribute (MirroredStrategy over local devices; "
                    "MultiWorkerMirroredStrategy when TF_CONFIG names several workers).")
    parser.add_argument("model_dir", metavar="MODEL_DIR",
                        help="output directory; an existing one is resumed")
    parser.add_argument("--train", nargs="+", metavar="GLOB",
                        help="training files or glob patterns (quote the glob); "
                             "required for a new MODEL_DIR")
    parser.add_argument("--vocab", metavar="FILE",
                        help="vocabulary file (<S>, </S>, <UNK> first); required for a new MODEL_DIR")
    parser.add_argument("--size", choices=("tiny", "small", "published"),
                        help="architecture + training preset (default small for a new MODEL_DIR)")
    parser.add_argument("--init-from", metavar="SOURCE_DIR",
                        help="start a new MODEL_DIR from this model's weights (options.json + "
                             "weights.hdf5, e.g. a published model or another run, or a model "
                             "name of `keras-elmo models`, downloaded once; its "
                             "architecture is taken over; the softmax rows of shared words are "
                             "copied from a keras-elmo run): domain adaptation")
    parser.add_argument("--config", metavar="JSON",
                        help="options.json-shaped file (may be partial) over the preset")
    for key, (flag, kind, help_text) in CONFIG_FLAGS.items():
        if kind is bool:  # --flag / --no-flag; unset: the preset's or the saved value
            parser.add_argument(flag, dest=key, action=argparse.BooleanOptionalAction,
                                default=None, help=help_text)
            continue
        choices = {"tokenizer": TOKENIZERS, "optimizer": ("adagrad", "adam"),
                   "precision": PRECISIONS}.get(key)
        parser.add_argument(flag, dest=key, type=kind, choices=choices,
                            metavar=None if choices else kind.__name__.upper(), help=help_text)
    parser.add_argument("--max-steps", type=int, metavar="N",
                        help="stop at this global step (counted over resumed runs too)")
    parser.add_argument("--max-minutes", type=float, metavar="M",
                        help="stop after M minutes of training in this run")
    parser.add_argument("--log-every", type=int, default=50, metavar="N",
                        help="steps between progress lines / TensorBoard points (50)")
    parser.add_argument("--heldout", nargs="+", metavar="GLOB",
                        help="report held-out perplexity (full softmax) at the end, and "
                             "every --eval-every steps during training")
    parser.add_argument("--eval-every", type=int, default=1000, metavar="N",
                        help="steps between held-out evaluations during training (1000; "
                             "0: only at the end); each is a log line and TensorBoard "
                             "scalars heldout_*perplexity")
    parser.add_argument("--eval-sentences", type=int, default=2000, metavar="K",
                        help="held-out sentences scored during training: the first K (2000; "
                             "0: all); the evaluation at the end always scores all")
    parser.set_defaults(run=run)


def run(args):
    """Builds the config, trains, optionally evaluates; returns the exit code."""
    require_tensorflow_backend("train", "tf.data, tf.distribute")  # before anything is written
    for name in ("max_steps", "log_every"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1; received {value}.")
    for name in ("eval_every", "eval_sentences"):
        if getattr(args, name) < 0:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 0; received "
                             f"{getattr(args, name)}.")
    if args.max_minutes is not None and not args.max_minutes > 0:
        raise ValueError(f"--max-minutes must be > 0; received {args.max_minutes}.")
    check_input_files(args)
    print(f"keras-elmo train {args.model_dir}: loading TensorFlow and reading the corpus ...",
          flush=True)
    import_tensorflow()

    from keras_elmo.training import distribute

    strategy = distribute.make_strategy()  # before any other TF op (multi-worker needs it)
    with _storage_faults(args.model_dir):
        if not distribute.is_chief(strategy):  # the chief holds the directory's lock
            return _train(args, strategy)
        from keras_elmo.training.run_lock import RunLock

        created = not os.path.exists(args.model_dir)
        lock = RunLock(args.model_dir).acquire()  # one run per MODEL_DIR; before any write
        try:
            return _train(args, strategy)
        except BaseException:
            if created:  # a refused new run leaves nothing behind
                lock.release()
                _remove_if_only_lock(args.model_dir)
            raise
        finally:
            lock.release()


def _storage_faults(model_dir):
    """A storage fault of the run (lock, options, checkpoint, logs, weights.hdf5) as one
    line that also names the last complete checkpoint and says the same command goes on
    from it (`StorageError`; the command line exits 75)."""
    from keras_elmo.process.storage_errors import storage_guard
    from keras_elmo.training.checkpoint_saving import kept_checkpoint
    from keras_elmo.training.model_dir import ModelDir

    checkpoints = ModelDir(model_dir).checkpoint_dir
    return storage_guard(model_dir, "the model directory",
                         intact=lambda: kept_checkpoint(checkpoints),
                         then="run the same command to go on")


def _train(args, strategy):
    """Resolves the config, trains, optionally evaluates (under the run lock)."""
    from keras_elmo.training import distribute
    from keras_elmo.training.corpus import expand_corpus, stored_corpus_files
    from keras_elmo.training.model_dir import ModelDir
    from keras_elmo.training.trainer import Trainer

    model_dir = ModelDir(args.model_dir)
    config, vocab = resolve_config(args, model_dir)
    files = stored_corpus_files(config.train_prefix, model_dir.path)
    if not args.train:  # a resume's saved corpus (--train was checked before TF loaded)
        from keras_elmo.text.text_files import check_utf8

        check_utf8(files)
    if distribute.is_chief(strategy):
        model_dir.prepare(config, args.vocab or model_dir.vocab_path)
    print(f"training {model_dir.path}: {len(files)} file(s), {config.n_train_tokens:,} tokens, "
          f"vocabulary {len(vocab):,} ({'sampled' if config.use_sampled_softmax else 'full'} "
          f"softmax), {strategy.num_replicas_in_sync} replica(s); {describe_cpu()}", flush=True)
    trainer = Trainer(config, vocab, model_dir, strategy=strategy, log_every=args.log_every)
    with contextlib.ExitStack() as stack:
        evaluate = None
        if args.heldout and args.eval_every:
            evaluate = _periodic_evaluation(stack, trainer, expand_corpus(args.heldout), vocab,
                                            config, args.eval_sentences)
        result = trainer.fit(files, max_steps=args.max_steps, max_minutes=args.max_minutes,
                             evaluate=evaluate, eval_every=args.eval_every)
    if not distribute.is_chief(strategy):
        return 0
    resumed = f", resumed from {os.path.basename(result['resumed_from'])}" \
        if result["resumed_from"] else ""
    warm = result["warm_started"]
    if warm:
        resumed += (f", started from {warm['source']} (softmax rows of "
                    f"{warm['softmax_rows_copied']:,} of {warm['vocab_size']:,} words copied)")
    print(f"stopped ({result['stopped']}) at step {result['step']} after {result['epoch']} "
          f"full epoch(s){resumed}, {result['seconds']:.0f} s; wrote {model_dir.options_path}, "
          f"{model_dir.weights_path}, {model_dir.checkpoint_dir}/", flush=True)
    if result["stopped"] in _SIGNAL_EXIT:
        print(f"keras-elmo train: interrupted by {result['stopped']} at step {result['step']}; "
              f"checkpoint and {os.path.basename(model_dir.weights_path)} written; resume with "
              f"`keras-elmo train {model_dir.path}`.", file=sys.stderr, flush=True)
        return _SIGNAL_EXIT[result["stopped"]]
    if args.heldout:
        from keras_elmo.evaluation.perplexity import evaluate, format_report

        heldout = expand_corpus(args.heldout)
        print(format_report(evaluate(trainer.model, heldout, vocab, config),
                            " ".join(args.heldout)), flush=True)
    return 0


def _periodic_evaluation(stack, trainer, heldout, vocab, config, max_sentences):
    """A callable scoring the model on the first `max_sentences` held-out sentences (all
    with 0); the subset is written once to a temporary file that `stack` removes."""
    import tempfile

    from keras_elmo.evaluation.perplexity import evaluate
    from keras_elmo.process.storage_errors import storage_guard
    from keras_elmo.text.text_files import read_text_lines

    files = heldout
    if max_sentences:
        with storage_guard(tempfile.gettempdir(), "the held-out subset (a scratch file)"):
            directory = stack.enter_context(tempfile.TemporaryDirectory(prefix="keras-elmo-eval-"))
            subset = os.path.join(directory, "heldout_subset.txt")
            kept = 0
            with open(subset, "w", encoding="utf-8") as out:
                for path in heldout:
                    for _, line in read_text_lines(path):
                        if kept < max_sentences and line.split():
                            out.write(line + "\n")
                            kept += 1
        files = [subset]
    return lambda: evaluate(trainer.model, files, vocab, config)


def _remove_if_only_lock(model_dir):
    """Removes a directory this run created when it holds nothing but the lock file."""
    from keras_elmo.training.run_lock import LOCK_FILE

    try:
        if os.listdir(model_dir) == [LOCK_FILE]:
            os.remove(os.path.join(model_dir, LOCK_FILE))
            os.rmdir(model_dir)
    except OSError:
        pass


def check_input_files(args):
    """Every file the run will read exists and holds what it must, and MODEL_DIR can be
    written (before TensorFlow loads and before any step; `keras_elmo.cli.path_checks`).

    Raises:
        FileNotFoundError: naming the flag and the path.
        ValueError: MODEL_DIR is a file; a corpus, held-out or vocabulary file that is not
            UTF-8 or holds no token; a vocabulary or --config that cannot be read as one.
        StorageError: MODEL_DIR is on a read-only filesystem or in a folder this user may
            not write (exit 75).
    """
    from keras_elmo.formats.model_files import OPTIONS_FILE, resolve_model_files
    from keras_elmo.training.corpus import expand_corpus

    if os.path.isfile(args.model_dir):
        raise ValueError(f"MODEL_DIR {args.model_dir} is a file; expected a directory (new or "
                         "of an earlier run).")
    check_writable(args.model_dir, "the model directory")
    # jieba missing: one line now, not after TensorFlow loaded (a resume uses the saved one);
    # before the files are read, since a raw corpus is read through it.
    resolve_tokenizer(args.tokenizer, args.model_dir)
    # TensorFlow reads them in-graph: every line UTF-8, and some text, checked first (an
    # empty held-out file would otherwise end the run after its training)
    if args.train:
        files = expand_corpus(args.train)
        check_text_inputs(files, "training file",
                          no_text=f"the training corpus {' '.join(files)} holds no token "
                                  "(expected one sentence per line, tokens separated by "
                                  "spaces).")
    if args.heldout:
        files = expand_corpus(args.heldout)
        check_text_inputs(files, "held-out file",
                          no_text=f"the held-out files {files} contain no token; expected one "
                                  "sentence per line.")
    for flag, path in (("--vocab", args.vocab), ("--config", args.config)):
        if path is not None and not os.path.isfile(path):
            raise FileNotFoundError(f"{flag} {path}: no such file.")
    if args.vocab:  # its special tokens, blank lines, duplicates: named by line
        from keras_elmo.training.vocabulary import Vocabulary

        Vocabulary.load(args.vocab)
    if args.config:
        read_config_file(args.config)
    new_run = not os.path.isfile(os.path.join(args.model_dir, OPTIONS_FILE))
    if args.init_from:  # a name or URL: fetched into the cache (once), then a directory
        from keras_elmo.pretrained.resolve import resolve_model

        args.init_from = resolve_model(args.init_from).model_dir
    if args.init_from and new_run:  # a resume refuses a different one with its own message
        try:
            resolve_model_files(args.init_from)
        except FileNotFoundError as error:
            raise FileNotFoundError(f"--init-from {error}") from None
