"""`BiLM`: ELMo's bidirectional language model, the backbone every other part holds.

One object from training to use: the training objective (`keras_elmo.training.
language_model.LanguageModel`) is a head over a `BiLM`, and the trained run's `BiLM` is the
very object that is written to weights.hdf5, exported and wrapped by `ElmoLayer`.
"""

import keras
from keras import ops

from keras_elmo import backend
from keras_elmo.layers.char_cnn_embedder import CharCNNEmbedder, check_char_id_range
from keras_elmo.text.characters import token_mask
from keras_elmo.formats.options import as_options
from keras_elmo.layers.residual_bilstm import ResidualBiLSTM
from keras_elmo.layers.sentence_boundaries import (AddSentenceBoundaries,
                                                   RemoveSentenceBoundaries,
                                                   with_boundary_tokens)
from keras_elmo.layers.token_compaction import (compaction_order, restoring_order,
                                                take_positions)
from keras_elmo.layers.word_embedding import WordEmbedding
from keras_elmo.models.input_checks import check_model_inputs
from keras_elmo.text.token_vocabulary import TokenVocabulary, vocabulary_batch_to_ids
from keras_elmo.validation import check_config_keys


@keras.saving.register_keras_serializable(package="keras_elmo")
class BiLM(backend.ModuleHabits, keras.Model):
    """ELMo's biLM: char CNN token encoder + residual biLSTM -> `L + 1` representations.

    The model adds `<S>` and `</S>` around each sentence itself and drops their positions
    from the outputs. Layer 0 is the token encoding concatenated with itself `[x; x]`;
    layer j is `[forward_j; backward_j]` (docs/model.md section 4).

    A vocabulary model (options with `char_vocabulary`, e.g. an ELMoForManyLangs model
    read by `from_efml`; docs/model.md section 10) runs the same layers: its char ids are
    rows of a character vocabulary, and with a word embedding its token vectors are the
    char encoder's plus `WordEmbedding`'s, computed from word ids it then also takes.

    Args:
        options: `BiLMOptions`, an options.json dict or a path to options.json.
        stateful: bool, carry LSTM state across calls per batch row, as bilm-tf does
            (False; see `ResidualBiLSTM`). `reset_states()` clears it.
        max_batch_size: int, state rows kept when `stateful` (128).
        dropout: float in [0, 1), dropout on every LSTM layer's input when called with
            `training=True` (the training recipe's 0.1; inference never drops).
        implementation: the loop the biLSTM runs, `"auto"` or one to force
            (`ResidualBiLSTM`'s `implementation`).
        zero_init: bool, create every weight a published weight file holds as zeros instead
            of drawing it, for a biLM that a file fills next (`from_weights` sets it: the
            process then holds one copy of the model, not random draws plus the file's).
            How this object is built, not what it is: not in the config, so a biLM rebuilt
            from its config (`from_config`, `keras.models.clone_model`) draws its weights.
        vocabulary: a vocabulary model's `keras_elmo.TokenVocabulary` (or its
            `get_config()` dict), or None. With it the model's string-taking users
            (`ElmoLayer`, `TokenEmbeddingCache`, the export, training) turn tokens into
            its ids; it is part of the config (a `.keras` file keeps it). A byte model
            takes none.
        **kwargs: `keras.Model` arguments (`name`, `dtype`). `dtype` is every sublayer's
            policy too: `dtype="bfloat16"` keeps the weights (half the memory) and computes
            in bfloat16, an explicit reduced-precision option (docs/performance.md has its
            speed and its difference to float32); the default is float32.

    Call arguments:
        char_ids: int32 `(batch, num_tokens, max_characters_per_token)` from
            `keras_elmo.batch_to_ids` (no sentence boundaries; all-zero rows are padding);
            for a vocabulary model from `keras_elmo.text.token_vocabulary`. A model with a
            word embedding takes the dict `{"char_ids": ..., "word_ids": (batch,
            num_tokens)}` instead (word ids 0 where the char row is padding); every model
            accepts `{"char_ids": ...}`.

    Returns:
        dict with `"layers"`: float32 `(batch, L + 1, num_tokens, 2 * projection_dim)`,
        exactly zero past each sentence's end, and `"mask"`: bool `(batch, num_tokens)`.

    Example:
    >>> bilm = BiLM(BiLMOptions.tiny())
    >>> out = bilm(keras_elmo.batch_to_ids([["The", "cat", "sat"], ["Hi"]]))
    >>> out["layers"].shape, out["mask"].shape
    (TensorShape([2, 3, 3, 16]), TensorShape([2, 3]))

    To use the published weights:
    >>> bilm = BiLM.from_weights("options.json", "weights.hdf5")  # doctest: +SKIP

    An ELMoForManyLangs model directory, as downloaded:
    >>> bilm = BiLM.from_efml("zh.model")  # doctest: +SKIP
    >>> vocabulary = efml_vocabulary("zh.model")  # doctest: +SKIP
    >>> ids = vocabulary_batch_to_ids(vocabulary, [["北京", "欢迎", "你"]])  # doctest: +SKIP
    >>> out = bilm(ids)  # {"char_ids": ..., "word_ids": ...}  # doctest: +SKIP

    Reference:
    - [Peters et al., 2018](https://arxiv.org/abs/1802.05365).
    """

    def __init__(self, options, stateful=False, max_batch_size=128, dropout=0.0,
                 implementation="auto", zero_init=False, vocabulary=None, **kwargs):
        options = as_options(options)
        if vocabulary is not None:
            vocabulary = TokenVocabulary.from_config(vocabulary)
            vocabulary.check_fits(options)
        dtype = kwargs.get("dtype")  # the sublayers' policy too (None: Keras' global one)
        # === Layers ===
        # The model checks its ids itself (`check_inputs`): on the host before a call
        # dispatches where they have values, so a compiled call holds no check of its own.
        token_embedder = CharCNNEmbedder.from_options(options, zero_init=zero_init,
                                                      check_ids=False, name="token_embedder",
                                                      dtype=dtype)
        word_embedder = None
        if options.has_word_embedding:
            word_embedder = WordEmbedding.from_options(options, zero_init=zero_init,
                                                       check_ids=False, name="word_embedder",
                                                       dtype=dtype)
        contextual_encoder = ResidualBiLSTM.from_options(
            options, dropout=dropout, stateful=stateful, max_batch_size=max_batch_size,
            implementation=implementation, zero_init=zero_init, name="contextual_encoder",
            dtype=dtype)
        add_boundaries = AddSentenceBoundaries(name="add_sentence_boundaries", dtype=dtype)
        # Left at the global policy (float32): a bfloat16 biLM still returns float32 vectors.
        remove_boundaries = RemoveSentenceBoundaries(name="remove_sentence_boundaries")

        # === Functional model ===
        char_ids = keras.Input(shape=(None, options.max_characters_per_token),
                               dtype="int32", name="char_ids")
        inputs = char_ids
        mask = token_mask(char_ids)  # (batch, T), at the input's positions
        # A position with no token between real ones (an empty string token) is read as if
        # it were not there: each row's real tokens go first, the outputs go back after.
        order = compaction_order(mask)  # (batch, T)
        compact_chars = take_positions(char_ids, order, axis=1)  # (batch, T, chars)
        compact_mask = token_mask(compact_chars)  # (batch, T), real tokens first
        # The `<S>` and `</S>` tokens ride along at positions T, T + 1 of every row: one
        # token-encoder call encodes them too (a distinct token is encoded once).
        tokens = token_embedder(with_boundary_tokens(compact_chars, options.boundary_char_ids))
        if word_embedder is not None:
            word_ids = keras.Input(shape=(None,), dtype="int32", name="word_ids")
            inputs = {"char_ids": char_ids, "word_ids": word_ids}
            # No word where the char row says "no token": both frames end at one place.
            words = ops.where(compact_mask, take_positions(word_ids, order, axis=1),
                              0)  # (batch, T)
            tokens = tokens + word_embedder(
                with_boundary_tokens(words, options.boundary_word_ids))  # (batch, T + 2, P)
        layers = contextual_layers(
            (add_boundaries, contextual_encoder, remove_boundaries), tokens[:, :-2],
            compact_mask, tokens[:, -2:])  # (batch, L + 1, T, 2P), compacted
        layers = take_positions(layers, restoring_order(order), axis=2)  # input's positions
        # `trainable` is applied once the layers are tracked: Keras' functional model sets a
        # `trainable` argument before it tracks its layers (they would stay trainable), and
        # on the TensorFlow backend a later assignment of the value already held is skipped.
        trainable = kwargs.pop("trainable", True)
        super().__init__(inputs=inputs, outputs={"layers": layers, "mask": mask}, **kwargs)
        self.trainable = trainable

        # === Config ===
        self.options = options
        self.stateful = bool(stateful)
        self.max_batch_size = int(max_batch_size)
        self.dropout = float(dropout)
        self.implementation = contextual_encoder.implementation
        self.vocabulary = vocabulary
        self.token_embedder = token_embedder
        self.word_embedder = word_embedder
        self.contextual_encoder = contextual_encoder
        self.init_module_habits()

    def __call__(self, inputs, *args, **kwargs):
        # Ids with values are checked before Keras dispatches the call, which would wrap
        # our one-line error in its own (keras_elmo.models.input_checks).
        check_model_inputs(inputs, self, "BiLM")
        return super().__call__(backend.as_backend_values(inputs), *args, **kwargs)

    def call(self, inputs, training=None, mask=None, inputs_checked=False, **kwargs):
        if training is None:  # PyTorch: the module's train()/eval() mode; else inference
            training = self.module_training()
        # JAX, called on values: the whole call as one compiled function (see
        # keras_elmo/backend/jax_compiled_calls.py); elsewhere None, and the call goes on.
        if not kwargs and mask is None and not inputs_checked:
            compiled = backend.compiled_call(
                self, inputs, training=bool(training),
                max_batch_size=self.max_batch_size if self.stateful else None)
            if compiled is not None:
                return compiled
        # `{"char_ids": ...}`, what `vocabulary_batch_to_ids` gives a vocabulary without
        # words, is this model's one tensor (Keras would take it, with a warning per call).
        if isinstance(inputs, dict) and getattr(self, "word_embedder", None) is None:
            inputs = self.split_inputs(inputs)[0]
        if not inputs_checked:  # `inputs_checked`: by the caller, on the host
            self.check_inputs(inputs)
        return super().call(inputs, training=training, mask=mask, **kwargs)

    def check_inputs(self, inputs):
        """Refuses char ids (and a word model's word ids) out of the model's range: at once
        for ids with values, inside a traced call where it runs (TensorFlow's assertion
        op, JAX's callback; `keras_elmo.backend.check_id_range`)."""
        if isinstance(inputs, dict):
            char_ids, word_ids = inputs.get("char_ids"), inputs.get("word_ids")
        elif isinstance(inputs, (list, tuple)):  # a functional model's inputs, in order
            char_ids, word_ids = inputs[0], inputs[1] if len(inputs) > 1 else None
        else:
            char_ids, word_ids = inputs, None
        if char_ids is not None:
            check_char_id_range(ops.cast(char_ids, "int32"), self.options.num_characters)
        if word_ids is not None and self.word_embedder is not None:
            self.word_embedder._check_id_range(ops.cast(word_ids, "int32"))

    @classmethod
    def from_weights(cls, options_file, weight_file, **kwargs):
        """A `BiLM` with the weights of a published-layout `weights.hdf5`.

        Args:
            options_file: path or http(s) URL of options.json (or a dict / `BiLMOptions`).
            weight_file: path or http(s) URL of weights.hdf5 in the bilm-tf / AllenNLP
                layout. Two URLs (AllenNLP's habit) are downloaded into the cache once and
                checked at every later use, as `keras_elmo.load_bilm` does.
            **kwargs: passed to the constructor (`stateful`, `name`, ...).

        Example:
        >>> bilm = BiLM.from_weights(options_url, weights_url)  # doctest: +SKIP
        """
        from keras_elmo.formats import weight_file as weight_format
        from keras_elmo.pretrained.resolve import is_url, resolve_model

        if is_url(options_file) or is_url(weight_file):
            local = resolve_model(options_file=options_file, weight_file=weight_file)
            options_file, weight_file = local.options_file, local.weight_file
        bilm = cls(options_file, zero_init=True, **kwargs)  # no draws the file overwrites
        weight_format.load_bilm_weights(bilm, weight_file)
        return bilm

    @classmethod
    def from_preset(cls, preset, **kwargs):
        """A `BiLM` of a published model's catalog name (`keras-elmo models` lists them),
        the URL of a model archive, or a model directory of any kind: downloaded into the
        cache once and checked at every later use (`keras_elmo.load_bilm`).

        Args:
            preset: str, a name (`"elmo-small"`, `"efml-zhs"`), a URL or a directory.
            **kwargs: passed to the constructor (`dtype`, `stateful`, `name`, ...).

        Example:
        >>> bilm = BiLM.from_preset("elmo-small")  # doctest: +SKIP
        """
        from keras_elmo.pretrained.resolve import resolve_files

        return cls.from_model_files(resolve_files(preset), **kwargs)

    @classmethod
    def from_model_files(cls, files, **kwargs):
        """A `BiLM` of the `keras_elmo.formats.model_files.ModelFiles` of a local model
        directory or pair (`resolve_model_files`): an ELMoForManyLangs directory by
        `from_efml`, a TF1 Hub module by `from_tfhub_module`, a published pair by
        `from_weights`, with a vocabulary model's vocabulary (char.dic, word.dic) read
        beside it.

        Args:
            files: `ModelFiles`.
            **kwargs: passed to the constructor (`dtype`, `stateful`, `name`, ...).
        """
        from keras_elmo.formats.model_vocabulary import read_model_vocabulary
        from keras_elmo.formats.options import BiLMOptions

        if files.efml_dir is not None:
            return cls.from_efml(files.efml_dir, **kwargs)
        if files.module_dir is not None:
            return cls.from_tfhub_module(files.module_dir, verify_checksums=not files.checked,
                                         **kwargs)
        options = BiLMOptions.from_file(files.options_file)
        vocabulary = read_model_vocabulary(files, options) if options.char_vocabulary else None
        return cls.from_weights(options, files.weight_file, vocabulary=vocabulary, **kwargs)

    @classmethod
    def from_efml(cls, directory, **kwargs):
        """A `BiLM` with the weights of an ELMoForManyLangs model directory, as downloaded.

        The directory is recognised by its files (`keras_elmo.formats.efml_model.
        is_efml_model_dir`) and read without torch; the model is a vocabulary model
        (docs/model.md section 10) whose char ids, and word ids if it has a word table,
        come from `efml_vocabulary(directory)` and `vocabulary_batch_to_ids`
        (`keras_elmo.formats.efml_weights`, `keras_elmo.text.token_vocabulary`). Stateless
        like every `BiLM`: EFML's own encoder carries its LSTM state from batch to batch,
        so the two agree on EFML's first batch after loading.

        Args:
            directory: the model directory (config.json, char.dic, [word.dic],
                token_embedder.pkl, encoder.pkl, the model configuration).
            **kwargs: passed to the constructor (`dtype`, `stateful`, `name`, ...).

        Raises:
            FileNotFoundError: the directory or one of its files is missing.
            ValueError: a file does not fit (one line naming it); nothing is loaded.
        """
        from keras_elmo.formats import efml_weights

        model = efml_weights.read_efml_model(directory)
        bilm = cls(efml_weights.efml_options(model), zero_init=True,
                   vocabulary=efml_weights.efml_vocabulary(model), **kwargs)
        efml_weights.load_efml_weights(bilm, model)
        return bilm

    @classmethod
    def from_tfhub_module(cls, directory, verify_checksums=True, **kwargs):
        """A `BiLM` with the weights of a TF1 Hub module directory (Google's `elmo` 1-3,
        DeepPavlov's, any module bilm-tf's graph code made), read without TensorFlow.

        The options come from the checkpoint's shapes and the graph's constants
        (`keras_elmo.formats.tfhub_module`); the module's trained mix is not part of the
        biLM: `ElmoLayer.from_preset` starts from it. Stateless like every `BiLM`: the
        module's LSTMs carry their state across calls, so the two agree on the module's
        first call after loading (`stateful=True` carries it as the module does).

        Args:
            directory: the module directory (tfhub_module.pb, saved_model.pb, variables/),
                unpacked.
            verify_checksums: check every tensor's CRC-32C (False where the download cache
                has checked the files: `resolve_files`).
            **kwargs: passed to the constructor (`dtype`, `stateful`, `name`, ...).

        Raises:
            FileNotFoundError: the directory or one of its files is missing.
            ValueError: a variable or graph constant does not fit (one line naming it);
                nothing is loaded.

        Example:
        >>> bilm = BiLM.from_tfhub_module("elmo_3")  # tar -xzf 3.tar.gz -C elmo_3  # doctest: +SKIP
        """
        from keras_elmo.formats import weight_file as weight_format
        from keras_elmo.formats.options import BiLMOptions
        from keras_elmo.formats.tfhub_module import read_tfhub_module

        module = read_tfhub_module(directory, verify_checksums=verify_checksums)
        bilm = cls(BiLMOptions.from_dict(module.options), zero_init=True, **kwargs)
        weight_format.load_bilm_arrays(bilm, module.arrays, f"TF Hub module {directory}")
        return bilm

    @property
    def num_output_layers(self):
        """`L + 1`: the token layer and one per biLSTM layer."""
        return self.options.num_layers + 1

    @property
    def output_dim(self):
        """Size of every representation: `2 * projection_dim`."""
        return self.options.output_dim

    # === Entry point for precomputed token vectors (keras_elmo.TokenEmbeddingCache) ===
    def layers_from_token_embeddings(self, token_embeddings, mask):
        """The biLM's outputs from context-insensitive token vectors instead of char ids.

        Runs everything after the token encoder, as the model's call does: the `<S>` and
        `</S>` vectors (`boundary_token_embeddings()`) frame each sentence, the biLSTM runs,
        layer 0 is `[x; x]` and the frame is dropped. With `token_embeddings =
        token_embeddings(char_ids)` the result equals `self(char_ids)`.

        Args:
            token_embeddings: float `(batch, T, projection_dim)`, the caller's tokens (no
                boundaries); values at padded positions are ignored.
            mask: bool `(batch, T)`, True on real tokens, which come first in each row.

        Returns:
            the same dict as calling the model: `"layers"` float32
            `(batch, L + 1, T, 2 * projection_dim)`, zero past each sentence's end, and
            `"mask"` bool `(batch, T)`.

        Example:
        >>> ids = keras_elmo.batch_to_ids([["a", "b"], ["c"]])
        >>> vectors = bilm.token_embeddings(ids)  # (2, 2, P)
        >>> out = bilm.layers_from_token_embeddings(vectors, ops.any(ids != 0, axis=-1))
        """
        mask = ops.cast(mask, "bool")
        layers = contextual_layers(self._framing_layers(),
                                   ops.cast(token_embeddings, self.compute_dtype), mask,
                                   self.boundary_token_embeddings())
        return {"layers": layers, "mask": mask}

    def layers_from_packed_token_embeddings(self, token_embeddings, mask, sequence_starts,
                                            boundary_embeddings=None):
        """The biLM's layers over rows that hold several sentences back to back.

        A row holds sequences `<S> t1 ... tn </S>` one after the other: the caller places
        the tokens' vectors and marks each sequence's start; the frame's vectors go to each
        sequence's ends and the biLSTM runs from a zero state at every sequence, so each
        sentence's layers are its own alone (`keras_elmo.embedding.row_packing`). Every
        position is returned, the frame too.

        Args:
            token_embeddings: float `(rows, S, projection_dim)`: the tokens' vectors (no
                frame) at their positions; values at frame positions and past each row's
                end are ignored.
            mask: bool `(rows, S)`, True on the rows' positions (first in each row).
            sequence_starts: bool `(rows, S)`, True at each sequence's `<S>`; a sequence
                ends with its `</S>` just before the next start, or at its row's end.
            boundary_embeddings: `(2, projection_dim)`, the `<S>` and `</S>` vectors if the
                caller has them (`boundary_token_embeddings()`); None: computed here.

        Returns:
            float32 `(rows, L + 1, S, 2 * projection_dim)`: layer 0 `[x; x]`, then the
            biLSTM's layers; zero past each row's end.

        Example:
        >>> x = bilm.token_embeddings(keras_elmo.batch_to_ids([["a", "b"]]))[0]  # (2, P)
        >>> row = ops.stack([x[0], x[0], x[1], x[0], x[0], x[1], x[0]])[None]  # "a b", "b"
        >>> starts = np.array([[1, 0, 0, 0, 1, 0, 0]], bool)
        >>> out = bilm.layers_from_packed_token_embeddings(row, np.ones((1, 7), bool), starts)
        >>> out.shape  # (1, L + 1, 7, 2P): [:, :, 1:3] is "a b", [:, :, 5:6] is "b"
        """
        boundaries = (self.boundary_token_embeddings() if boundary_embeddings is None
                      else boundary_embeddings)  # (2, P)
        return contextual_layers(self._framing_layers(),
                                 ops.cast(token_embeddings, self.compute_dtype),
                                 ops.cast(mask, "bool"), boundaries, sequence_starts)

    def _framing_layers(self):
        """`(add, contextual_encoder, remove)`: the layers of `contextual_layers`."""
        return (self.get_layer("add_sentence_boundaries"), self.contextual_encoder,
                self.get_layer("remove_sentence_boundaries"))

    def boundary_token_embeddings(self):
        """The `<S>` and `</S>` token vectors (layer 0's `x` of the frame), `(2, P)`."""
        return self.token_embeddings(self.boundary_token_ids())[0]

    def boundary_token_ids(self):
        """The model's inputs for the two tokens `<S>` `</S>`, as `batch_to_ids` gives them:
        char ids `(1, 2, max_characters_per_token)`, or a word model's dict with word ids
        `(1, 2)` beside (int32 tensors)."""
        char_ids = ops.convert_to_tensor([list(self.options.boundary_char_ids)], "int32")
        if self.word_embedder is None:
            return char_ids
        return {"char_ids": char_ids, "word_ids": ops.convert_to_tensor(
            [list(self.options.boundary_word_ids)], "int32")}

    def batch_to_ids(self, sentences):
        """The model's inputs for tokenised sentences (numpy; no TensorFlow op).

        A byte model's char ids (`keras_elmo.batch_to_ids`), or a vocabulary model's
        `{"char_ids": ..., ["word_ids": ...]}` from its vocabulary
        (`keras_elmo.vocabulary_batch_to_ids`): what calling the model takes.

        Args:
            sentences: list of sentences, each a list of `str` tokens (may be empty).

        Example:
        >>> bilm(bilm.batch_to_ids([["北京", "欢迎", "你"], []]))["layers"]  # any model
        """
        if not self.options.char_vocabulary:
            from keras_elmo.text.characters import batch_to_ids

            return batch_to_ids(sentences, self.options.max_characters_per_token)
        self.require_vocabulary("BiLM.batch_to_ids")
        ids = vocabulary_batch_to_ids(self.vocabulary, sentences)
        return ids if self.word_embedder is not None else ids["char_ids"]

    def require_vocabulary(self, what):
        """Refuses a vocabulary model without its `vocabulary` where `what` turns tokens
        into ids (a byte model needs none: its ids are UTF-8 bytes).

        Raises:
            ValueError: the options have `char_vocabulary` and the model no vocabulary.
        """
        if self.options.char_vocabulary and self.vocabulary is None:
            raise ValueError(f"{what} needs the token vocabulary of this vocabulary model "
                             "(char_vocabulary); received a BiLM built without one: load it "
                             "with BiLM.from_efml(DIR) or keras_elmo.load_bilm(DIR), or pass "
                             "vocabulary=TokenVocabulary(...).")

    def token_embeddings(self, inputs, training=None):
        """Context-insensitive token vectors (layer 0's `x`) of the model's inputs.

        Args:
            inputs: what the model takes: char ids `(batch, T, max_characters_per_token)`,
                or the dict `{"char_ids": ..., "word_ids": (batch, T)}` (word models).
            training: passed to the token encoder (its dropout-free layers ignore it).

        Returns:
            `(batch, T, projection_dim)` in the model's compute dtype: the char encoder's
            output, plus `WordEmbedding`'s in a word model (word ids taken as 0 where the
            char row is padding, as the model's call does).

        Example:
        >>> bilm.token_embeddings(keras_elmo.batch_to_ids([["a", "b"]])).shape  # (1, 2, P)
        """
        self.check_inputs(inputs)
        char_ids, word_ids = self.split_inputs(inputs)
        vectors = self.token_embedder(char_ids, training=training)  # (batch, T, P)
        if self.word_embedder is not None:
            words = ops.where(token_mask(char_ids), word_ids, 0)  # (batch, T)
            vectors = vectors + self.word_embedder(words)
        return vectors

    def split_inputs(self, inputs):
        """`(char_ids, word_ids or None)` of the model's inputs (a tensor or a dict).

        Raises:
            ValueError: a word model given no word ids, or a dict with other keys.
        """
        if not isinstance(inputs, dict):
            if self.word_embedder is not None:
                raise ValueError("This BiLM has a word embedding: it takes {'char_ids': ..., "
                                 "'word_ids': ...} (keras_elmo.vocabulary_batch_to_ids); "
                                 "received char ids alone.")
            return inputs, None
        expected = {"char_ids", "word_ids"} if self.word_embedder is not None else {"char_ids"}
        if set(inputs) != expected:
            raise ValueError(f"This BiLM takes the keys {sorted(expected)}; received "
                             f"{sorted(inputs)}.")
        return inputs["char_ids"], inputs.get("word_ids")

    def reset_states(self):
        """Zeroes the carried LSTM state of a stateful biLM (no-op when stateless)."""
        self.contextual_encoder.reset_states()

    def get_config(self):
        return {"options": self.options.to_dict(), "stateful": self.stateful,
                "max_batch_size": self.max_batch_size, "dropout": self.dropout,
                "implementation": self.implementation,
                "name": self.name,
                **({"vocabulary": self.vocabulary.get_config()} if self.vocabulary else {}),
                "trainable": self.trainable,
                # The sublayers hold the biLM's policy (a functional model keeps float32).
                "dtype": keras.dtype_policies.serialize(self.token_embedder.dtype_policy)}

    @classmethod
    def from_config(cls, config):
        check_config_keys(cls, config)
        return cls(**config)


