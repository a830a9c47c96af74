"""`ElmoModule`: a `tf.Module` whose signatures serve ELMo embeddings (TF Hub names).

Signatures (`P` = projection_dim, `L` = biLSTM layers, `C` = max_characters_per_token):

| signature | inputs |
|---|---|
| `tokens` | `tokens` tf.string `(batch, max_len)` padded with `""`; `sequence_len` int32 `(batch,)` |
| `default` (= `serving_default`) | `text` tf.string `(batch,)`, untokenised sentences |
| `char_ids` | `char_ids` int32 `(batch, max_len, C)` from `keras_elmo.batch_to_ids` |

Every signature returns float32 `word_emb` (layer 0, `[x; x]`), `lstm_outputs1` ...
`lstm_outputs{L}`, `elmo` (the scalar mix), all `(batch, max_len, 2P)`; `default`
`(batch, 2P)`, the mean of `elmo` over the real tokens (zeros for an empty sentence); and
bool `sequence_mask` `(batch, max_len)`. The `default` signature also returns `tokens`
tf.string `(batch, max_len)`, the in-graph whitespace split (padded with `""`), so a client
can align the vectors with its words. Positions past a sentence's end are exactly zero.

Only core TensorFlow ops are used (no tensorflow-text), so the SavedModel loads with
TensorFlow alone.
"""

import tensorflow as tf

from keras_elmo import constants
from keras_elmo.bilm import BiLM
from keras_elmo.characters import tf_ragged_char_ids, tf_token_char_ids, token_mask

from keras_elmo.export.mix_weights import build_mix
from keras_elmo.whitespace import split_whitespace

#: Tokens per sentence a SavedModel accepts unless told otherwise (`--max-length`).
DEFAULT_MAX_LENGTH = 512
#: Signature names, in the order `saved_model_cli` users see them documented.
SIGNATURES = ("tokens", "default", "char_ids", "serving_default")


class _Layers:
    """Holds the Keras objects out of the SavedModel's object graph (only their variables,
    listed in `ElmoModule.elmo_variables`, are saved)."""

    def __init__(self, bilm, mix):
        self.bilm, self.mix = bilm, mix


