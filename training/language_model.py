"""`LanguageModel`: the biLM with its training objective (ELMO_SPEC.md section 7).

The token encoder (`CharCNNEmbedder`) and the softmax (`SharedSoftmax`) are shared by the
two directions; the LSTM stacks (`ResidualBiLSTM`) are not. Inputs are whole sentences
`<S> t1 ... tn </S>` (see `keras_elmo.training.dataset`). The forward LM's top output at position t
predicts token t+1, the backward LM's top output at position t predicts token t-1; so the
boundary tokens are targets too (`</S>` forward, `<S>` backward), as in bilm-tf. A sentence
of n words gives n + 1 targets per direction.

    loss = 0.5 * (forward mean NLL + backward mean NLL)   over the real targets

Dropout (`dropout`) is applied to every LSTM layer's input and to the top output before the
softmax. The encoder and LSTM weights are those of a `keras_elmo.BiLM` of the same options:
`transfer_to_bilm` copies them 1:1.

Example:
>>> model = LanguageModel(BiLMOptions.tiny(), vocab_size=50)
>>> ids = keras_elmo.batch_to_ids([["<S>", "a", "b", "</S>"]])
>>> sums = model.nll_sums(ids, tf.constant([[0, 7, 8, 1]]))
>>> float(sums["count"])  # 3 targets per direction
3.0
"""

import keras
import tensorflow as tf

from keras_elmo.char_cnn_embedder import CharCNNEmbedder
from keras_elmo.characters import token_mask
from keras_elmo.options import as_options
from keras_elmo.residual_bilstm import ResidualBiLSTM
from keras_elmo.training.softmax import SharedSoftmax