def contextual_layers(framing_layers, token_embeddings, mask, boundaries,
                      sequence_starts=None):
    """The one framing path of a biLM: frame each sentence, run the biLSTM, put layer 0
    `[x; x]` first, drop the frame (kept in packed rows). The model's call, token vectors
    given and packed rows all run it.

    Args:
        framing_layers: `(AddSentenceBoundaries, ResidualBiLSTM, RemoveSentenceBoundaries)`.
        token_embeddings: `(batch, T, P)`, the caller's tokens (packed rows: every position).
        mask: bool `(batch, T)`.
        boundaries: the `<S>` and `</S>` vectors, `(2, P)` or per row `(batch, 2, P)`.
        sequence_starts: None, or bool `(batch, T)` of packed rows.

    Returns:
        float32 `(batch, L + 1, T, 2P)`, zero past each sentence's (each row's) end.
    """
    add_boundaries, encoder, remove_boundaries = framing_layers
    packed = sequence_starts is not None
    framed, framed_mask = add_boundaries(token_embeddings, boundaries, mask=mask,
                                         sequence_starts=sequence_starts)  # (batch, S, P)
    # A stateless biLM does not compute the outputs at the frame that are dropped.
    lstm_layers = encoder(framed, mask=framed_mask, sequence_starts=sequence_starts,
                          skip_boundary_steps=not (packed or encoder.stateful))  # (b, L, S, 2P)
    layer0 = ops.concatenate([framed, framed], axis=-1)[:, None]  # (batch, 1, S, 2P)
    layers = ops.concatenate([layer0, lstm_layers], axis=1)  # (batch, L + 1, S, 2P)
    if packed:
        return ops.cast(layers, "float32")
    return remove_boundaries(layers, mask=framed_mask)  # (batch, L + 1, T, 2P), float32
