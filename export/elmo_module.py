"""`ElmoModule`: a `tf.Module` whose signatures serve ELMo embeddings (TF Hub names).

Signatures (`P` = projection_dim, `L` = biLSTM layers, `C` = max_characters_per_token):

| signature | inputs |
|---|---|
| `tokens` | `tokens` tf.string `(batch, max_len)` padded with `""`; `sequence_len` int32 `(batch,)` |
| `default` (= `serving_default`) | `text` tf.string `(batch,)`, untokenised sentences |
| `char_ids` | `char_ids` int32 `(batch, max_len, C)` from `keras_elmo.batch_to_ids` (a word model's also `word_ids` int32 `(batch, max_len)`: `bilm.batch_to_ids`) |

Every signature returns float32 `word_emb` `(batch, max_len, P)`, the char-CNN token
layer; `lstm_outputs1` ... `lstm_outputs{L}` and `elmo` (the scalar mix), all
`(batch, max_len, 2P)`; `default` `(batch, 2P)`, the mean of `elmo` over the real tokens
(zeros for an empty sentence; a DeepPavlov module's export: the mix without `gamma`, as
DeepPavlov's `default` is); and bool `sequence_mask` `(batch, max_len)`, as TF Hub's
ELMo documents them. The `default` signature also returns `tokens` tf.string
`(batch, max_len)`, the in-graph whitespace split (padded with `""`), so a client can align
the vectors with its words. Positions past a sentence's end are exactly zero.

Input contract (docs/serving.md "Input contract"): one vector per token, always. Invalid
UTF-8 bytes are dropped inside their token, which stays (`default` splits the raw bytes,
`keras_elmo.export.raw_text`); a token longer than `C - 2` bytes is cut there; a sentence
longer than `max_length` tokens is embedded in windows of `max_length` tokens
(`keras_elmo.text.sentence_windows`), never refused; an empty sentence is an all-False
row of `sequence_mask`.

Trainable parts, as in TF Hub's ELMo: the module owns its variables (copies of the Keras
weights, taken when it is made); `trainable_variables` are the mix's `s` (`L + 1` scalars)
and `gamma`, `variables` all of them; the biLM's are non-trainable unless
`trainable_bilm=True`. Both lists are saved with the module, so `hub.KerasLayer(path,
trainable=True)` and `keras.layers.TFSMLayer(path, trainable=True)` train the mix only.
`__call__` (what `hub.KerasLayer` calls without a signature) takes the `default`, `tokens`
or `char_ids` inputs: `text`, `{"tokens": ..., "sequence_len": ...}` or `char_ids`.
Every function is traced for inference, with plain autodiff ops (the biLM's plain loop, no
`tf.custom_gradient`), so it can be called under a `GradientTape` after loading.

Only core TensorFlow ops are used (no tensorflow-text), so the SavedModel loads with
TensorFlow alone. A vocabulary model (an ELMoForManyLangs one) carries its character and
word vocabularies as `tf.lookup.StaticHashTable`s (`keras_elmo.text.vocabulary_lookup`):
`tokens` and `default` take raw strings for it too.
"""

import tensorflow as tf

from keras_elmo import constants
from keras_elmo.layers.token_compaction import (compaction_order, restoring_order,
                                                take_positions)
from keras_elmo.models.bilm import BiLM
from keras_elmo.text.characters import token_mask
from keras_elmo.text.string_char_ids import tf_ragged_char_ids, tf_token_char_ids

from keras_elmo.text.sentence_windows import (DEFAULT_MAX_LENGTH, check_max_length,
                                              join_windows, split_windows)
from keras_elmo.text.vocabulary_lookup import VocabularyLookup
from keras_elmo.export.mix_weights import build_mix
from keras_elmo.export.raw_text import split_raw_text
#: Signature names, in the order `saved_model_cli` users see them documented.
SIGNATURES = ("tokens", "default", "char_ids", "serving_default")


class _Layers:
    """Holds the Keras objects out of the SavedModel's object graph: they only compute; the
    module's own variables (`ElmoModule.variables`) stand in for theirs. Also `run_bilm`,
    the biLM's `tf.function` the signatures call (set by `ElmoModule`): as an attribute of
    the module it would be tracked and saved as a function of its own."""

    def __init__(self, bilm, mix):
        self.bilm, self.mix = bilm, mix
        self.run_bilm = None
        self.copies = {}  # id(Keras variable) -> the module's tf.Variable


