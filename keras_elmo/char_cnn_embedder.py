"""`CharCNNEmbedder`: ELMo's context-insensitive token encoder (ELMO_SPEC.md section 2)."""

import keras
import tensorflow as tf
from keras import ops

from keras_elmo import constants
from keras_elmo.characters import token_mask
from keras_elmo.highway import Highway
from keras_elmo.options import BiLMOptions

_ACTIVATIONS = {"relu": ops.relu, "tanh": ops.tanh}
#: Largest model char id (ids are shifted by +1; 0 means "no token").
_MAX_CHAR_ID = constants.NUM_CHARACTERS - 1


def check_char_id_range(ids):
    """Refuses char ids outside `[0, 261]` (a negative id would index the table from its end).

    Eager: a `ValueError` quoting the smallest and largest id received. Traced (Keras
    functional model, tf.function, SavedModel): an assertion op that fails the call with
    the same words.
    """
    message = (f"char ids must be in [0, {_MAX_CHAR_ID}] (shifted ids, 0 = no token; "
               "see keras_elmo.batch_to_ids)")
    if tf.executing_eagerly():
        if int(tf.size(ids)) == 0:
            return
        low, high = int(tf.reduce_min(ids)), int(tf.reduce_max(ids))
        if low < 0 or high > _MAX_CHAR_ID:
            raise ValueError(f"{message}; received ids from {low} to {high}.")
        return
    tf.debugging.assert_greater_equal(ids, 0, message=message)
    tf.debugging.assert_less_equal(ids, _MAX_CHAR_ID, message=message)


