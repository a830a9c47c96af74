"""What one worker process of the Beam pipeline holds: the model, loaded once, and `embed`'s
way of running it.

`EmbeddingSettings` are `keras-elmo embed`'s flags as one picklable value (the model's files,
the output layers, the tokenizer, the precision, the batching); `embedding_worker(settings)`
returns this process's `EmbeddingWorker` for them, built on first use and then shared by
every DoFn instance and bundle of the process (Beam may make several DoFn instances per
process, one per thread; they all get the same model).

A worker is `embed` inside: an `ElmoEmbedder` (`keras_elmo.load_bilm`, frozen; the token
cache of the model's vocab.txt or `--vocab`) and a `BiLMRunner` with `embed`'s batching
(windows of `batch_size * 32` sentences packed into calls of `batch_size` rows within the
`max_tokens` budget, windows of `max_length` tokens), the same tokenizer and the same output
layers (`all`, `top`, `average`, `mixed`), so its vectors are those of `keras-elmo embed` to
float rounding.

The worker's thread layout (`settings.thread_layout`, `(intra_op, inter_op)`) is applied to
TensorFlow's variables before TensorFlow starts in the process, replacing what the process
inherited: several workers on one machine (`DirectRunner --num-workers N`) share its cores
(`keras_elmo.process.cpu_setup.worker_thread_layout`). None: the command's own layout for
the worker's machine (`set_cpu_defaults`).

Example:
>>> settings = EmbeddingSettings(model_dir="runs/pd", output_format="top")  # doctest: +SKIP
>>> worker = embedding_worker(settings)  # doctest: +SKIP
>>> for index, text, num_tokens, vectors in worker.embed_lines([(0, "人民 日报")]): ...  # doctest: +SKIP
"""

import contextlib
import dataclasses
import os
import sys
import threading

import numpy as np

from keras_elmo import constants
from keras_elmo.embedding.bilm_runner import DEFAULT_MAX_TOKENS
from keras_elmo.process.cpu_setup import INTER_OP_VARIABLE, INTRA_OP_VARIABLE, set_cpu_defaults
from keras_elmo.text.sentence_windows import DEFAULT_MAX_LENGTH
from keras_elmo.validation import check_int

#: `output_format` values (AllenNLP's names, as `ElmoEmbedder.embed_file`).
OUTPUT_FORMATS = ("all", "top", "average", "mixed")
#: This process's workers, by settings (module docstring).
_WORKERS = {}
_LOCK = threading.Lock()


@dataclasses.dataclass(frozen=True)
class EmbeddingSettings:
    """`keras-elmo embed`'s flags for the workers (paths must be readable where they run).

    Args:
        model_dir: a model directory of any kind (`keras_elmo.load_bilm`), or None with
            `options_file` and `weight_file`.
        output_format: `"all"` `(L + 1, n, 2P)`, `"top"`, `"average"` or `"mixed"` `(n, 2P)`.
        mix_file: a `scalar_mix.json` for `"mixed"` (None: the model directory's, else the
            even average).
        token_cache: True (the model directory's vocab.txt), False, or a vocabulary file.
        tokenizer: a name of `keras_elmo.text.tokenizers.TOKENIZERS`, None for the model's.
        dtype: `"float32"` or `"bfloat16"`.
        batch_size, max_length, max_tokens: `embed`'s `--batch-size`, `--max-length`,
            `--max-tokens` (None: no budget).
        keep_sentence_index: each shard gets its `sentence_to_index` (True).
        thread_layout: `(intra_op, inter_op)` threads of a worker, or None (module
            docstring).
    """

    model_dir: str = None
    options_file: str = None
    weight_file: str = None
    output_format: str = "all"
    mix_file: str = None
    token_cache: object = True
    tokenizer: str = None
    dtype: str = "float32"
    batch_size: int = 64
    max_length: int = DEFAULT_MAX_LENGTH
    max_tokens: int = DEFAULT_MAX_TOKENS
    keep_sentence_index: bool = True
    thread_layout: tuple = None

    def __post_init__(self):
        if self.output_format not in OUTPUT_FORMATS:
            raise ValueError(f"output_format must be one of {OUTPUT_FORMATS}; received "
                             f"{self.output_format!r}.")
        if self.mix_file is not None and self.output_format != "mixed":
            raise ValueError("a mix weights file is used only with output_format='mixed'; "
                             f"received {self.output_format!r}.")
        if self.dtype not in constants.DTYPES:
            raise ValueError(f"dtype must be one of {constants.DTYPES}; received "
                             f"{self.dtype!r}.")
        check_int("batch_size", self.batch_size)
        check_int("max_length", self.max_length)
        check_int("max_tokens", self.max_tokens, optional=True)
        if self.thread_layout is not None:
            object.__setattr__(self, "thread_layout",
                               tuple(check_int("thread_layout", int(n))
                                     for n in self.thread_layout))

    def describe(self):
        """The settings as a JSON-ready dict (for the manifest)."""
        return {field.name: (list(value) if isinstance(value, tuple) else value)
                for field in dataclasses.fields(self)
                for value in [getattr(self, field.name)]}


