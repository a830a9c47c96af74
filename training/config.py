"""`TrainingConfig`: every hyper-parameter of a biLM training run, in one object.

The config is saved as `MODEL_DIR/options.json` in the options.json shape of docs/model.md
section 6: the architecture under `"lstm"` / `"char_cnn"` (written by `BiLMOptions`), the
training keys at the top level, bilm-tf's names where bilm-tf has one (`n_tokens_vocab`,
`batch_size`, `dropout`, `n_negative_samples_batch`, `all_clip_norm_val`, `n_epochs`,
`n_train_tokens`, `bidirectional`). `BiLMOptions.from_file` reads the same file (it keeps the
training keys in `extra`), so the trained model loads with `BiLM.from_weights`.

Example:
>>> config = TrainingConfig.preset("tiny").replace(n_tokens_vocab=50)
>>> TrainingConfig.from_dict(config.to_dict()) == config
True
"""

import dataclasses
import glob
import json
import os

from keras_elmo.formats.options import BiLMOptions
from keras_elmo.text.tokenizers import TOKENIZERS
from keras_elmo.validation import check_fraction

#: Presets of `keras-elmo train --size`: architecture + training defaults.
SIZES = ("tiny", "small", "published")
#: Optimizers of `keras-elmo train --optimizer`.
OPTIMIZERS = ("adagrad", "adam")
#: Learning-rate schedules of `keras-elmo train --lr-schedule`
#: (`keras_elmo.training.optimizers.scheduled_learning_rate`).
LEARNING_RATE_SCHEDULES = ("constant", "linear-decay")
#: Precisions of `keras-elmo train --precision` (Keras dtype policies): float32 variables in
#: all three; "mixed_*" computes the biLM in 16 bits (float16 with loss scaling).
PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")
#: Keys a resumed run may change; every other saved key must match.
RESUMABLE_KEYS = ("n_epochs", "checkpoint_every_steps", "keep_checkpoints", "jit_compile",
                  "steps_per_execution")