@keras.saving.register_keras_serializable(package="keras_elmo")
class CharCNNEmbedder(keras.layers.Layer):
    """Character CNN token encoder: char ids -> one vector per token.

    For each token: embed its char ids (row 0, "no token", is fixed at zero), one valid
    1-D convolution per `(width, num_filters)` pair, max over char positions, THEN the
    activation; concatenate; `num_highway` highway layers; a linear projection with bias to
    `projection_dim` (left out, as in bilm-tf, when the filters already total
    `projection_dim`).

    Args:
        char_embedding_dim: int, size of each char embedding (16 published).
        filters: list of `[width, num_filters]` pairs (2048 filters in all published).
        num_highway: int, highway layers (2 published; 0 allowed).
        activation: `"relu"` or `"tanh"`.
        projection_dim: int, output size (512 published).
        max_characters_per_token: int, char ids per token (50).
        **kwargs: base layer arguments (`name`, `dtype`, `trainable`, ...).

    Call arguments:
        inputs: int tensor `(batch, num_tokens, max_characters_per_token)` of shifted char
            ids (see `keras_elmo.characters`); all-zero rows are padding.

    Returns:
        float tensor `(batch, num_tokens, projection_dim)`, with the Keras mask
        `(batch, num_tokens)` = "row has a nonzero id". Padding rows are not zeroed here
        (they are the encoding of an all-padding token); `BiLM` zeroes them.

    Example:
    >>> embedder = CharCNNEmbedder.from_options(BiLMOptions.tiny())
    >>> ids = keras_elmo.batch_to_ids([["a", "cat"], ["dogs"]])
    >>> embedder(ids).shape
    (2, 2, 8)

    Reference:
    - [Peters et al., 2018](https://arxiv.org/abs/1802.05365);
      [Kim et al., 2016](https://arxiv.org/abs/1508.06615) for the char CNN.
    """

    def __init__(self, char_embedding_dim=16, filters=((1, 32), (2, 32), (3, 64), (4, 128),
                 (5, 256), (6, 512), (7, 1024)), num_highway=2, activation="relu",
                 projection_dim=512,
                 max_characters_per_token=constants.MAX_CHARACTERS_PER_TOKEN, **kwargs):
        super().__init__(**kwargs)
        # BiLMOptions validates every architecture argument in one place.
        checked = BiLMOptions(char_embedding_dim=char_embedding_dim, filters=filters,
                              num_highway=num_highway, activation=activation,
                              projection_dim=projection_dim,
                              max_characters_per_token=max_characters_per_token,
                              lstm_units=projection_dim + 1)
        self.char_embedding_dim = checked.char_embedding_dim
        self.filters = [list(f) for f in checked.filters]
        self.num_highway = checked.num_highway
        self.activation = checked.activation
        self.projection_dim = checked.projection_dim
        self.max_characters_per_token = checked.max_characters_per_token
        self.num_filters = checked.num_filters
        self.use_projection = self.num_filters != self.projection_dim
        self.supports_masking = True

    @classmethod
    def from_options(cls, options, **kwargs):
        """Builds the encoder of a `BiLMOptions`, dict or options.json path."""
        from keras_elmo.options import as_options

        o = as_options(options)
        return cls(char_embedding_dim=o.char_embedding_dim, filters=o.filters,
                   num_highway=o.num_highway, activation=o.activation,
                   projection_dim=o.projection_dim,
                   max_characters_per_token=o.max_characters_per_token, **kwargs)

    def build(self, input_shape):
        if input_shape[-1] is not None and input_shape[-1] != self.max_characters_per_token:
            raise ValueError(f"CharCNNEmbedder expects char ids of shape (batch, tokens, "
                             f"{self.max_characters_per_token}); received {tuple(input_shape)}.")
        # Rows for shifted ids 1..261; id 0 ("no token") maps to a constant zero row.
        self.char_embeddings = self.add_weight(
            name="char_embeddings",
            shape=(constants.NUM_FILE_CHARACTERS, self.char_embedding_dim),
            initializer=keras.initializers.RandomUniform(-1.0, 1.0))
        self.conv_kernels, self.conv_biases = [], []
        for i, (width, count) in enumerate(self.filters):
            if self.activation == "relu":
                init = keras.initializers.RandomUniform(-0.05, 0.05)
            else:
                init = keras.initializers.RandomNormal(
                    stddev=(1.0 / (width * self.char_embedding_dim)) ** 0.5)
            self.conv_kernels.append(self.add_weight(
                name=f"conv_{i}_kernel", shape=(width, self.char_embedding_dim, count),
                initializer=init))
            self.conv_biases.append(self.add_weight(
                name=f"conv_{i}_bias", shape=(count,), initializer="zeros"))
        self.highways = []
        for k in range(self.num_highway):
            layer = Highway(name=f"highway_{k}", dtype=self.dtype_policy)
            layer.build((None, self.num_filters))
            self.highways.append(layer)
        self.projection = None
        if self.use_projection:
            self.projection = keras.layers.Dense(
                self.projection_dim, name="projection", dtype=self.dtype_policy,
                kernel_initializer=keras.initializers.RandomNormal(
                    stddev=(1.0 / self.num_filters) ** 0.5))
            self.projection.build((None, self.num_filters))

    def call(self, inputs):
        ids = ops.cast(inputs, "int32")
        check_char_id_range(ids)
        batch, num_tokens = ops.shape(ids)[0], ops.shape(ids)[1]
        flat_ids = ops.reshape(ids, (-1, self.max_characters_per_token))  # (batch*T, chars)
        # Each distinct token is encoded once and gathered back to its positions: a batch of
        # text holds far fewer distinct tokens than positions. Rows are encoded
        # independently, so the result is that of encoding every position.
        flat_ids, positions = tf.raw_ops.UniqueV2(x=flat_ids, axis=[0])  # (U, chars), (batch*T,)
        # One extra all-padding row, never gathered: TensorFlow's conv returns its input
        # unchanged for an empty batch, so a batch of 0 rows must never reach it.
        flat_ids = ops.pad(flat_ids, ((0, 1), (0, 0)))  # (U + 1, chars)
        table = ops.concatenate(
            [ops.zeros((1, self.char_embedding_dim), self.char_embeddings.dtype),
             self.char_embeddings], axis=0)  # (262, E)
        chars = ops.take(table, flat_ids, axis=0)  # (U + 1, chars, E)
        chars = ops.cast(chars, self.compute_dtype)
        activation = _ACTIVATIONS[self.activation]
        pooled = []
        for kernel, bias in zip(self.conv_kernels, self.conv_biases):
            conv = ops.conv(chars, ops.cast(kernel, self.compute_dtype), padding="valid")
            conv = conv + ops.cast(bias, self.compute_dtype)  # (U + 1, chars-w+1, n)
            pooled.append(activation(ops.max(conv, axis=1)))  # (U + 1, n)
        x = ops.concatenate(pooled, axis=-1) if len(pooled) > 1 else pooled[0]  # (U + 1, F)
        for highway in self.highways:
            x = highway(x)
        if self.projection is not None:
            x = self.projection(x)  # (U + 1, P)
        x = ops.take(x, positions, axis=0)  # (batch*T, P)
        return ops.reshape(x, (batch, num_tokens, self.projection_dim))  # (batch, T, P)

    def compute_mask(self, inputs, mask=None):
        return token_mask(inputs)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.projection_dim,)

    def get_config(self):
        config = super().get_config()
        config.update(char_embedding_dim=self.char_embedding_dim, filters=self.filters,
                      num_highway=self.num_highway, activation=self.activation,
                      projection_dim=self.projection_dim,
                      max_characters_per_token=self.max_characters_per_token)
        return config
