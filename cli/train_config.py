"""The config of a `keras-elmo train` run: preset (`--size`), then an options.json-shaped
JSON (`--config`, may be partial), then flags; on resume, the saved config, which a flag may
not contradict. No TensorFlow is imported at module level.

Example:
    config, vocab = resolve_config(args, ModelDir("runs/pd"))
"""

import os

from keras_elmo.cli.tokenizer_option import TOKENIZER_HELP

#: Flag -> config key of the options that override the preset / JSON.
CONFIG_FLAGS = {
    "batch_tokens": ("--batch-tokens", int, "token budget of a batch per replica (boundaries incl.)"),
    "batch_size": ("--batch-size", int, "at most this many sentences per batch per replica"),
    "max_sentence_tokens": ("--max-sentence-tokens", int,
                            "cut longer sentences into chunks of this many tokens"),
    "dropout": ("--dropout", float, "dropout on LSTM inputs and the top output (0.1 published)"),
    "n_negative_samples_batch": ("--n-negative-samples", int, "sampled-softmax negatives per batch"),
    "full_softmax_max_vocab": ("--full-softmax-max-vocab", int,
                               "use the full softmax for vocabularies up to this size"),
    "optimizer": ("--optimizer", str, "adagrad (published recipe) or adam (small preset)"),
    "learning_rate": ("--learning-rate", float, "learning rate (Adagrad 0.2 published); "
                      "with linear-decay, the rate at the start"),
    "learning_rate_schedule": ("--lr-schedule", str, "constant (published recipe) or "
                               "linear-decay (small preset): to 0 at the run's nearest limit"),
    "all_clip_norm_val": ("--clip-norm", float, "clip of the global gradient norm (10.0)"),
    "n_epochs": ("--epochs", int, "passes over the corpus"),
    "tokenizer": ("--tokenizer", str, "how lines become tokens (default whitespace; saved "
                  "in options.json, the default of later commands on MODEL_DIR). "
                  + TOKENIZER_HELP),
    "seed": ("--seed", int, "shuffling seed"),
    "shuffle_buffer": ("--shuffle-buffer", int, "sentences in the shuffle buffer"),
    "checkpoint_every_steps": ("--checkpoint-every", int, "steps between checkpoints"),
    "keep_checkpoints": ("--keep-checkpoints", int, "checkpoints kept on disk"),
    "precision": ("--precision", str, "float32 (default), mixed_float16 (GPUs with float16 "
                  "tensor cores; loss scaling) or mixed_bfloat16; weights stay float32"),
    "jit_compile": ("--jit-compile", bool, "compile the step's forward and backward pass "
                    "with XLA, once per length bucket (off by default: for GPUs; slower on "
                    "CPUs, see docs/training.md 'On GPUs')"),
    "steps_per_execution": ("--steps-per-execution", int, "training steps per call of the "
                            "compiled loop, values read back once per call (default 1)"),
}
#: Keys a preset does not decide (they come from the data).
_DATA_KEYS = ("n_tokens_vocab", "n_train_tokens", "train_prefix")


def resolve_config(args, model_dir):
    """`(TrainingConfig, Vocabulary)` from the saved config / preset, JSON and flags.

    Raises:
        ValueError: missing --train/--vocab for a new run, an empty corpus, or (resume) a
            flag that conflicts with the saved config.
    """
    from keras_elmo.training.config import TrainingConfig, merge_dicts
    from keras_elmo.training.dataset import corpus_size
    from keras_elmo.training.vocabulary import Vocabulary
    from keras_elmo.training.corpus import absolute_corpus, expand_corpus, same_corpus

    resume = model_dir.has_run()
    if resume:
        saved = model_dir.load_config()
        saved = saved.replace(train_prefix=absolute_corpus(saved.train_prefix,
                                                           model_dir.path))
        data = saved.to_dict()
        if args.size:
            preset = TrainingConfig.preset(args.size).to_dict()
            data = merge_dicts(data, {k: v for k, v in preset.items() if k not in _DATA_KEYS})
    else:
        if not args.train or not args.vocab:
            raise ValueError(f"{model_dir.path} is a new model directory: --train and --vocab "
                             "are required (received "
                             f"--train={args.train!r}, --vocab={args.vocab!r}).")
        data = TrainingConfig.preset(args.size or "small").to_dict()
        if args.init_from:
            from keras_elmo.training.warm_start import source_options

            data = merge_dicts(data, source_options(args.init_from).to_dict())
    if args.init_from:  # absolute: a restart from another directory finds it too
        data["init_from"] = os.path.abspath(args.init_from)
    if args.config:
        data = merge_dicts(data, read_config_file(args.config))
    for key in CONFIG_FLAGS:
        if getattr(args, key) is not None:
            data[key] = getattr(args, key)

    vocab = Vocabulary.load(args.vocab or model_dir.vocab_path)
    if resume and args.vocab and os.path.isfile(model_dir.vocab_path) and \
            Vocabulary.load(model_dir.vocab_path).tokens != vocab.tokens:
        raise ValueError(f"--vocab {args.vocab} differs from the vocabulary {model_dir.path} was "
                         "trained with (vocab.txt); start a new MODEL_DIR or drop --vocab.")
    data["n_tokens_vocab"] = len(vocab)
    if args.train:
        given = [os.path.abspath(os.path.expanduser(p)) for p in args.train]
        given = given[0] if len(given) == 1 else given
        if resume and same_corpus(given, saved, model_dir.path):
            saved = saved.replace(train_prefix=given)  # the same corpus by another path
        data["train_prefix"] = given
    if not resume:
        sentences, tokens = corpus_size(expand_corpus(data["train_prefix"]),
                                         data.get("tokenizer", "whitespace"))
        if tokens == 0:
            raise ValueError(f"the training corpus {data['train_prefix']!r} holds no token "
                             "(expected one sentence per line, tokens separated by spaces).")
        data["n_train_tokens"] = tokens
    config = TrainingConfig.from_dict(data)
    if not resume and config.init_from is not None:  # before anything is written
        from keras_elmo.training.warm_start import check_source

        check_source(config.options, config.init_from)
    if resume:
        conflicts = saved.conflicts(config)
        if conflicts:
            key, old, new = conflicts[0]
            more = f" (and {len(conflicts) - 1} more)" if len(conflicts) > 1 else ""
            raise ValueError(f"{model_dir.path} was trained with {key}={old!r}; received "
                             f"{key}={new!r}{more}. Resume with the saved config or use a new "
                             "MODEL_DIR.")
    return config, vocab


def read_config_file(path):
    """The JSON object of a `--config` file (one line for a missing file, bad JSON or
    another JSON value)."""
    from keras_elmo.formats.json_fields import read_json

    data = read_json(path, "--config file", "an options.json-shaped JSON file")
    if not isinstance(data, dict):
        raise ValueError(f"--config {path} must hold a JSON object; received "
                         f"{type(data).__name__}.")
    return data
