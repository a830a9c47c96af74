"""`WordEmbedding`: the word part of a vocabulary model's token encoder (docs/model.md
section 10)."""

import keras
from keras import ops

from keras_elmo import backend
from keras_elmo.validation import check_int
from keras_elmo.layers.host_initializers import HostZeros


@keras.saving.register_keras_serializable(package="keras_elmo")
class WordEmbedding(keras.layers.Layer):
    """Word ids -> the word vectors' share of the token vectors.

    `output = [0; embeddings][ids] @ projection_kernel`: a lookup in a table of
    `vocabulary_size` rows (ids shifted by +1; id 0, "no token", a constant zero row), then
    a linear map without bias to `output_dim`. `BiLM` adds it to `CharCNNEmbedder`'s
    projected output, which together is `[word; chars] W_proj + b_proj` of a model that
    projects the two concatenated (ELMoForManyLangs): `W_proj` split by rows into this
    layer's kernel and the char projection's, `b_proj` the char projection's bias.

    Args:
        vocabulary_size: int, words in the table (model ids 1 ... vocabulary_size).
        embedding_dim: int, size of a word vector.
        output_dim: int, size of the output (the biLM's `projection_dim`).
        zero_init: bool, create the weights as zeros instead of drawing them, for a layer
            whose weights a file fills next; how this object is built, not in the config.
        check_ids: bool, check the word ids' range in each call (True); False for a layer
            whose owner checks its inputs before (`BiLM`); not in the config.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: int `(batch, num_tokens)` of shifted word ids (see
            `keras_elmo.text.token_vocabulary`); 0 marks a position without a token.

    Returns:
        float `(batch, num_tokens, output_dim)`, exactly zero where the id is 0, with the
        Keras mask `(batch, num_tokens)` = "id is not 0".

    Example:
    >>> layer = WordEmbedding(vocabulary_size=10, embedding_dim=4, output_dim=8)
    >>> layer(np.array([[3, 1, 0]])).shape
    (1, 3, 8)
    """

    def __init__(self, vocabulary_size, embedding_dim, output_dim, zero_init=False,
                 check_ids=True, **kwargs):
        super().__init__(**kwargs)
        self.check_ids = bool(check_ids)
        self.vocabulary_size = check_int("vocabulary_size", vocabulary_size)
        self.embedding_dim = check_int("embedding_dim", embedding_dim)
        self.output_dim = check_int("output_dim", output_dim)
        self._zero_init = bool(zero_init)
        self.supports_masking = True

    @classmethod
    def from_options(cls, options, **kwargs):
        """The word embedding of a `BiLMOptions` with `has_word_embedding`."""
        from keras_elmo.formats.options import as_options

        o = as_options(options)
        if not o.has_word_embedding:
            raise ValueError("WordEmbedding.from_options needs options with a word embedding; "
                             "received word_embedding_dim=0.")
        return cls(vocabulary_size=o.word_vocabulary_size, embedding_dim=o.word_embedding_dim,
                   output_dim=o.projection_dim, **kwargs)

    def build(self, input_shape):
        # Rows for shifted ids 1..vocabulary_size; id 0 maps to a constant zero row.
        self.embeddings = self.add_weight(
            name="embeddings", shape=(self.vocabulary_size, self.embedding_dim),
            initializer=self._drawn(keras.initializers.RandomUniform(-1.0, 1.0)))
        self.projection_kernel = self.add_weight(
            name="projection_kernel", shape=(self.embedding_dim, self.output_dim),
            initializer=self._drawn(keras.initializers.RandomNormal(
                stddev=(1.0 / self.embedding_dim) ** 0.5)))

    def _drawn(self, initializer):
        return HostZeros() if self._zero_init else initializer

    def call(self, inputs):
        ids = ops.cast(inputs, "int32")  # (batch, T)
        if self.check_ids:
            self._check_id_range(ids)
        table = ops.concatenate(
            [ops.zeros((1, self.embedding_dim), self.embeddings.dtype), self.embeddings],
            axis=0)  # (vocabulary_size + 1, W)
        vectors = ops.cast(ops.take(table, ids, axis=0), self.compute_dtype)  # (batch, T, W)
        return ops.matmul(vectors, ops.cast(self.projection_kernel, self.compute_dtype))

    def _check_id_range(self, ids):
        """Refuses ids outside `[0, vocabulary_size]` (as `CharCNNEmbedder`'s char ids:
        `keras_elmo.backend.check_id_range`)."""
        message = (f"word ids must be in [0, {self.vocabulary_size}] (shifted ids, 0 = no "
                   "token; see keras_elmo.text.token_vocabulary)")
        backend.check_id_range(ids, self.vocabulary_size, message)

    def compute_mask(self, inputs, mask=None):
        return ops.not_equal(inputs, 0)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape) + (self.output_dim,)

    def get_config(self):
        config = super().get_config()
        config.update(vocabulary_size=self.vocabulary_size, embedding_dim=self.embedding_dim,
                      output_dim=self.output_dim)
        return config
