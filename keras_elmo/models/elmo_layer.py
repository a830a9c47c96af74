"""`ElmoLayer`: ELMo representations as one Keras layer (frozen biLM + trainable mixes).

The layer holds a `BiLM` backbone object (the one a training run produced, one loaded from
a weight file, or a fresh one built from options) and adds the task's scalar mixes.
"""

import keras
from keras import ops

from keras_elmo import backend
from keras_elmo.formats.options import as_options
from keras_elmo.layers.scalar_mix import ScalarMix
from keras_elmo.models.bilm import BiLM
from keras_elmo.models.input_checks import accepted_inputs, check_model_inputs
from keras_elmo.models.string_tokens import (is_string_tensor, string_token_ids,
                                             string_token_mask)
from keras_elmo.text.characters import token_mask
from keras_elmo.validation import check_config_keys, check_int


@keras.saving.register_keras_serializable(package="keras_elmo")
class ElmoLayer(backend.ModuleHabits, keras.layers.Layer):
    """Contextual word vectors for a task: `gamma * sum_j softmax(s)_j * h_j` over the biLM.

    The biLM is frozen by default; each of the `num_output_representations` mixes has its
    own trainable `ScalarMix` (the paper uses two when ELMo enters a model at its input and
    its output). The Keras mask (`(batch, num_tokens)`, True on real tokens) propagates to
    the next layers.

    Args:
        bilm: the backbone: a `BiLM` object (held as it is, not copied), or `BiLMOptions`,
            an options.json dict or path, from which a new, randomly initialised `BiLM` is
            built.
        num_output_representations: int >= 0, how many mixes to return (1).
        do_layer_norm: bool, layer-normalise each biLM layer before mixing (False).
        dropout: float, dropout on each mix's output in training (0.0; AllenNLP uses 0.5).
        l2_coef: float, L2 penalty on the mix weights `s` (0.0; bilm-tf suggests 1e-3).
        return_layers: bool, also return the stacked biLM layers (False).
        trainable_bilm: bool, fine-tune the biLM's weights too (False); it sets the held
            `BiLM` object's `trainable`.
        stateful: bool, carry the biLM's LSTM state across calls as bilm-tf does (False);
            for a `BiLM` object given as `bilm`, its own `stateful` must agree.
        **kwargs: base layer arguments.

    Call arguments:
        inputs: one of
            - int32 char ids `(batch, num_tokens, max_characters_per_token)`
              from `keras_elmo.batch_to_ids` (`bilm.batch_to_ids`, `ElmoPreprocessor`);
            - a word model's dict `{"char_ids": ..., "word_ids": (batch, num_tokens)}`;
            - on Keras' TensorFlow backend also tf.string `(batch, num_tokens)`, padded
              with `""`, or a tf.string `tf.RaggedTensor` `(batch, (num_tokens))`. A
              vocabulary model (an ELMoForManyLangs one, `keras_elmo.load_bilm`) takes
              them too: its `vocabulary` turns them into ids in the graph. On JAX and
              PyTorch strings go through `keras_elmo.ElmoPreprocessor` first.
        training: bool, enables the mixes' dropout (and the biLM's own dropout only when
            `trainable_bilm`: a frozen biLM always runs in inference mode).

    Returns:
        float32 `(batch, num_tokens, 2 * projection_dim)` when one representation is asked
        for; a list of them when several; with `return_layers`, a dict
        `{"elmo": <that>, "layers": (batch, L + 1, num_tokens, 2 * projection_dim)}`.
        Padded positions are zero.

    An empty string token is no token wherever it stands (`"a  b".split(" ")` makes one):
    its output is zero and its mask False, and the other tokens get the vectors of the
    sentence without it.

    Example:
    >>> elmo = ElmoLayer.from_weights("options.json", "weights.hdf5")  # doctest: +SKIP
    >>> tokens = keras.Input(shape=(None,), dtype="string")
    >>> x = ElmoLayer(keras_elmo.BiLM(keras_elmo.BiLMOptions.tiny()))(tokens)  # (batch, T, 16)
    >>> x = keras.layers.Bidirectional(keras.layers.LSTM(32, return_sequences=True))(x)
    >>> tags = keras.layers.Dense(45, activation="softmax")(x)
    >>> model = keras.Model(tokens, tags)
    """

    def __init__(self, bilm, num_output_representations=1, do_layer_norm=False,
                 dropout=0.0, l2_coef=0.0, return_layers=False, trainable_bilm=False,
                 stateful=False, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(bilm, BiLM):
            bilm = BiLM(as_options(bilm), stateful=stateful, name="bilm",
                        dtype=self.dtype_policy)
        elif bool(stateful) != bilm.stateful:
            raise ValueError(f"stateful={stateful!r} differs from the given BiLM's "
                             f"stateful={bilm.stateful!r}; expected the same (or pass options "
                             "to build a new BiLM).")
        check_int("num_output_representations", num_output_representations, minimum=0)
        if num_output_representations == 0 and not return_layers:
            raise ValueError("ElmoLayer would return nothing: set num_output_representations "
                             ">= 1 or return_layers=True.")
        self.num_output_representations = num_output_representations
        self.do_layer_norm = bool(do_layer_norm)
        self.dropout = float(dropout)
        self.l2_coef = float(l2_coef)
        self.return_layers = bool(return_layers)
        self.trainable_bilm = bool(trainable_bilm)
        self.supports_masking = True
        self.bilm = bilm
        self.bilm.trainable = self.trainable_bilm
        # A vocabulary model's string tokens go through its vocabulary's lookup tables
        # (TensorFlow's: only its backend takes strings).
        self._lookup = None
        if bilm.vocabulary is not None and backend.NAME == "tensorflow":
            from keras_elmo.text.vocabulary_lookup import VocabularyLookup

            self._lookup = VocabularyLookup(bilm.vocabulary)
        self.scalar_mixes = [
            ScalarMix(do_layer_norm=self.do_layer_norm, dropout=self.dropout,
                      l2_coef=self.l2_coef, name=f"scalar_mix_{i}", dtype=self.dtype_policy)
            for i in range(num_output_representations)]
        # Every weight exists once the mixes are built (the biLM is): built now, the layer
        # works where a call has not built it, as JAX's `stateless_call` and a torch
        # optimizer over `parameters()`.
        self.build()
        self.init_module_habits()

    @property
    def options(self):
        """The held biLM's `BiLMOptions`."""
        return self.bilm.options

    @property
    def stateful(self):
        """Whether the held biLM carries its LSTM state across calls."""
        return self.bilm.stateful

    @classmethod
    def from_weights(cls, options_file, weight_file, **kwargs):
        """An `ElmoLayer` over a published-layout biLM (`options.json`, `weights.hdf5`: two
        paths, or two http(s) URLs fetched into the cache as `BiLM.from_weights` does).

        `**kwargs` are the constructor's (`stateful` reaches the biLM, `dtype` too).
        """
        bilm = BiLM.from_weights(options_file, weight_file,
                                 stateful=kwargs.get("stateful", False), name="bilm",
                                 dtype=kwargs.get("dtype"))
        return cls(bilm, **kwargs)

    @classmethod
    def from_preset(cls, preset, use_model_mix=True, **kwargs):
        """An `ElmoLayer` over a published model's catalog name, the URL of a model archive
        or a model directory of any kind (`BiLM.from_preset`).

        A model that carries a trained mix starts every mix from it: a TF Hub module's own
        (`ElmoLayer.from_preset("tfhub-elmo-3")` returns the module's `elmo` output), or the
        `scalar_mix.json` beside a model's weights; else the even mix (`softmax(0)`,
        `gamma` 1). The mix stays trainable.

        Args:
            preset: str, a name (`"elmo-small"`, `"tfhub-elmo-3"`), a URL or a directory.
            use_model_mix: bool, start from the model's trained mix when it has one (True).
            **kwargs: the constructor's (`stateful` reaches the biLM, `dtype` too).

        Example:
        >>> elmo = ElmoLayer.from_preset("elmo-small", dropout=0.5)  # doctest: +SKIP
        >>> elmo = ElmoLayer.from_preset("tfhub-elmo-3")  # TF Hub's `elmo`  # doctest: +SKIP
        """
        from keras_elmo.formats.model_mix import model_mix
        from keras_elmo.pretrained.resolve import resolve_files

        files = resolve_files(preset)
        bilm = BiLM.from_model_files(files, stateful=kwargs.get("stateful", False),
                                     name="bilm", dtype=kwargs.get("dtype"))
        mix = model_mix(files, bilm.num_output_layers) if use_model_mix else None
        if mix is not None:
            kwargs.setdefault("do_layer_norm", mix.do_layer_norm)
        layer = cls(bilm, **kwargs)
        if mix is not None:
            for scalar_mix in layer.scalar_mixes:
                scalar_mix.scalar_parameters.assign(
                    ops.convert_to_tensor(mix.scalar_parameters, "float32"))
                scalar_mix.gamma.assign(ops.reshape(ops.convert_to_tensor(
                    mix.gamma, "float32"), tuple(scalar_mix.gamma.shape)))
        return layer

    def build(self, input_shape=None):
        layers_shape = (None, self.bilm.num_output_layers, None, self.bilm.output_dim)
        for mix in self.scalar_mixes:
            if not mix.built:  # built in __init__: a later build() changes nothing
                mix.build(layers_shape)

    def __call__(self, inputs, *args, **kwargs):
        # Before Keras converts the inputs: its own error for strings says nothing of ours.
        if backend.NAME != "tensorflow" and holds_strings(inputs):
            raise ValueError(f"ElmoLayer takes char ids on Keras' {backend.NAME} backend; "
                             "received string tokens: turn them into ids first with "
                             "keras_elmo.ElmoPreprocessor (preprocessor(tokens) -> ids), or "
                             "bilm.batch_to_ids(sentences).")
        if not holds_strings(inputs):  # ids with values: refused here, in our one line
            check_model_inputs(inputs, self.bilm, "ElmoLayer", accepts_strings=True)
        return super().__call__(backend.as_backend_values(inputs), *args, **kwargs)

    def model_inputs(self, inputs):
        """What the held biLM takes, for any accepted input form: char ids `(batch, T,
        max_chars)`, or a word model's `{"char_ids": ..., "word_ids": (batch, T)}`."""
        if isinstance(inputs, dict):
            return {key: ops.cast(value, "int32") for key, value in inputs.items()}
        if is_string_tensor(inputs) or _is_str_array(inputs):
            if self.options.char_vocabulary:
                self.bilm.require_vocabulary("ElmoLayer given string tokens")
            return string_token_ids(inputs, self.options, self._lookup,
                                    with_words=self.bilm.word_embedder is not None)
        if not is_string_tensor(inputs) and type(inputs).__name__ == "RaggedTensor":
            raise ValueError("A ragged input must hold tf.string tokens; received dtype "
                             f"{inputs.dtype.name}.")
        inputs = ops.convert_to_tensor(inputs)
        dtype = keras.backend.standardize_dtype(inputs.dtype)
        if "int" in dtype and len(inputs.shape) == 3:
            return ops.cast(inputs, "int32")
        raise ValueError(f"{accepted_inputs('ElmoLayer', self.options, accepts_strings=True)}; "
                         f"received dtype {dtype}, shape {tuple(inputs.shape)}.")

    def call(self, inputs, training=None, inputs_checked=False):
        if training is None:  # PyTorch: the module's train()/eval() mode; else inference
            training = self.module_training()
        # JAX, called on values: the whole call as one compiled function (see
        # keras_elmo/backend/jax_compiled_calls.py); elsewhere None, and the call goes on.
        compiled = backend.compiled_call(self, inputs, training=bool(training),
                                         max_batch_size=self._max_rows())
        if compiled is not None:
            return compiled
        # A frozen biLM runs in inference mode (no dropout of a trained run's backbone).
        outputs = self.bilm(self.model_inputs(inputs),
                            training=training if self.trainable_bilm else False,
                            inputs_checked=inputs_checked)
        layers, mask = outputs["layers"], outputs["mask"]
        mixes = [mix(layers, mask=mask, training=training) for mix in self.scalar_mixes]
        elmo = mixes[0] if len(mixes) == 1 else mixes
        if self.return_layers:
            return {"elmo": elmo, "layers": layers} if mixes else layers
        return elmo

    def _max_rows(self):
        """The most rows a call takes (a stateful biLM's `max_batch_size`), or None."""
        return self.bilm.max_batch_size if self.stateful else None

    def compute_mask(self, inputs, mask=None):
        if self.return_layers:
            return None
        # keras.ops, so that the mask is also a node of a functional model being built.
        if isinstance(inputs, dict):  # a word model's ids: (batch, T, chars) -> (batch, T)
            return self.compute_mask(inputs["char_ids"])
        elif isinstance(inputs, keras.KerasTensor) and inputs.dtype == "string":
            mask = ops.not_equal(inputs, "")  # (batch, T) -> (batch, T): "" is no token
        elif is_string_tensor(inputs) or _is_str_array(inputs):
            mask = string_token_mask(inputs)  # padded or ragged (batch, (n)) -> (batch, T)
        else:  # (batch, T, chars) -> (batch, T)
            mask = backend.values_token_mask(inputs)  # JAX on values: on the host
            mask = token_mask(inputs) if mask is None else mask
        return [mask] * len(self.scalar_mixes) if len(self.scalar_mixes) > 1 else mask

    def compute_output_spec(self, inputs, training=False):
        if isinstance(inputs, dict):
            inputs = inputs["char_ids"]
        batch, steps = inputs.shape[0], inputs.shape[1]
        dim = self.bilm.output_dim
        one = keras.KerasTensor((batch, steps, dim), dtype=self.compute_dtype)
        elmo = one if len(self.scalar_mixes) == 1 else [
            keras.KerasTensor((batch, steps, dim), dtype=self.compute_dtype)
            for _ in self.scalar_mixes]
        if not self.return_layers:
            return elmo
        # The biLM's own output dtype (float32 vectors from a bfloat16 biLM too).
        layers = keras.KerasTensor((batch, self.bilm.num_output_layers, steps, dim),
                                   dtype=self.bilm.compute_dtype)
        return {"elmo": elmo, "layers": layers} if self.scalar_mixes else layers

    def reset_states(self):
        """Clears the carried LSTM state of a stateful layer."""
        self.bilm.reset_states()

    def get_config(self):
        config = super().get_config()
        config.update(bilm=keras.saving.serialize_keras_object(self.bilm),
                      num_output_representations=self.num_output_representations,
                      do_layer_norm=self.do_layer_norm, dropout=self.dropout,
                      l2_coef=self.l2_coef, return_layers=self.return_layers,
                      trainable_bilm=self.trainable_bilm, stateful=self.stateful)
        return config

    @classmethod
    def from_config(cls, config):
        check_config_keys(cls, config)
        config = dict(config)
        config["bilm"] = keras.saving.deserialize_keras_object(config["bilm"])
        return cls(**config)


def _is_str_array(x):
    """A numpy array of str or bytes (string tokens given as numpy)."""
    return getattr(getattr(x, "dtype", None), "kind", None) in ("U", "S", "O")


def holds_strings(inputs):
    """True when `inputs` holds string tokens in any form: a string tensor (TensorFlow's,
    a Keras input's), a numpy array of str, nested lists of str; a dict's values too."""
    if isinstance(inputs, dict):
        return any(holds_strings(value) for value in inputs.values())
    if isinstance(inputs, (list, tuple)):  # its first leaf tells (a list of sentences)
        return bool(inputs) and holds_strings(inputs[0])
    if isinstance(inputs, (str, bytes)) or _is_str_array(inputs):
        return True
    dtype = getattr(inputs, "dtype", None)
    return str(getattr(dtype, "name", dtype)) in ("string", "str")