class ElmoModule(tf.Module):
    """ELMo embeddings behind the `tokens`, `default` and `char_ids` signatures.

    Args:
        bilm: a stateless `keras_elmo.BiLM`; the module copies its weights (and the mix's)
            into its own variables when it is made.
        scalar_mix: a built `keras_elmo.ScalarMix` over the biLM's `L + 1` layers, or None
            for the even mix `softmax(zeros)`, `gamma = 1`.
        max_length: int, tokens the biLM runs at once (512): a longer sentence is embedded
            in consecutive windows of `max_length` tokens, each a sentence of its own
            (`keras_elmo.text.sentence_windows`); never refused, never truncated.
        trainable_bilm: bool, make the biLM's variables trainable too, as TF Hub's elmo/1
            did (False: only the mix is trainable).
        default_with_gamma: bool, `default` is the mean of `elmo` over the real tokens, as
            Google's TF Hub modules return it (True); False: the mean of the mix without
            `gamma` (`sum_j softmax(s)_j h_j`), as DeepPavlov's modules return it.
        text_input: str, the name of the `default` signature's input (`"text"`; an export
            of a TF Hub module keeps the module's: Google's `"default"`, DeepPavlov's
            `"strings"`, so that `signatures["default"](default=...)` calls still work).
        name: module name.

    Call (each attribute is a `tf.function`; see the module docstring for shapes):
        `module.tokens(tokens, sequence_len)`, `module.default(text)`,
        `module.char_ids(char_ids)` -> dict of output tensors; `module(text)`,
        `module({"tokens": ..., "sequence_len": ...})`, `module(char_ids)` the same.

    Example:
    >>> module = ElmoModule(keras_elmo.BiLM(keras_elmo.BiLMOptions.tiny()))
    >>> module.default(tf.constant(["The cat sat .", ""]))["elmo"].shape
    TensorShape([2, 4, 16])
    >>> [v.shape.as_list() for v in module.trainable_variables]  # s, gamma
    [[3], []]
    >>> tf.saved_model.save(module, "elmo/1", signatures=module.signatures())
    """

    # TF Hub's reusable-SavedModel attributes, set per instance as lists so that they are
    # saved with the module (tf.Module's computed properties of these names are not saved).
    variables = ()
    trainable_variables = ()

    def __init__(self, bilm, scalar_mix=None, max_length=DEFAULT_MAX_LENGTH,
                 trainable_bilm=False, default_with_gamma=True, text_input="text",
                 name="elmo"):
        super().__init__(name=name)
        if not isinstance(bilm, BiLM):
            raise ValueError(f"ElmoModule needs a keras_elmo.BiLM; received "
                             f"{type(bilm).__name__}.")
        bilm.require_vocabulary("ElmoModule (the SavedModel export)")
        if bilm.stateful:
            raise ValueError("ElmoModule needs a stateless BiLM (a stateful one would carry "
                             "LSTM state from one serving request to the next); rebuild it "
                             "with stateful=False and copy the weights.")
        check_max_length(max_length)
        if not isinstance(trainable_bilm, bool):
            raise ValueError(f"trainable_bilm must be True or False; received "
                             f"{trainable_bilm!r}.")
        num_layers = bilm.num_output_layers
        if scalar_mix is None:
            scalar_mix = build_mix(num_layers)
        elif not scalar_mix.built or tuple(scalar_mix.scalar_parameters.shape) != (num_layers,):
            raise ValueError(f"scalar_mix must be built over the biLM's {num_layers} layers; "
                             f"received {scalar_mix!r}.")
        if not (isinstance(text_input, str) and text_input.isidentifier()):
            raise ValueError(f"text_input must be a Python identifier (a signature input "
                             f"name); received {text_input!r}.")
        if not isinstance(default_with_gamma, bool):
            raise ValueError(f"default_with_gamma must be True or False; received "
                             f"{default_with_gamma!r}.")
        if not default_with_gamma and scalar_mix.do_layer_norm:
            raise ValueError("default_with_gamma=False (DeepPavlov's `default`) is defined "
                             "for a mix without layer normalisation; received a ScalarMix "
                             "with do_layer_norm=True.")
        self.max_length = max_length
        self.trainable_bilm = trainable_bilm
        self.default_with_gamma = default_with_gamma
        self.options = bilm.options
        self._layers = _Layers(bilm, scalar_mix)
        bilm_variables = [self._copy(v, f"bilm/{v.path}", trainable_bilm)
                          for v in bilm.trainable_variables + bilm.non_trainable_variables]
        self.scalar_parameters = self._copy(scalar_mix.scalar_parameters,
                                            "scalar_mix/scalar_parameters", True)
        self.gamma = self._copy(scalar_mix.gamma, "scalar_mix/gamma", True)
        self.trainable_variables = [self.scalar_parameters, self.gamma] + (
            bilm_variables if trainable_bilm else [])
        self.variables = bilm_variables + [self.scalar_parameters, self.gamma]
        chars = bilm.options.max_characters_per_token
        self._lookup = None
        if bilm.options.char_vocabulary:
            # Attributes of the module, so that the SavedModel saves the two tables.
            self._lookup = VocabularyLookup(bilm.vocabulary)
            self.char_table = self._lookup.char_table
            if self._lookup.word_table is not None:
                self.word_table = self._lookup.word_table
        self.has_words = bilm.word_embedder is not None
        ids_specs = [tf.TensorSpec([None, None, chars], tf.int32, name="char_ids")]
        if self.has_words:
            ids_specs.append(tf.TensorSpec([None, None], tf.int32, name="word_ids"))
        # The biLM is one function that every signature calls, so it is traced once per
        # context (here and again in `tf.saved_model.save`), not once per signature: the
        # traces of its time loops are most of an export's time.
        window_spec = (ids_specs[0] if not self.has_words else
                       {"char_ids": ids_specs[0], "word_ids": ids_specs[1]})
        self._layers.run_bilm = tf.function(self._run_bilm, input_signature=[window_spec],
                                             autograph=False)
        # No autograph: the signatures' Python branches are on Python values, and converting
        # every function they call costs seconds per trace.
        self.tokens = tf.function(self._tokens, autograph=False, input_signature=[
            tf.TensorSpec([None, None], tf.string, name="tokens"),
            tf.TensorSpec([None], tf.int32, name="sequence_len")])
        self.default = tf.function(self._default, autograph=False, input_signature=[
            tf.TensorSpec([None], tf.string, name=text_input)])
        self.char_ids = tf.function(self._char_ids, autograph=False, input_signature=ids_specs)
        # Traced now, for every input `__call__` accepts (a loaded function only has the
        # traces made before saving).
        ids_input = (ids_specs[0] if not self.has_words else
                     {"char_ids": ids_specs[0], "word_ids": ids_specs[1]})
        for spec in (self.default.input_signature[0],
                     {"tokens": self.tokens.input_signature[0],
                      "sequence_len": self.tokens.input_signature[1]},
                     ids_input):
            self.__call__.get_concrete_function(spec)

    @tf.function(autograph=False)
    def __call__(self, inputs):
        """The `default` (text `(batch,)`), `tokens` (dict) or `char_ids` outputs."""
        if isinstance(inputs, dict) and "char_ids" in inputs:
            return self.char_ids(inputs["char_ids"], inputs["word_ids"])
        if isinstance(inputs, dict):
            return self.tokens(inputs["tokens"], inputs["sequence_len"])
        if inputs.dtype == tf.string:
            return self.default(inputs)
        return self.char_ids(inputs)

    def signatures(self):
        """`{name: concrete function}` for `tf.saved_model.save(..., signatures=...)`."""
        default = self.default.get_concrete_function()
        return {"tokens": self.tokens.get_concrete_function(), "default": default,
                "char_ids": self.char_ids.get_concrete_function(),
                "serving_default": default}

    @property
    def bilm(self):
        """The exported `BiLM`."""
        return self._layers.bilm

    @property
    def scalar_mix(self):
        """The exported `ScalarMix` (the `elmo` output)."""
        return self._layers.mix

    def mix_weights(self):
        """`{"scalar_parameters": [...], "gamma": g, "do_layer_norm": b}`, current values."""
        return {"scalar_parameters": [float(v) for v in self.scalar_parameters.numpy()],
                "gamma": float(self.gamma.numpy()),
                "do_layer_norm": bool(self.scalar_mix.do_layer_norm)}

    @property
    def output_names(self):
        """Output names of the `tokens` and `char_ids` signatures."""
        lstm = [f"lstm_outputs{j}" for j in range(1, self.options.num_layers + 1)]
        return ["word_emb", *lstm, "elmo", "default", "sequence_mask"]

    # --- signatures --------------------------------------------------------------------------
    def _tokens(self, tokens, sequence_len):
        tokens = _ensure_shape(tokens, [None, None])
        sequence_len = _ensure_shape(sequence_len, [None])
        batch, width = tf.shape(tokens)[0], tf.shape(tokens)[1]
        checks = [
            tf.debugging.assert_equal(
                tf.shape(sequence_len)[0], batch,
                message="tokens signature: sequence_len must have one entry per row of tokens"),
            tf.debugging.assert_non_negative(
                sequence_len, message="tokens signature: sequence_len must be >= 0"),
            tf.debugging.assert_less_equal(
                sequence_len, width,
                message="tokens signature: sequence_len is larger than max_len, the width of "
                        "tokens"),
        ]
        with tf.control_dependencies(checks):
            steps = _longest(sequence_len)
        real = tf.sequence_mask(sequence_len, steps)  # (batch, steps)
        # Positions past sequence_len are padding whatever they hold; "" before it is no
        # token, as in `batch_to_ids`.
        if self._lookup is not None:  # a vocabulary model: its tables
            ids = self._lookup.masked_ids(tokens[:, :steps], real)
        else:
            real = tf.logical_and(real, tf.not_equal(tokens[:, :steps], ""))
            ids = tf_token_char_ids(tokens[:, :steps], self.options.max_characters_per_token)
            ids = tf.where(real[..., tf.newaxis], ids, tf.zeros_like(ids))  # (batch, steps, C)
        return self._embed_compacted(ids, width)

    def _default(self, text):
        # Raw bytes split on whitespace: a token of invalid UTF-8 is still a token.
        words = split_raw_text(_ensure_shape(text, [None]))  # (batch, (num_tokens))
        lengths = tf.cast(words.row_lengths(), tf.int32)  # (batch,)
        if self._lookup is not None:
            ids = self._lookup.ragged_ids(words)  # dict of (batch, max_len, ...)
            width = tf.shape(ids["char_ids"])[1]
        else:
            ids = tf_ragged_char_ids(words, self.options.max_characters_per_token)
            width = tf.shape(ids)[1]
        outputs = self._embed(ids, lengths, width)
        outputs["tokens"] = words.to_tensor(default_value="")  # (batch, max_len)
        return outputs

    def _char_ids(self, char_ids, word_ids=None):
        char_ids = _ensure_shape(char_ids, [None, None, self.options.max_characters_per_token])
        num_characters = self.options.num_characters
        width = tf.shape(char_ids)[1]
        checks = [
            tf.debugging.assert_non_negative(
                char_ids, message="char_ids signature: char ids must be >= 0"),
            tf.debugging.assert_less(
                char_ids, tf.constant(num_characters, tf.int32),
                message=f"char_ids signature: char ids must be < {num_characters} "
                        "(shifted ids from the model's batch_to_ids)"),
        ]
        if word_ids is not None:
            word_ids = _ensure_shape(word_ids, [None, None])
            rows = self.options.word_vocabulary_size + constants.WORD_ID_SHIFT
            checks += [
                tf.debugging.assert_equal(
                    tf.shape(word_ids), tf.shape(char_ids)[:2],
                    message="char_ids signature: word_ids must be (batch, max_len) as char_ids"),
                tf.debugging.assert_non_negative(
                    word_ids, message="char_ids signature: word ids must be >= 0"),
                tf.debugging.assert_less(
                    word_ids, tf.constant(rows, tf.int32),
                    message=f"char_ids signature: word ids must be < {rows} (shifted ids "
                            "from the model's batch_to_ids)")]
        with tf.control_dependencies(checks):
            char_ids = tf.identity(char_ids)
        if word_ids is not None:
            return self._embed_compacted({"char_ids": char_ids, "word_ids": word_ids}, width)
        return self._embed_compacted(char_ids, width)

    # --- shared ------------------------------------------------------------------------------
    def _copy(self, variable, name, trainable):
        """A tf.Variable named `name` holding the Keras `variable`'s current value."""
        copy = tf.Variable(variable.numpy(), trainable=trainable, name=name)
        self._layers.copies[id(variable)] = copy
        return copy

    def _run(self, layer, *args, **kwargs):
        """`layer.call(*args, **kwargs)` reading the module's variables instead of the
        layer's (Keras' `stateless_call`)."""
        copies = self._layers.copies
        outputs, _ = layer.stateless_call([copies[id(v)] for v in layer.trainable_variables],
                                          [copies[id(v)] for v in layer.non_trainable_variables],
                                          *args, **kwargs)
        return outputs

    def _run_bilm(self, window_ids):
        """The biLM's `layers` `(W, L+1, window_steps, 2P)` for windows of ids `(W,
        window_steps, C)` (or a word model's dict)."""
        # Traced for inference: the biLM's plain loop, whose autodiff a loaded function's
        # GradientTape can run (see ResidualBiLSTM).
        return self._run(self._layers.bilm, window_ids, training=False)["layers"]

    def _embed_compacted(self, ids, width):
        """`_embed` of char ids `(batch, steps, C)` (or a word model's dict) whose all-zero
        rows (no token) may stand between real tokens: each row's tokens are read as one
        sentence without them (`keras_elmo.layers.token_compaction`), and every output
        keeps the input's positions, zero where there was no token."""
        char_ids = ids["char_ids"] if isinstance(ids, dict) else ids
        present = token_mask(char_ids)  # (batch, steps)
        order = compaction_order(present)  # (batch, steps)
        lengths = tf.reduce_sum(tf.cast(present, tf.int32), axis=1)  # (batch,)
        steps = _longest(lengths)
        if isinstance(ids, dict):
            ids = {key: take_positions(value, order, axis=1)[:, :steps]
                   for key, value in ids.items()}
        else:
            ids = take_positions(ids, order, axis=1)[:, :steps]  # real tokens first
        outputs = self._embed(ids, lengths, width)
        restoring = restoring_order(order)  # (batch, steps)
        for key, value in outputs.items():
            if key == "default":  # (batch, 2P), no positions
                continue
            head = take_positions(value[:, :tf.shape(order)[1]], restoring, axis=1)
            outputs[key] = tf.concat([head, value[:, tf.shape(order)[1]:]], axis=1)
        return outputs

    def _embed(self, ids, lengths, width):
        """Outputs for char ids `(batch, steps, C)` with `lengths` `(batch,)` real tokens,
        zero-padded to `width` tokens; over-long rows run in windows
        (`keras_elmo.text.sentence_windows`)."""
        if isinstance(ids, dict):  # a vocabulary model's char ids (and word ids)
            windows = {key: split_windows(value, lengths, self.max_length)
                       for key, value in ids.items()}
            firsts = windows["char_ids"][2]
            window_ids = {key: value[0] for key, value in windows.items()}  # (W, ws, ...)
            if not self.has_words:
                window_ids = window_ids["char_ids"]
        else:
            window_ids, _, firsts = split_windows(ids, lengths, self.max_length)  # (W, ws, C)
        bilm_layers = self._layers.run_bilm(window_ids)  # (W, L+1, window_steps, 2P)
        per_window = tf.transpose(bilm_layers, [0, 2, 1, 3])  # (W, window_steps, L+1, 2P)
        rows = join_windows(per_window, firsts, lengths, self.max_length)  # (b, steps, L+1, 2P)
        layers = tf.transpose(rows, [0, 2, 1, 3])  # (batch, L+1, steps, 2P)
        mask = tf.sequence_mask(lengths, tf.shape(layers)[2])  # (batch, steps)
        if not self.trainable_bilm:
            # The biLM is fixed: a tape needs no backward pass through its time loops
            # (building one costs seconds on the first call of a loaded function).
            layers = tf.stop_gradient(layers)
        pad = width - tf.shape(mask)[1]
        layers = tf.pad(layers, [[0, 0], [0, 0], [0, pad], [0, 0]])  # (batch, L+1, width, 2P)
        mask = tf.pad(mask, [[0, 0], [0, pad]])  # (batch, width), False on padding
        elmo = self._run(self._layers.mix, layers, mask=mask, training=False)  # (b, width, 2P)
        real = tf.cast(mask, elmo.dtype)[..., tf.newaxis]  # (batch, width, 1)
        count = tf.maximum(tf.reduce_sum(real, axis=1), 1.0)  # (batch, 1)
        # Layer 0 is [x; x]; TF Hub's word_emb is x alone.
        outputs = {"word_emb": layers[:, 0, :, :self.options.projection_dim]}  # (b, width, P)
        for j in range(1, self.options.num_layers + 1):
            outputs[f"lstm_outputs{j}"] = layers[:, j]
        pooled = elmo
        if not self.default_with_gamma:  # DeepPavlov's: the mix without gamma
            weights = tf.nn.softmax(tf.cast(self.scalar_parameters, layers.dtype))
            pooled = tf.einsum("l,blwd->bwd", weights, layers)
        outputs.update(elmo=elmo, default=tf.reduce_sum(pooled * real, axis=1) / count,
                       sequence_mask=mask)
        return outputs


def _ensure_shape(tensor, shape):
    """Runtime shape check of a signature input (a loaded signature does not check shapes:
    without this a wrong rank fails deep inside the graph with an unrelated message)."""
    return tf.ensure_shape(tensor, shape, name=f"check_shape_of_{tensor.name.split(':')[0]}")


def _longest(lengths):
    """Max of int32 `(batch,)`, 0 for an empty batch."""
    return tf.reduce_max(tf.concat([lengths, [0]], axis=0))
