"""`CharCNNEmbedder`: ELMo's context-insensitive token encoder (docs/model.md section 2)."""

import keras
from keras import ops

from keras_elmo import backend, constants
from keras_elmo.text.characters import token_mask
from keras_elmo.layers.highway import Highway
from keras_elmo.layers.host_initializers import HostZeros
from keras_elmo.formats.options import BiLMOptions
from keras_elmo.validation import check_choice, check_int

_ACTIVATIONS = {"relu": ops.relu, "tanh": ops.tanh}
#: Filters per convolution call: wider filter banks are convolved in groups of this many
#: (same numbers, a bounded output buffer, no slower on CPU).
MAX_CONV_FILTERS = 128
#: Shape classes of the convolutions (dynamic shapes only): the char positions convolved
#: are rounded up to a multiple of `CONV_POSITION_STEP`, the rows by `conv_row_class`.
#: oneDNN keeps a compiled primitive for every convolution shape it has run: with exact
#: shapes a long embedding job met a new shape at almost every call and its memory grew
#: with the job; with the classes it meets a few dozen (docs/performance.md). The extra rows
#: are padding tokens never gathered; the extra positions are windows of each row's padding
#: run, already part of its max: outputs are unchanged. Not in training, whose char CNN is a
#: larger share of a small model's step: there every shape is exact.
CONV_POSITION_STEP = 8
#: What a `CharCNNEmbedder` call can encode (`implementation`), "auto" first.
IMPLEMENTATIONS = ("auto", "distinct_tokens", "every_position")


def conv_row_class(rows):
    """`rows` (an int, or an int32 scalar tensor, >= 1) rounded up to its convolution shape
    class: a multiple of 8 up to 64 rows, of 32 above (at most 7 or 31 padding rows)."""
    if isinstance(rows, int):
        step = 32 if rows > 64 else 8
    else:
        step = ops.where(rows > 64, 32, 8)
    return (rows + step - 1) // step * step


def check_char_id_range(ids, num_characters=constants.NUM_CHARACTERS):
    """Refuses char ids outside `[0, num_characters - 1]` (`[0, 261]` for a byte model; a
    negative id would index the table from its end).

    Eager: a `ValueError` quoting the smallest and largest id received. Traced: on
    TensorFlow (Keras functional model, tf.function, SavedModel) an assertion op that fails
    the call with the same words; on JAX the same error when the compiled call runs.
    """
    max_id = num_characters - 1
    source = ("keras_elmo.batch_to_ids" if num_characters == constants.NUM_CHARACTERS
              else "keras_elmo.text.token_vocabulary")
    message = f"char ids must be in [0, {max_id}] (shifted ids, 0 = no token; see {source})"
    backend.check_id_range(ids, max_id, message)