class LanguageModel(keras.Model):
    """Character-CNN biLM + shared softmax, with the joint forward/backward objective.

    Args:
        options: `BiLMOptions` (or options.json dict / path), the architecture.
        vocab_size: int, words of the softmax (`n_tokens_vocab`).
        dropout: float in [0, 1), LSTM input and top-output dropout when training.
        num_sampled: int, sampled-softmax negatives (`< vocab_size`).
        use_sampled_softmax: bool, train with the sampled softmax (evaluation is always
            full: `nll_sums(..., sampled=False)`).

    Call arguments:
        char_ids: int32 `(batch, T, max_characters_per_token)`, boundaries included,
            padding rows all zero, real tokens first.
        training: bool, enables dropout.

    Returns (call):
        dict `{"embeddings": (batch, T, P), "layers": (batch, num_layers, T, 2P),
        "mask": bool (batch, T)}`; the forward half of "layers" at each row's `</S>` and
        the backward half at `<S>` are zero (no target reads them, so they are not
        computed: `ResidualBiLSTM`'s `skip_boundary_steps`).
    """

    def __init__(self, options, vocab_size, dropout=0.0, num_sampled=8192,
                 use_sampled_softmax=False, **kwargs):
        super().__init__(**kwargs)
        self.options = as_options(options)
        self.vocab_size = int(vocab_size)
        self.dropout_rate = float(dropout)
        self.use_sampled_softmax = bool(use_sampled_softmax)
        self.token_embedder = CharCNNEmbedder.from_options(self.options, name="token_embedder")
        self.contextual_encoder = ResidualBiLSTM.from_options(
            self.options, dropout=self.dropout_rate, name="contextual_encoder")
        self.output_dropout = keras.layers.Dropout(self.dropout_rate, name="output_dropout")
        self.softmax = SharedSoftmax(self.vocab_size, self.options.projection_dim,
                                     num_sampled=min(int(num_sampled), self.vocab_size - 1),
                                     name="softmax")
        chars = self.options.max_characters_per_token
        self.token_embedder.build((None, None, chars))
        self.contextual_encoder.build((None, None, self.options.projection_dim))
        self.softmax.build((None, self.options.projection_dim))
        self.built = True

    @classmethod
    def from_training_config(cls, config):
        """The model of a `keras_elmo.training.config.TrainingConfig` (vocab size must be set)."""
        if config.n_tokens_vocab is None:
            raise ValueError("The training config has no n_tokens_vocab; set it from the "
                             "vocabulary before building the model.")
        return cls(config.options, config.n_tokens_vocab, dropout=config.dropout,
                   num_sampled=config.num_sampled,
                   use_sampled_softmax=config.use_sampled_softmax)

    def call(self, char_ids, training=False):
        char_ids = tf.cast(char_ids, tf.int32)
        mask = token_mask(char_ids)  # (batch, T)
        embeddings = self.token_embedder(char_ids)  # (batch, T, P)
        # No target reads the forward output at `</S>` or the backward one at `<S>`.
        layers = self.contextual_encoder(embeddings, mask=mask, training=training,
                                         skip_boundary_steps=True)
        return {"embeddings": embeddings, "layers": layers, "mask": mask}

    def nll_sums(self, char_ids, token_ids, training=False, sampled=None):
        """Summed NLL of each direction over the real targets of a batch.

        Args:
            char_ids: int32 `(batch, T, max_chars)`, `<S> ... </S>` per row.
            token_ids: int `(batch, T)`, the vocabulary id of every position.
            training: bool, dropout on.
            sampled: bool or None, sampled softmax (None: `use_sampled_softmax` when
                training, full softmax otherwise).

        Returns:
            dict of float32 scalars `forward`, `backward` (summed NLL) and `count` (targets
            per direction = sum over rows of `length - 1`).
        """
        if sampled is None:
            sampled = self.use_sampled_softmax and training
        token_ids = tf.cast(token_ids, tf.int32)
        # A replica can get an empty batch at the end of an epoch (tf.distribute pads the
        # last step with zero-size batches); its sums are zero.
        return tf.cond(tf.size(token_ids) > 0,
                       lambda: self._nll_sums(char_ids, token_ids, training, sampled),
                       lambda: {k: tf.constant(0.0) for k in ("forward", "backward", "count")})

    def _nll_sums(self, char_ids, token_ids, training, sampled):
        outputs = self(char_ids, training=training)
        top = outputs["layers"][:, -1]  # (batch, T, 2P)
        top = self.output_dropout(top, training=training)
        p = self.options.projection_dim
        valid = outputs["mask"][:, 1:]  # (batch, T-1): a real token follows / precedes
        # Forward: output t predicts t+1; backward: output t predicts t-1.
        forward_hidden = tf.boolean_mask(top[:, :-1, :p], valid)  # (N, P)
        forward_targets = tf.boolean_mask(token_ids[:, 1:], valid)  # (N,)
        backward_hidden = tf.boolean_mask(top[:, 1:, p:], valid)  # (N, P)
        backward_targets = tf.boolean_mask(token_ids[:, :-1], valid)  # (N,)
        nll = self.softmax.sampled_nll if sampled else self.softmax.full_nll
        return {"forward": tf.reduce_sum(nll(forward_hidden, forward_targets)),
                "backward": tf.reduce_sum(nll(backward_hidden, backward_targets)),
                "count": tf.reduce_sum(tf.cast(valid, tf.float32))}

    def transfer_to_bilm(self, bilm):
        """Copies the token encoder and LSTM weights into a `keras_elmo.BiLM`."""
        _copy_encoders(self, bilm)
        return bilm

    def transfer_from(self, source):
        """Copies the token encoder and LSTM weights of a `keras_elmo.BiLM` or of another
        `LanguageModel` (same options) into this model."""
        _copy_encoders(source, self)
        return self

    def make_bilm(self):
        """A new `keras_elmo.BiLM` holding this model's encoder and LSTM weights."""
        from keras_elmo.bilm import BiLM

        return self.transfer_to_bilm(BiLM(self.options))


def _copy_encoders(source, target):
    """Token encoder and LSTM weights from `source` to `target` (a BiLM / LanguageModel)."""
    if source.options != target.options:
        raise ValueError("The BiLM's options differ from the language model's; expected "
                         f"{target.options.to_dict()}, received {source.options.to_dict()}.")
    target.token_embedder.set_weights(source.token_embedder.get_weights())
    # Cell by cell in the (in, out) layout: a bfloat16 cell stores its kernels transposed.
    source_encoder, target_encoder = source.contextual_encoder, target.contextual_encoder
    for direction, source_cells in source_encoder.cells.items():
        for source_cell, target_cell in zip(source_cells, target_encoder.cells[direction]):
            target_cell.set_logical_weights(source_cell.logical_weights())
    rest = [_non_cell_weights(encoder) for encoder in (source_encoder, target_encoder)]
    if len(rest[0]) != len(rest[1]):
        raise ValueError(f"The source's LSTM holds {len(rest[0])} carried-state variables, "
                         f"this model's {len(rest[1])}; expected the same statefulness.")
    for source_variable, target_variable in zip(*rest):
        target_variable.assign(source_variable.numpy())


def _non_cell_weights(encoder):
    """A `ResidualBiLSTM`'s variables outside its cells (the carried state if stateful)."""
    in_cells = {id(v) for cells in encoder.cells.values() for cell in cells
                for v in cell.weights}
    return [v for v in encoder.weights if id(v) not in in_cells]