@dataclasses.dataclass(frozen=True)
class TrainingConfig:
    """Architecture and training hyper-parameters of a biLM.

    Args:
        options: `BiLMOptions`, the architecture (its `extra` is ignored here).
        n_tokens_vocab: int, softmax size = vocabulary size (set from the vocab file).
        batch_tokens: int, token budget of one batch per replica: sentences of similar
            length are grouped so that `sentences * padded_length <= batch_tokens`
            (boundary tokens `<S>`/`</S>` included).
        batch_size: int, at most this many sentences per batch per replica.
        max_sentence_tokens: int, longer sentences are cut into chunks of at most this many
            tokens; each chunk is trained as its own sentence `<S> chunk </S>`.
        dropout: float, on every LSTM layer's input and on the top output (0.1 published).
        n_negative_samples_batch: int, sampled-softmax negatives per batch (8192 published;
            capped at `n_tokens_vocab - 1`).
        full_softmax_max_vocab: int, vocabularies up to this size train with the full
            softmax, larger ones with the sampled softmax. Evaluation is always full.
        optimizer: `"adagrad"` (the published recipe, with `initial_accumulator_value`) or
            `"adam"` (converges in far fewer steps; the `small` preset's choice for
            minutes-long CPU runs).
        learning_rate: float, learning rate (Adagrad 0.2 published); with
            `"linear-decay"`, the rate at the start of a run.
        learning_rate_schedule: `"constant"` (the published recipe) or `"linear-decay"`:
            the rate falls linearly from `learning_rate` to 0 over the run, as far as the
            run is along towards its nearest limit (`--max-steps` and the epochs count
            globally, so a resumed run continues the same schedule; `--max-minutes` counts
            the minutes of this run, so each timed run anneals within its own minutes).
        initial_accumulator_value: float, Adagrad accumulator start (1.0).
        all_clip_norm_val: float, clip of the global gradient norm (10.0).
        n_epochs: int, passes over the corpus.
        n_train_tokens: int or None, whitespace tokens of the corpus (counted at start).
        bidirectional: bool, must be True (forward + backward objective).
        tokenizer: `"whitespace"` (pre-tokenised lines, split as Python's `str.split`),
            `"unicode-script"` (raw text split by script, Han/kana per character) or
            `"jieba"` (raw Chinese, segmented by jieba); see `keras_elmo.text.tokenizers`. Saved
            in options.json: the default tokeniser of every later command on the model.
        shuffle_buffer: int, sentences in the shuffle buffer.
        seed: int, shuffling seed; epoch `e` uses `seed + e`, so a resumed run sees the
            same order.
        train_prefix: str or list of str or None, the corpus glob(s); `keras-elmo train`
            stores them absolute, and `resolve_stored_paths` reads a relative one from the
            model directory, so a run resumes from any working directory.
        checkpoint_every_steps: int, steps between checkpoints.
        keep_checkpoints: int, checkpoints kept on disk.
        init_from: str or None, a model directory whose weights a new run starts from
            (domain adaptation; see `keras_elmo.training.warm_start`). A resumed run ignores it: its
            checkpoint already holds the weights.
        precision: `"float32"`, `"mixed_float16"` (16-bit compute, dynamic loss scaling:
            GPUs with float16 tensor cores) or `"mixed_bfloat16"` (GPUs/CPUs with native
            bfloat16). Variables, the softmax, the loss, the weight file and exports stay
            float32 in every precision.
        jit_compile: bool, compile the step's forward and backward pass with XLA (the
            sampled-softmax negatives are drawn before it; batches padded to their length
            bucket's longest, one compilation per bucket). Same loss and gradients; off by
            default: meant for GPUs, slower than the default step on CPUs
            (docs/training.md, "On GPUs").
        steps_per_execution: int, training steps per call of the compiled loop; values are
            read back to Python once per call (and at every log, evaluation and checkpoint
            step). 1 (default) reads back after every step.
    """

    options: BiLMOptions = dataclasses.field(default_factory=BiLMOptions.small)
    n_tokens_vocab: int = None
    batch_tokens: int = 2560
    batch_size: int = 128
    max_sentence_tokens: int = 100
    dropout: float = 0.1
    n_negative_samples_batch: int = 8192
    full_softmax_max_vocab: int = 16384
    optimizer: str = "adagrad"
    learning_rate: float = 0.2
    learning_rate_schedule: str = "constant"
    initial_accumulator_value: float = 1.0
    all_clip_norm_val: float = 10.0
    n_epochs: int = 10
    n_train_tokens: int = None
    bidirectional: bool = True
    tokenizer: str = "whitespace"
    shuffle_buffer: int = 10000
    seed: int = 0
    train_prefix: str = None
    checkpoint_every_steps: int = 500
    keep_checkpoints: int = 3
    init_from: str = None
    precision: str = "float32"
    jit_compile: bool = False
    steps_per_execution: int = 1

    def __post_init__(self):
        if not isinstance(self.options, BiLMOptions):
            raise ValueError(f"options must be a BiLMOptions; received {type(self.options).__name__}.")
        for name in ("batch_tokens", "batch_size", "max_sentence_tokens", "n_negative_samples_batch",
                     "full_softmax_max_vocab", "n_epochs", "shuffle_buffer",
                     "checkpoint_every_steps", "keep_checkpoints", "steps_per_execution"):
            _check_int(name, getattr(self, name), minimum=1)
        for name in ("n_tokens_vocab", "n_train_tokens"):
            if getattr(self, name) is not None:
                _check_int(name, getattr(self, name), minimum=0)
        if self.n_tokens_vocab is not None and self.n_tokens_vocab < 4:
            raise ValueError("n_tokens_vocab must be >= 4 (<S>, </S>, <UNK> and a word); "
                             f"received {self.n_tokens_vocab}.")
        _check_int("seed", self.seed, minimum=0)
        if self.batch_tokens < self.max_sentence_tokens + 2:
            raise ValueError(
                f"batch_tokens must hold one longest chunk (max_sentence_tokens + 2 = "
                f"{self.max_sentence_tokens + 2} tokens); received batch_tokens={self.batch_tokens}.")
        for name in ("dropout", "learning_rate", "initial_accumulator_value",
                     "all_clip_norm_val"):
            _check_number(name, getattr(self, name))
        check_fraction("dropout", self.dropout)
        for name in ("learning_rate", "all_clip_norm_val"):
            if not float(getattr(self, name)) > 0:
                raise ValueError(f"{name} must be > 0; received {getattr(self, name)}.")
        if float(self.initial_accumulator_value) < 0:
            raise ValueError("initial_accumulator_value must be >= 0; received "
                             f"{self.initial_accumulator_value}.")
        if self.bidirectional is not True:
            raise ValueError("keras-elmo trains bidirectional biLMs only; received "
                             f"bidirectional={self.bidirectional!r}.")
        if self.learning_rate_schedule not in LEARNING_RATE_SCHEDULES:
            raise ValueError(f"learning_rate_schedule must be one of {LEARNING_RATE_SCHEDULES}; "
                             f"received {self.learning_rate_schedule!r}.")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}; received {self.optimizer!r}.")
        if self.init_from is not None and not (isinstance(self.init_from, str) and self.init_from):
            raise ValueError("init_from must be None or a model directory path; received "
                             f"{self.init_from!r}.")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}; received "
                             f"{self.precision!r}.")
        if not isinstance(self.jit_compile, bool):
            raise ValueError(f"jit_compile must be True or False; received {self.jit_compile!r}.")
        if self.tokenizer not in TOKENIZERS:
            raise ValueError(f"tokenizer must be one of {TOKENIZERS}; received {self.tokenizer!r}.")

    # --- derived -----------------------------------------------------------------------------
    @property
    def use_sampled_softmax(self):
        """True when training uses the sampled softmax (vocabulary above the threshold)."""
        return self.n_tokens_vocab is not None and self.n_tokens_vocab > self.full_softmax_max_vocab

    @property
    def num_sampled(self):
        """Negatives of the sampled softmax: `n_negative_samples_batch`, below the vocab size."""
        if self.n_tokens_vocab is None:
            return self.n_negative_samples_batch
        return min(self.n_negative_samples_batch, self.n_tokens_vocab - 1)

    def replace(self, **changes):
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    # --- presets -----------------------------------------------------------------------------
    @classmethod
    def preset(cls, size):
        """`"tiny"` (tests), `"small"` (README: minutes on 2 CPU cores) or `"published"`."""
        if size == "tiny":
            return cls(options=BiLMOptions.tiny(), batch_tokens=256, batch_size=32,
                       max_sentence_tokens=40, n_negative_samples_batch=64,
                       full_softmax_max_vocab=1024, n_epochs=1, shuffle_buffer=1000,
                       checkpoint_every_steps=50)
        if size == "small":
            # Adam and small batches: many updates in a minutes-long CPU run, where larger
            # batches, the full softmax and Adagrad all reached a worse held-out perplexity
            # in the same minutes. The rate decays linearly to 0 over the run (a 20-minute
            # run anneals within its 20 minutes); 10 epochs, as 20 minutes on 2 cores cover
            # 4-9 by the CPU (tuned on a dev slice of train). The LSTM is 384 units, not
            # bilm-tf's small 512: on a 2-core CPU a 20-minute run is bound by its number of
            # updates, and 384 units take more steps a minute for a lower held-out
            # perplexity at the same minutes (docs/training.md, "The small preset";
            # docs/performance.md has the figures).
            return cls(options=BiLMOptions.small(lstm_units=384), batch_tokens=1024,
                       batch_size=128,
                       n_negative_samples_batch=2048, full_softmax_max_vocab=8192,
                       optimizer="adam", learning_rate=0.004,
                       learning_rate_schedule="linear-decay",
                       n_epochs=10, checkpoint_every_steps=500)
        if size == "published":
            return cls(options=BiLMOptions.published(), batch_tokens=2560, batch_size=128,
                       n_negative_samples_batch=8192, full_softmax_max_vocab=16384,
                       n_epochs=10, checkpoint_every_steps=1000)
        raise ValueError(f"size must be one of {SIZES}; received {size!r}.")

    # --- options.json ------------------------------------------------------------------------
    def to_dict(self):
        """The options.json structure: architecture sections + training keys."""
        result = self.options.to_dict()
        for key in _training_keys():
            result[key] = getattr(self, key)
        return result

    @classmethod
    def from_dict(cls, data):
        """Reads the options.json structure; missing training keys take the defaults."""
        options = BiLMOptions.from_dict(data)
        known = _training_keys()
        training = {k: v for k, v in options.extra.items() if k in known}
        architecture = dataclasses.replace(
            options, extra={k: v for k, v in options.extra.items() if k not in known})
        return cls(options=architecture, **training)

    @classmethod
    def from_file(cls, path):
        """Reads an options.json written by `save` (or a bilm-tf training options file)."""
        options = BiLMOptions.from_file(path)  # clear errors for missing file / bad JSON
        try:
            return cls.from_dict(options.to_dict())
        except (TypeError, ValueError) as error:
            raise ValueError(f"options file {os.fspath(path)}: {error}") from None

    def save(self, path):
        """Writes options.json atomically (a killed run never leaves half a file)."""
        from keras_elmo.process.atomic_file import atomic_writer

        with atomic_writer(os.fspath(path), what="the training options") as handle:
            json.dump(self.to_dict(), handle, indent=2, ensure_ascii=False)
            handle.write("\n")

    def conflicts(self, other):
        """`[(key, self_value, other_value)]` of differing keys, `RESUMABLE_KEYS` excepted."""
        mine, theirs = _flatten(self.to_dict()), _flatten(other.to_dict())
        keys = sorted(set(mine) | set(theirs))
        return [(k, mine.get(k), theirs.get(k)) for k in keys
                if k not in RESUMABLE_KEYS and mine.get(k) != theirs.get(k)]


