"""`ElmoEmbedder`: AllenNLP's `ElmoEmbedder` habits over a keras-elmo biLM, numpy in and out.

For scripts that want vectors, not a Keras model: build it from a model directory or from
the two published files (any names), then embed one sentence, a stream of sentences or a
whole file. Every sentence starts from a zero LSTM state (keras-elmo is stateless), so a
sentence's vectors never depend on what was embedded before; AllenNLP's embedder carries
state between batches and so differs slightly on the first sentences it sees.

Shapes: `L + 1` layers (the token layer, then one per biLSTM layer), `n` tokens,
`2 * projection_dim` features (1024 for the published model).

Input contract (docs/serving.md "Input contract"), the same as `keras-elmo embed` and the
SavedModel's: one vector per token, always. A token may be `str` or `bytes`; invalid UTF-8
bytes (or lone surrogates, e.g. from `surrogateescape`) are dropped inside the token, which
stays (an empty word if nothing is left); a `bytes` sentence is split on whitespace before
that, so an invalid byte is never a separator. An empty string token (`"a  b".split(" ")`)
is no token: the sentence is read without it and its column is zeros. A token longer than
`max_characters_per_token - 2` bytes is cut there; a sentence longer than `max_length`
tokens runs in windows of `max_length` tokens (`keras_elmo.text.sentence_windows`);
an empty sentence gives `(L + 1, 0, 2P)`.

Example:
>>> from keras_elmo import ElmoEmbedder
>>> embedder = ElmoEmbedder("runs/people_daily_small")  # doctest: +SKIP
>>> embedder.embed_sentence(["人民", "日报"]).shape  # doctest: +SKIP
(3, 2, 256)
>>> for vectors in embedder.embed_sentences(open("sentences.txt"), batch_size=32):  # doctest: +SKIP
...     ...  # (L + 1, n, 2P) per line, in the input's order
>>> embedder.embed_file("sentences.txt", "elmo.hdf5", output_format="average")  # doctest: +SKIP
"""

import itertools

import numpy as np

from keras_elmo import constants
from keras_elmo.embedding.bilm_runner import DEFAULT_MAX_TOKENS
from keras_elmo.embedding.empty_tokens import drop_empty_tokens, restore_empty_tokens
from keras_elmo.process.cpu_setup import warn_if_bfloat16_is_emulated
from keras_elmo.text.sentence_windows import DEFAULT_MAX_LENGTH, check_max_length
from keras_elmo.text.tokenizers import resolve_tokenizer, tokenize
from keras_elmo.validation import check_int

#: `output_format` of `embed_file` (AllenNLP's names) -> `embed_file`'s `output`.
OUTPUT_FORMATS = {"all": "all", "top": "top", "average": "mixed", "mixed": "mixed"}
#: Batches per length-sorting window of `embed_sentences` (a window's outputs are held).
_SORT_BATCHES = 4