@keras.saving.register_keras_serializable(package="keras_elmo")
class CharCNNEmbedder(keras.layers.Layer):
    """Character CNN token encoder: char ids -> one vector per token.

    For each token: embed its char ids (row 0, "no token", is fixed at zero), one valid
    1-D convolution per `(width, num_filters)` pair, max over char positions, THEN the
    activation; concatenate; `num_highway` highway layers; a linear projection with bias to
    `projection_dim` (left out, as in bilm-tf, when the filters already total
    `projection_dim`, unless `use_projection` says otherwise).

    Args:
        char_embedding_dim: int, size of each char embedding (16 published).
        filters: list of `[width, num_filters]` pairs (2048 filters in all published).
        num_highway: int, highway layers (2 published; 0 allowed).
        activation: `"relu"` or `"tanh"`.
        projection_dim: int, output size (512 published).
        max_characters_per_token: int, char ids per token (50).
        num_characters: int, rows of the char table, row 0 ("no token") included: 262 for
            bytes (ids 1-261), `V + 1` for a vocabulary of `V` chars (ids 1-V).
        use_projection: bool or None, whether the projection exists; None: only when the
            filters do not total `projection_dim`. A word model needs it always (its word
            vectors are added to this output, `BiLM`).
        implementation: what a call encodes, with the same numbers every way:
            - `"distinct_tokens"`: each distinct token of the batch once, over the char
              positions some token uses (shapes depend on the values);
            - `"every_position"`: every position over all its char ids (shapes follow from
              the input's, as XLA needs);
            - `"auto"` (default): `"every_position"` inside a function compiled with
              fixed shapes (TensorFlow's `jit_compile`, JAX's `jit`, which Keras' `fit`
              and `predict` use on JAX), `"distinct_tokens"` elsewhere.
        zero_init: bool, create the weights a published weight file holds as zeros instead
            of drawing them, for an encoder a file fills next (`BiLM.from_weights`); how
            this object is built, not in the config.
        check_ids: bool, check the char ids' range in each call (True); False for an
            encoder whose owner checks its inputs before (`BiLM`: its `__call__` on the host,
            its `call` otherwise); how this object is built, not in the config.
        **kwargs: base layer arguments (`name`, `dtype`, `trainable`, ...).

    Outside training `"distinct_tokens"` convolves at a shape class of the rows and char
    positions (`CONV_POSITION_STEP`, `conv_row_class`), padded with tokens never gathered,
    so a long inference job meets a few dozen convolution shapes; in training every shape
    is exact.

    Call arguments:
        inputs: int tensor `(batch, num_tokens, max_characters_per_token)` of shifted char
            ids (see `keras_elmo.text.characters`); all-zero rows are padding.
        training: bool or None (see above).

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
                 max_characters_per_token=constants.MAX_CHARACTERS_PER_TOKEN,
                 num_characters=constants.NUM_CHARACTERS, use_projection=None,
                 implementation="auto", zero_init=False, check_ids=True, **kwargs):
        super().__init__(**kwargs)
        self.check_ids = bool(check_ids)
        self.implementation = check_choice("implementation", implementation, IMPLEMENTATIONS)
        self._zero_init = bool(zero_init)
        self.num_characters = check_int("num_characters", num_characters, minimum=2)
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
        self.use_projection = (self.num_filters != self.projection_dim if use_projection is None
                               else bool(use_projection))
        self.supports_masking = True

    @classmethod
    def from_options(cls, options, **kwargs):
        """Builds the encoder of a `BiLMOptions`, dict or options.json path."""
        from keras_elmo.formats.options import as_options

        o = as_options(options)
        return cls(char_embedding_dim=o.char_embedding_dim, filters=o.filters,
                   num_highway=o.num_highway, activation=o.activation,
                   projection_dim=o.projection_dim,
                   max_characters_per_token=o.max_characters_per_token,
                   num_characters=o.num_characters, use_projection=o.use_char_projection,
                   **kwargs)

    def build(self, input_shape):
        if input_shape[-1] is not None and input_shape[-1] != self.max_characters_per_token:
            raise ValueError(f"CharCNNEmbedder expects char ids of shape (batch, tokens, "
                             f"{self.max_characters_per_token}); received {tuple(input_shape)}.")
        # Rows for shifted ids 1..261 (1..V); id 0 ("no token") maps to a constant zero row.
        self.char_embeddings = self.add_weight(
            name="char_embeddings",
            shape=(self.num_characters - constants.CHAR_ID_SHIFT, self.char_embedding_dim),
            initializer=self._drawn(keras.initializers.RandomUniform(-1.0, 1.0)))
        self.conv_kernels, self.conv_biases = [], []
        for i, (width, count) in enumerate(self.filters):
            if self.activation == "relu":
                init = keras.initializers.RandomUniform(-0.05, 0.05)
            else:
                init = keras.initializers.RandomNormal(
                    stddev=(1.0 / (width * self.char_embedding_dim)) ** 0.5)
            self.conv_kernels.append(self.add_weight(
                name=f"conv_{i}_kernel", shape=(width, self.char_embedding_dim, count),
                initializer=self._drawn(init)))
            self.conv_biases.append(self.add_weight(
                name=f"conv_{i}_bias", shape=(count,), initializer=HostZeros()))
        self.highways = []
        for k in range(self.num_highway):
            layer = Highway(zero_init=self._zero_init, name=f"highway_{k}",
                            dtype=self.dtype_policy)
            layer.build((None, self.num_filters))
            self.highways.append(layer)
        self.projection = None
        if self.use_projection:
            self.projection = keras.layers.Dense(
                self.projection_dim, name="projection", dtype=self.dtype_policy,
                kernel_initializer=self._drawn(keras.initializers.RandomNormal(
                    stddev=(1.0 / self.num_filters) ** 0.5)), bias_initializer=HostZeros())
            self.projection.build((None, self.num_filters))

    def _drawn(self, initializer):
        """`initializer`, or zeros for an encoder built to be filled (`zero_init`)."""
        return HostZeros() if self._zero_init else initializer

    def resolve_implementation(self, inputs=None):
        """What a call on `inputs` encodes (`implementation`, "auto" resolved); a ValueError
        where `"distinct_tokens"` cannot compile (XLA: fixed shapes)."""
        fixed = backend.needs_static_shapes(inputs)
        if self.implementation == "auto":
            return "every_position" if fixed else "distinct_tokens"
        if self.implementation == "distinct_tokens" and fixed:
            raise ValueError("implementation='distinct_tokens' has shapes XLA cannot compile; "
                             "received a call inside a jit_compile function or jax.jit "
                             "(fixed shapes; use 'every_position' or 'auto').")
        return self.implementation

    def call(self, inputs, training=None):
        static_shapes = self.resolve_implementation(inputs) == "every_position"
        ids = ops.cast(inputs, "int32")
        if self.check_ids:
            check_char_id_range(ids, self.num_characters)
        batch, num_tokens = ops.shape(ids)[0], ops.shape(ids)[1]
        flat_ids = ops.reshape(ids, (-1, self.max_characters_per_token))  # (batch*T, chars)
        # Each distinct token is encoded once and gathered back to its positions: a batch of
        # text holds far fewer distinct tokens than positions. Rows are encoded
        # independently, so the result is that of encoding every position.
        if static_shapes:
            positions = ops.arange(ops.shape(flat_ids)[0], dtype="int32")  # (batch*T,)
        else:
            flat_ids, positions = backend.unique_rows(flat_ids)  # (U, chars), (batch*T,)
        # At least one extra all-padding row, never gathered: TensorFlow's conv returns its
        # input unchanged for an empty batch, so a batch of 0 rows must never reach it.
        rows = ops.shape(flat_ids)[0] + 1
        shape_classes = not (static_shapes or training)
        if shape_classes:  # (conv_row_class)
            rows = conv_row_class(rows)
        flat_ids = ops.pad(flat_ids, ((0, rows - ops.shape(flat_ids)[0]), (0, 0)))  # (R, chars)
        table = ops.concatenate(
            [ops.zeros((1, self.char_embedding_dim), self.char_embeddings.dtype),
             self.char_embeddings], axis=0)  # (num_characters, E): 262 for bytes
        step = CONV_POSITION_STEP if shape_classes else 1
        pooled = self._pooled_convolutions(table, flat_ids, trim=not static_shapes,
                                           position_step=step)
        x = ops.concatenate(pooled, axis=-1) if len(pooled) > 1 else pooled[0]  # (R, F)
        for highway in self.highways:
            x = highway(x)
        if self.projection is not None:
            x = self.projection(x)  # (R, P)
        x = ops.take(x, positions, axis=0)  # (batch*T, P)
        return ops.reshape(x, (batch, num_tokens, self.projection_dim))  # (batch, T, P)

    def _pooled_convolutions(self, table, ids, trim=True, position_step=1):
        """`activation(max over positions of conv_w(chars) + b_w)` per filter, `(rows, n)` each.

        `trim`: an exact work saving. Every row ends in a run of one repeated id (the
        padding char after a token's end-of-word mark; id 0 in a "no token" row), and every
        window inside that run gives the same value for all such rows: the convolutions run
        over the first `K = min(chars, L + max_width - 1)` positions only (`L` the longest
        non-run prefix of the batch, rounded up to `position_step`), and each row's max also
        takes the value of a window of its run id, `emb(id) @ sum_k kernel[k]`, whenever a
        window was left out. Without `trim` every position is convolved (static shapes).
        """
        num_chars = self.max_characters_per_token
        activation = _ACTIVATIONS[self.activation]
        if trim:
            tail = ids[:, -1:]  # (rows, 1): the id that fills the end of each row
            differs = ops.cast(ops.not_equal(ids, tail), "int32")  # (rows, chars)
            prefix = ops.max(differs * ops.arange(1, num_chars + 1, dtype="int32"))  # L
            widest = max(width for width, _ in self.filters)
            used = ops.maximum(prefix, 1) + widest - 1  # K, to a multiple of the step
            used = ops.minimum(num_chars,
                               (used + position_step - 1) // position_step * position_step)
            ids = ids[:, :used]
            run_chars = ops.cast(ops.take(table, tail[:, 0], axis=0), self.compute_dtype)
        chars = ops.cast(ops.take(table, ids, axis=0), self.compute_dtype)  # (rows, K, E)
        pooled = []
        for kernel, bias in zip(self.conv_kernels, self.conv_biases):
            kernel = ops.cast(kernel, self.compute_dtype)  # (w, E, n)
            best = backend.conv_max(chars, kernel, MAX_CONV_FILTERS)  # (rows, n)
            if trim:
                run_window = ops.matmul(run_chars, ops.sum(kernel, axis=0))  # (rows, n)
                best = ops.where(ops.less(used, num_chars), ops.maximum(best, run_window),
                                 best)
            # The bias after the max: max_p(conv_p) + b is exactly max_p(conv_p + b) (adding
            # b is monotonic, also after rounding), one add per filter, not per position.
            pooled.append(activation(best + ops.cast(bias, self.compute_dtype)))
        return pooled

    def compute_mask(self, inputs, mask=None):
        return token_mask(inputs)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.projection_dim,)

    def get_config(self):
        config = super().get_config()
        config.update(char_embedding_dim=self.char_embedding_dim, filters=self.filters,
                      num_highway=self.num_highway, activation=self.activation,
                      projection_dim=self.projection_dim,
                      max_characters_per_token=self.max_characters_per_token,
                      num_characters=self.num_characters, use_projection=self.use_projection,
                      implementation=self.implementation)
        return config