def resolve_stored_paths(value, model_dir):
    """A path (or glob, or list of them) stored in options.json, usable from any directory.

    Absolute paths are kept; a relative one is read from `model_dir`. A run written before
    paths were stored absolute kept them as typed: when only the working directory matches
    such a path, it is kept as it is.

    Example:
    >>> resolve_stored_paths("../data/train.txt", "/runs/a")  # doctest: +SKIP
    '/runs/data/train.txt'
    """
    if value is None:
        return None
    if not isinstance(value, str):
        return [resolve_stored_paths(item, model_dir) for item in value]
    path = os.path.expanduser(value)
    if os.path.isabs(path):
        return path
    candidate = os.path.normpath(os.path.join(os.path.abspath(model_dir), path))
    if glob.glob(candidate) or not glob.glob(path):
        return candidate
    return path


def merge_dicts(base, override):
    """Deep merge of two options.json-shaped dicts (`override` wins), for partial JSON files."""
    result = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = merge_dicts(result[key], value)
        else:
            result[key] = value
    return result


def _training_keys():
    return tuple(f.name for f in dataclasses.fields(TrainingConfig) if f.name != "options")


def _flatten(data, prefix=""):
    flat = {}
    for key, value in data.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = json.loads(json.dumps(value))  # tuples -> lists
    return flat


def _check_number(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number; received {value!r} "
                         f"({type(value).__name__}).")


def _check_int(name, value, minimum):
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; received {value!r}.")