def embedding_worker(settings):
    """This process's `EmbeddingWorker` for `settings`, built on the first call (module
    docstring)."""
    with _LOCK:
        if settings not in _WORKERS:
            _WORKERS[settings] = EmbeddingWorker(settings)
        return _WORKERS[settings]


def apply_thread_layout(layout, environ=None):
    """Sets TensorFlow's thread variables to `layout` (`(intra_op, inter_op)`) unless
    TensorFlow is imported in this process already (then it would not read them); returns
    whether it did."""
    environ = os.environ if environ is None else environ
    if layout is None or "tensorflow" in sys.modules:
        return False
    environ[INTRA_OP_VARIABLE], environ[INTER_OP_VARIABLE] = (str(n) for n in layout)
    return True


class EmbeddingWorker:
    """The model of one worker process and `embed`'s way of running it (module docstring).

    Args:
        settings: `EmbeddingSettings`.

    Attributes:
        embedder: the `ElmoEmbedder` (its `bilm`, `token_cache`, `tokenizer`).
        runner: the `BiLMRunner` with `embed`'s batching.
        process_id: the id of the process that loaded the model.
    """

    def __init__(self, settings):
        # A worker process of the pipeline: TensorFlow starts with the command's CPU settings
        # (the launcher's environment, which the workers inherit, has its log level).
        apply_thread_layout(settings.thread_layout)
        set_cpu_defaults()
        from keras_elmo.embedding.bilm_runner import BiLMRunner
        from keras_elmo.embedding.embed_file import sentence_mix
        from keras_elmo.embedding.embedder import ElmoEmbedder

        self.settings = settings
        self.process_id = os.getpid()
        self.embedder = ElmoEmbedder(
            settings.model_dir, options_file=settings.options_file,
            weight_file=settings.weight_file, batch_size=settings.batch_size,
            token_cache=settings.token_cache, tokenizer=settings.tokenizer,
            dtype=settings.dtype, max_length=settings.max_length,
            max_tokens=settings.max_tokens)
        self.runner = BiLMRunner(self.embedder.bilm, token_cache=self.embedder.token_cache,
                                 batch_size=settings.batch_size,
                                 max_length=settings.max_length,
                                 max_tokens=settings.max_tokens)
        self._mix = None
        if settings.output_format in ("average", "mixed"):
            mix_file = settings.mix_file
            if settings.output_format == "mixed" and mix_file is None:
                mix_file = self.embedder.trained_mix
            self._mix = sentence_mix(self.runner.num_output_layers, mix_file)

    @property
    def shape(self):
        """The shape of one sentence's output, `"n"` for its token count."""
        dim = self.runner.output_dim
        return ([self.runner.num_output_layers, "n", dim]
                if self.settings.output_format == "all" else ["n", dim])

    def vectors(self, layers):
        """float32 `(L + 1, n, 2P)` of one sentence -> the output format's array."""
        from keras_elmo.embedding.embed_file import mix_sentence

        if self._mix is not None:
            layers = mix_sentence(self._mix, layers)  # (n, 2P)
        elif self.settings.output_format == "top":
            layers = layers[-1]  # (n, 2P)
        return layers.astype(np.float32, copy=False)

    def embed_lines(self, lines):
        """Yields `(index, text, num_tokens, vectors)` for `(index, text)` lines, tokenised
        by the worker's tokenizer, in `embed`'s batches (so in length order, not the input's).
        `vectors` may be a view of the batch's array: copy it to keep it."""
        from keras_elmo.embedding.inputs import tokenized_lines

        texts = {}

        def keyed():
            for index, text, tokens in tokenized_lines(lines, self.embedder.tokenizer):
                texts[index] = text
                yield index, tokens

        with contextlib.closing(self.runner.iter_batches(keyed())) as batches:
            for keys, sentences, layers in batches:
                for row, (key, tokens) in enumerate(zip(keys, sentences)):
                    yield key, texts.pop(key), len(tokens), self.vectors(
                        layers[row])  # (L + 1, n, 2P) before `vectors`

    def embed_sentences(self, items):
        """Yields `(index, vectors)` for `(index, sentence)` pairs, a sentence a `str`
        (tokenised as a file's line) or a list of `str` tokens (used as given); in `embed`'s
        batches (length order); `vectors` a float32 array of its own."""
        from keras_elmo.text.tokenizers import tokenize

        items = list(items)
        texts = [(i, s) for i, (_, s) in enumerate(items) if isinstance(s, str)]
        tokens = {i: tokens for (i, _), tokens in
                  zip(texts, tokenize([s for _, s in texts], self.embedder.tokenizer))}
        keyed = []
        for position, (index, sentence) in enumerate(items):
            if position not in tokens:
                if not (isinstance(sentence, (list, tuple))
                        and all(isinstance(t, str) and t and not t.isspace()
                                for t in sentence)):
                    raise ValueError(f"sentence {index}: expected a str or a list of "
                                     f"non-empty str tokens; received {sentence!r:.80}.")
                tokens[position] = list(sentence)
            keyed.append((position, tokens[position]))
        for keys, sentences, layers in self.runner.iter_batches(keyed):
            for row, (position, words) in enumerate(zip(keys, sentences)):
                yield items[position][0], np.array(self.vectors(layers[row]),
                                                   np.float32)