class ElmoModule(tf.Module):
    """ELMo embeddings behind the `tokens`, `default` and `char_ids` signatures.

    Args:
        bilm: a stateless `keras_elmo.BiLM` (its weights are saved with the module).
        scalar_mix: a built `keras_elmo.ScalarMix` over the biLM's `L + 1` layers, or None
            for the even mix `softmax(zeros)`, `gamma = 1`.
        max_length: int, most real tokens a sentence may have; a longer one fails the call
            with `InvalidArgumentError` (never silently truncated).
        name: module name.

    Call (each attribute is a `tf.function`; see the module docstring for shapes):
        `module.tokens(tokens, sequence_len)`, `module.default(text)`,
        `module.char_ids(char_ids)` -> dict of output tensors.

    Example:
    >>> module = ElmoModule(keras_elmo.BiLM(keras_elmo.BiLMOptions.tiny()))
    >>> module.default(tf.constant(["The cat sat .", ""]))["elmo"].shape
    TensorShape([2, 4, 16])
    >>> tf.saved_model.save(module, "elmo/1", signatures=module.signatures())
    """

    def __init__(self, bilm, scalar_mix=None, max_length=DEFAULT_MAX_LENGTH, name="elmo"):
        super().__init__(name=name)
        if not isinstance(bilm, BiLM):
            raise ValueError(f"ElmoModule needs a keras_elmo.BiLM; received "
                             f"{type(bilm).__name__}.")
        if bilm.stateful:
            raise ValueError("ElmoModule needs a stateless BiLM (a stateful one would carry "
                             "LSTM state from one serving request to the next); rebuild it "
                             "with stateful=False and copy the weights.")
        if not isinstance(max_length, int) or isinstance(max_length, bool) or max_length < 1:
            raise ValueError(f"max_length must be a positive int; received {max_length!r}.")
        num_layers = bilm.num_output_layers
        if scalar_mix is None:
            scalar_mix = build_mix(num_layers)
        elif not scalar_mix.built or tuple(scalar_mix.scalar_parameters.shape) != (num_layers,):
            raise ValueError(f"scalar_mix must be built over the biLM's {num_layers} layers; "
                             f"received {scalar_mix!r}.")
        self.max_length = max_length
        self.options = bilm.options
        self._layers = _Layers(bilm, scalar_mix)
        chars = bilm.options.max_characters_per_token
        self.tokens = tf.function(self._tokens, input_signature=[
            tf.TensorSpec([None, None], tf.string, name="tokens"),
            tf.TensorSpec([None], tf.int32, name="sequence_len")])
        self.default = tf.function(self._default, input_signature=[
            tf.TensorSpec([None], tf.string, name="text")])
        self.char_ids = tf.function(self._char_ids, input_signature=[
            tf.TensorSpec([None, None, chars], tf.int32, name="char_ids")])
        # Track the tf.Variables the traced graphs capture, not the Keras variables that wrap
        # them: with the wrappers, TF1-style loaders (TF Serving, `saved_model_cli run`)
        # restore copies and the graph reads uninitialised variables. Keras' ExportArchive
        # does the same.
        self.elmo_variables = _captured_variables(
            [self.tokens, self.default, self.char_ids])

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
            self._check_length(sequence_len, "tokens"),
        ]
        with tf.control_dependencies(checks):
            steps = _longest(sequence_len)
        real = tf.sequence_mask(sequence_len, steps)  # (batch, steps)
        # Positions past sequence_len are padding whatever they hold; "" before it is an
        # empty word, as in `batch_to_ids`.
        ids = tf_token_char_ids(tokens[:, :steps], self.options.max_characters_per_token)
        ids = tf.where(real[..., tf.newaxis], ids, tf.zeros_like(ids))  # (batch, steps, C)
        return self._embed(ids, width)

    def _default(self, text):
        words = split_whitespace(_ensure_shape(text, [None]))  # (batch, (num_tokens))
        lengths = tf.cast(words.row_lengths(), tf.int32)  # (batch,)
        with tf.control_dependencies([self._check_length(lengths, "default")]):
            ids = tf_ragged_char_ids(words, self.options.max_characters_per_token)
        outputs = self._embed(ids, tf.shape(ids)[1])
        outputs["tokens"] = words.to_tensor(default_value="")  # (batch, max_len)
        return outputs

    def _char_ids(self, char_ids):
        char_ids = _ensure_shape(char_ids, [None, None, self.options.max_characters_per_token])
        width = tf.shape(char_ids)[1]
        present = token_mask(char_ids)  # (batch, max_len)
        lengths = tf.reduce_sum(tf.cast(present, tf.int32), axis=1)  # (batch,)
        checks = [
            tf.debugging.assert_non_negative(
                char_ids, message="char_ids signature: char ids must be >= 0"),
            tf.debugging.assert_less(
                char_ids, tf.constant(constants.NUM_CHARACTERS, tf.int32),
                message=f"char_ids signature: char ids must be < {constants.NUM_CHARACTERS} "
                        "(shifted ids from keras_elmo.batch_to_ids)"),
            tf.debugging.assert_equal(
                present, tf.sequence_mask(lengths, width),
                message="char_ids signature: an all-zero (padding) row comes before a real "
                        "token; real tokens must come first in each row"),
            self._check_length(lengths, "char_ids"),
        ]
        with tf.control_dependencies(checks):
            steps = _longest(lengths)
        return self._embed(char_ids[:, :steps], width)

    # --- shared ------------------------------------------------------------------------------
    def _check_length(self, lengths, signature):
        return tf.debugging.assert_less_equal(
            lengths, tf.constant(self.max_length, tf.int32),
            message=f"{signature} signature: a sentence has more than max_length="
                    f"{self.max_length} tokens (this SavedModel's limit; split long "
                    "sentences or re-export with a larger --max-length)")

    def _embed(self, ids, width):
        """Outputs for char ids `(batch, steps, C)`, zero-padded to `width` tokens."""
        out = self._layers.bilm(ids, training=False)
        layers, mask = out["layers"], out["mask"]  # (batch, L+1, steps, 2P), (batch, steps)
        pad = width - tf.shape(mask)[1]
        layers = tf.pad(layers, [[0, 0], [0, 0], [0, pad], [0, 0]])  # (batch, L+1, width, 2P)
        mask = tf.pad(mask, [[0, 0], [0, pad]])  # (batch, width), False on padding
        elmo = self._layers.mix(layers, mask=mask, training=False)  # (batch, width, 2P)
        real = tf.cast(mask, elmo.dtype)[..., tf.newaxis]  # (batch, width, 1)
        count = tf.maximum(tf.reduce_sum(real, axis=1), 1.0)  # (batch, 1)
        outputs = {"word_emb": layers[:, 0]}
        for j in range(1, self.options.num_layers + 1):
            outputs[f"lstm_outputs{j}"] = layers[:, j]
        outputs.update(elmo=elmo, default=tf.reduce_sum(elmo * real, axis=1) / count,
                       sequence_mask=mask)
        return outputs


def _captured_variables(functions):
    """The distinct tf.Variables that the traced `functions` read, in first-use order."""
    found = {}
    for function in functions:
        for variable in function.get_concrete_function().variables:
            found.setdefault(id(variable), variable)
    return list(found.values())


def _ensure_shape(tensor, shape):
    """Runtime shape check of a signature input (a loaded signature does not check shapes:
    without this a wrong rank fails deep inside the graph with an unrelated message)."""
    return tf.ensure_shape(tensor, shape, name=f"check_shape_of_{tensor.name.split(':')[0]}")


def _longest(lengths):
    """Max of int32 `(batch,)`, 0 for an empty batch."""
    return tf.reduce_max(tf.concat([lengths, [0]], axis=0))