class ElmoEmbedder:
    """ELMo vectors of tokenised sentences as numpy arrays.

    Args:
        model_dir: str, a model directory: `options.json` + `weights.hdf5` (a `keras-elmo
            train` run or a published model) or an ELMoForManyLangs model as downloaded
            (`keras_elmo.load_bilm`); a catalog name (`"elmo-small"`, `keras-elmo models`)
            or a model archive's URL, fetched into the cache once; or None with the two
            files below.
        options_file: str, the biLM's options JSON (any name, or a URL), with `weight_file`.
        weight_file: str, the biLM's weights HDF5 (any name, or a URL), with `options_file`.
        batch_size: int >= 1, default rows per biLM call (64; a row holds one sentence or
            several short ones back to back, `keras_elmo.embedding.row_packing`).
        token_cache: the vocabulary whose char-CNN vectors are computed up front (the same
            numbers; every other token runs the char CNN once, when first met): True:
            `MODEL_DIR/vocab.txt` when present; False: none; or the path of a
            one-token-per-line vocabulary.
        tokenizer: how a string sentence or a file's line becomes tokens, a name of
            `keras_elmo.text.tokenizers.TOKENIZERS`; None: the one the model was trained with
            (its options.json), else whitespace. Token lists are used as given.
        dtype: `"float32"` (default) or `"bfloat16"`, the biLM's weights and compute
            (`load_bilm(..., dtype=dtype)`; the weight file stays float32).
            bfloat16 is an explicit reduced-precision option: half the weight memory,
            faster on CPUs with AVX512_BF16, vectors close to float32's
            (docs/performance.md). The output arrays are float32 either way.
        max_length: int >= 1, tokens per biLM window (512): a longer sentence is embedded
            in windows of this many tokens, its vectors put back whole.
        max_tokens: int >= 1, most token positions per biLM call (rows x steps, 8192),
            bounding the activations' memory; None for no budget (`batch_size` rows alone).

    Example (a tiny random biLM: `L + 1 = 3` layers of `2P = 16`):
    >>> _ = keras_elmo.save_published(keras_elmo.BiLM(keras_elmo.BiLMOptions.tiny()), "tiny")
    >>> embedder = ElmoEmbedder("tiny")
    >>> embedder.embed_sentence(["我", "爱", "北京"]).shape
    (3, 3, 16)
    >>> [v.shape for v in embedder.embed_sentences([["a", "b"], []])]
    [(3, 2, 16), (3, 0, 16)]

    Raises:
        ValueError / FileNotFoundError: a wrong combination of arguments or a missing file
            (one line naming it).
    """

    def __init__(self, model_dir=None, options_file=None, weight_file=None, batch_size=64,
                 token_cache=True, tokenizer=None, dtype="float32",
                 max_length=DEFAULT_MAX_LENGTH, max_tokens=DEFAULT_MAX_TOKENS):
        if dtype not in constants.DTYPES:
            raise ValueError(f"dtype must be one of {constants.DTYPES}; received "
                             f"dtype={dtype!r}.")
        from keras_elmo.pretrained.resolve import resolve_files

        files = resolve_files(model_dir, options_file, weight_file)  # a name or URL: cached
        self.mix_file, vocab = files.mix_file, files.vocab_file
        self.batch_size = check_int("batch_size", batch_size)
        self.max_length = check_max_length(max_length)
        self.max_tokens = check_int("max_tokens", max_tokens, optional=True)
        self.tokenizer = resolve_tokenizer(tokenizer, files.options_file)
        import keras

        from keras_elmo.embedding.token_cache import TokenEmbeddingCache
        from keras_elmo.formats.token_cache import read_vocab_file
        from keras_elmo.models.loading import load_bilm

        if dtype == "bfloat16" and keras.config.backend() == "tensorflow":
            import tensorflow as tf

            if not tf.config.list_physical_devices("GPU"):
                warn_if_bfloat16_is_emulated()  # one line where the CPU would emulate it
        self.bilm = load_bilm(files, dtype=dtype)
        self.bilm.trainable = False  # its weights are fixed here (see TokenEmbeddingCache)
        if token_cache is True:
            token_cache = vocab
        self.token_cache = TokenEmbeddingCache(
            self.bilm, read_vocab_file(token_cache) if token_cache else ())
        from keras_elmo.formats.model_mix import model_mix

        # The model's trained mix, for "mixed" (scalar_mix.json, or a TF Hub module's own).
        self.trained_mix = model_mix(files, self.bilm.num_output_layers)

    @property
    def trained_mix_source(self):
        """Where the model's trained mix was read (a file, a TF Hub module), or None."""
        return None if self.trained_mix is None else self.trained_mix.source

    @property
    def num_layers(self):
        """`L + 1`."""
        return self.bilm.num_output_layers

    @property
    def output_dim(self):
        """`2 * projection_dim`."""
        return self.bilm.output_dim

    def embed_sentence(self, tokens):
        """float32 `(L + 1, n, 2P)` of one tokenised sentence (`n` may be 0)."""
        return self.embed_batch([tokens])[0]

    def embed_batch(self, sentences):
        """A list of float32 `(L + 1, n_i, 2P)` arrays, one per sentence, in order."""
        return list(self.embed_sentences(sentences))

    def embed_sentences(self, sentences, batch_size=None):
        """Yields float32 `(L + 1, n, 2P)` per sentence, in the input's order.

        Args:
            sentences: iterable of token lists (`str` or `bytes` tokens), or of sentences
                as `str` or `bytes` (tokenised by the embedder's tokenizer, like the lines
                of a file); read lazily.
            batch_size: int, rows per biLM call (default: the embedder's).

        Sentences are packed into biLM calls internally (`BiLMRunner`), a few calls' worth
        at a time.
        """
        runner = self._runner(check_int("batch_size", batch_size or self.batch_size))
        window = runner.batch_size * runner.sort_batches
        iterator = iter(sentences)
        offset = 0
        while True:
            chunk = self._token_lists(itertools.islice(iterator, window), offset)
            if not chunk:
                return
            chunk, positions = drop_empty_tokens(chunk)  # "" is no token: zeros there
            results = [None] * len(chunk)
            for key, _, layers in runner.iter_layers(enumerate(chunk)):
                results[key] = np.array(layers, np.float32)  # own copy, not a view
            yield from (restore_empty_tokens(layers, where)
                        for layers, where in zip(results, positions))
            offset += len(chunk)

    def embed_file(self, input_file, output_file, output_format="all", batch_size=None,
                   forget_sentences=False, use_sentence_keys=False, mix_file=None,
                   progress=False):
        """Writes AllenNLP's HDF5 layout for a text file (see `keras_elmo.embedding.embed_file`).

        Args:
            input_file: path of UTF-8 text, one tokenised sentence per line.
            output_file: the .hdf5 path (replaced only when complete).
            output_format: `"all"` `(L + 1, n, 2P)`, `"top"` `(n, 2P)`, `"average"` (the
                even mix, `(n, 2P)`) or `"mixed"` (`mix_file`'s trained mix, or the model
                directory's `scalar_mix.json`, else even).
            batch_size, forget_sentences, use_sentence_keys: as AllenNLP's.
            progress: bool, a progress line on stderr.

        Returns:
            dict of counts and timing (see `embed_file`).
        """
        from keras_elmo.embedding.embed_file import embed_file

        if output_format not in OUTPUT_FORMATS:
            raise ValueError(f"output_format must be one of {sorted(OUTPUT_FORMATS)}; "
                             f"received {output_format!r}.")
        if output_format == "mixed" and mix_file is None:
            mix_file = self.trained_mix
        return embed_file(self.bilm, input_file, output_file,
                          batch_size=batch_size or self.batch_size,
                          output=OUTPUT_FORMATS[output_format],
                          mix_file=mix_file if output_format == "mixed" else None,
                          token_cache=self.token_cache,
                          keep_sentence_index=not forget_sentences,
                          use_sentence_keys=use_sentence_keys, progress=progress,
                          tokenizer=self.tokenizer, max_length=self.max_length,
                          max_tokens=self.max_tokens)

    def _token_lists(self, items, offset):
        """Token lists of a chunk of sentences; strings go through the tokenizer together."""
        items = [_text(item) for item in items]
        texts = [i for i, item in enumerate(items) if isinstance(item, str)]
        tokens = [_tokens(item, offset + i) if not isinstance(item, str) else None
                  for i, item in enumerate(items)]
        if texts:
            for i, found in zip(texts, tokenize([items[i] for i in texts], self.tokenizer)):
                tokens[i] = list(found)
        return tokens

    def _runner(self, batch_size):
        from keras_elmo.embedding.bilm_runner import BiLMRunner

        runners = self.__dict__.setdefault("_runners", {})  # one traced runner per batch size
        if batch_size not in runners:
            runners[batch_size] = BiLMRunner(self.bilm, token_cache=self.token_cache,
                                             batch_size=batch_size, sort_batches=_SORT_BATCHES,
                                             max_length=self.max_length,
                                             max_tokens=self.max_tokens)
        return runners[batch_size]


def _text(item):
    """Bytes become str with each invalid byte kept as a lone surrogate (`surrogateescape`):
    never whitespace, so a bytes sentence splits where its valid text does, and dropped
    inside its token by the char ids (`keras_elmo.text.characters.token_bytes`)."""
    if isinstance(item, bytes):
        return item.decode("utf-8", "surrogateescape")
    if isinstance(item, (list, tuple)):
        return [t.decode("utf-8", "surrogateescape") if isinstance(t, bytes) else t
                for t in item]
    return item


def _tokens(item, index):
    """A token-list sentence, checked."""
    if isinstance(item, (list, tuple)) and all(isinstance(t, str) for t in item):
        # An empty token is no token (zeros at its position); whitespace inside a token
        # would be read as one token here and as two in a file.
        bad = [t for t in item if t and (t != t.strip() or len(t.split()) != 1)]
        if bad:
            raise ValueError(f"sentence {index}: tokens must be without whitespace; "
                             f"received {bad[:3]!r}.")
        return list(item)
    raise ValueError(f"sentence {index}: expected a list of str tokens (or a str to split); "
                     f"received {type(item).__name__} {item!r:.80}.")
