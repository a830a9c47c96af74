"""`LanguageModel`: the biLM's training objective, a head over a `BiLM` backbone
(docs/model.md section 7).

The backbone (`keras_elmo.BiLM`: char CNN token encoder -> residual biLSTM) is built once
and held, not copied: the head reads its token encoder and its biLSTM, and adds the shared
softmax (`SharedSoftmax`) and the dropout on the top output. The token encoder and the
softmax are shared by the two directions; the LSTM stacks are not. What a run trains is the
backbone object itself: it is what weights.hdf5 is written from, what `--init-from` loads
into and what an export or an `ElmoLayer` wraps.

Inputs are whole sentences `<S> t1 ... tn </S>` (see `keras_elmo.training.dataset`). The
forward LM's top output at position t predicts token t+1, the backward LM's top output at
position t predicts token t-1; so the boundary tokens are targets too (`</S>` forward, `<S>`
backward), as in bilm-tf. A sentence of n words gives n + 1 targets per direction.

    loss = 0.5 * (forward mean NLL + backward mean NLL)   over the real targets

Dropout: the backbone's (`BiLM(dropout=...)`) on every LSTM layer's input, the head's on the
top output before the softmax.

Example:
>>> model = LanguageModel(BiLM(BiLMOptions.tiny()), vocab_size=50)
>>> ids = keras_elmo.batch_to_ids([["<S>", "a", "b", "</S>"]])
>>> sums = model.nll_sums(ids, tf.constant([[0, 7, 8, 1]]))
>>> float(sums["count"])  # 3 targets per direction
3.0
"""

import keras
import tensorflow as tf

from keras_elmo.backend.tensorflow import in_xla_function
from keras_elmo.models.bilm import BiLM
from keras_elmo.text.characters import token_mask
from keras_elmo.training.softmax import SharedSoftmax
from keras_elmo.validation import check_fraction


@keras.saving.register_keras_serializable(package="keras_elmo")
class LanguageModel(keras.Model):
    """The joint forward/backward language-model objective over a `BiLM` backbone.

    Args:
        backbone: `keras_elmo.BiLM`, stateless, held as it is (its weights are the ones
            trained); built with the training recipe's `dropout`.
        vocab_size: int, words of the softmax (`n_tokens_vocab`).
        dropout: float in [0, 1), dropout on the top output before the softmax in training.
        num_sampled: int, sampled-softmax negatives (`< vocab_size`).
        use_sampled_softmax: bool, train with the sampled softmax (evaluation is always
            full: `nll_sums(..., sampled=False)`).

    Call arguments:
        inputs: int32 char ids `(batch, T, max_characters_per_token)`, boundaries included,
            padding rows all zero, real tokens first; a word model's dict `{"char_ids":
            ..., "word_ids": (batch, T)}` (`model_inputs` of a batch).
        training: bool, enables dropout; in training the biLSTM runs the loop whose backward
            pass is written for whole sequences (`ResidualBiLSTM`).

    Inside an XLA-compiled function (a training step with `jit_compile`) every shape
    follows from the batch's: the token encoder encodes every position
    (`CharCNNEmbedder`) and the softmax scores every position, the padding's NLL zeroed,
    instead of gathering the real targets.

    Returns (call):
        dict `{"embeddings": (batch, T, P), "layers": (batch, num_layers, T, 2P),
        "mask": bool (batch, T)}`; the forward half of "layers" at each row's `</S>` and
        the backward half at `<S>` are zero (no target reads them, so they are not
        computed: `ResidualBiLSTM`'s `skip_boundary_steps`).
    """

    def __init__(self, backbone, vocab_size, dropout=0.0, num_sampled=8192,
                 use_sampled_softmax=False, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(backbone, BiLM) or backbone.stateful:
            raise ValueError("LanguageModel expects a stateless keras_elmo.BiLM backbone; "
                             f"received {backbone!r}.")
        dropout = check_fraction("dropout", dropout)
        # === Layers ===
        self.backbone = backbone
        self.output_dropout = keras.layers.Dropout(float(dropout), name="output_dropout",
                                                   dtype=backbone.token_embedder.dtype_policy)
        # The softmax and the loss stay float32 under a mixed precision backbone.
        self.softmax = SharedSoftmax(int(vocab_size), backbone.options.projection_dim,
                                     num_sampled=min(int(num_sampled), int(vocab_size) - 1),
                                     name="softmax", dtype="float32")
        self.softmax.build((None, backbone.options.projection_dim))
        self.built = True
        # === Config ===
        self.options = backbone.options
        self.vocab_size = int(vocab_size)
        self.dropout_rate = float(dropout)
        self.num_sampled = int(num_sampled)
        self.use_sampled_softmax = bool(use_sampled_softmax)

    @classmethod
    def from_training_config(cls, config, backbone=None, vocabulary=None):
        """The head of a `keras_elmo.training.config.TrainingConfig` (vocab size must be set)
        over `backbone`, or over a new `BiLM` of the config's options and dropout (and
        `vocabulary`, a vocabulary model's `TokenVocabulary`)."""
        if config.n_tokens_vocab is None:
            raise ValueError("The training config has no n_tokens_vocab; set it from the "
                             "vocabulary before building the model.")
        if backbone is None:
            # float32 variables in every precision; "mixed_*" computes in 16 bits.
            backbone = BiLM(config.options, dropout=config.dropout, name="bilm",
                            dtype=config.precision, vocabulary=vocabulary)
        return cls(backbone, config.n_tokens_vocab, dropout=config.dropout,
                   num_sampled=config.num_sampled,
                   use_sampled_softmax=config.use_sampled_softmax)

    def call(self, inputs, training=False):
        mask = token_mask(char_ids_of(inputs))  # (batch, T)
        embeddings = self.backbone.token_embeddings(inputs, training=training)  # (batch, T, P)
        # No target reads the forward output at `</S>` or the backward one at `<S>`.
        layers = self.backbone.contextual_encoder(
            embeddings, mask=mask, training=training,
            skip_boundary_steps=True)  # (batch, L, T, 2P)
        return {"embeddings": embeddings, "layers": layers, "mask": mask}

    def nll_sums(self, inputs, token_ids, training=False, sampled=None, negatives=None):
        """Summed NLL of each direction over the real targets of a batch.

        Args:
            inputs: int32 char ids `(batch, T, max_chars)`, `<S> ... </S>` per row, or a
                word model's `{"char_ids": ..., "word_ids": (batch, T)}` (`model_inputs`).
            token_ids: int `(batch, T)`, the vocabulary id of every position.
            training: bool, dropout on.
            sampled: bool or None, sampled softmax (None: `use_sampled_softmax` when
                training, full softmax otherwise).
            negatives: None, or negatives drawn beforehand for these targets (sampled
                softmax only): an XLA-compiled step takes `sample_negatives(inputs,
                token_ids)`, drawn outside it (the sampler has no XLA kernel), for every
                position; elsewhere, for the real targets.

        Returns:
            dict of float32 scalars `forward`, `backward` (summed NLL) and `count` (targets
            per direction = sum over rows of `length - 1`).
        """
        if sampled is None:
            sampled = self.use_sampled_softmax and training
        token_ids = tf.cast(token_ids, tf.int32)
        # In an XLA-compiled step every position is scored: the shapes follow from the
        # batch's, as XLA needs.
        every_position = in_xla_function()
        if every_position:  # zero-size batches give zero sums on these paths by themselves
            # (no cond: XLA would make every input of the step a compile-time constant and
            # compile again after each weight update)
            return self._nll_sums(inputs, token_ids, training, sampled, negatives,
                                  every_position)
        # A replica can get an empty batch at the end of an epoch (tf.distribute pads the
        # last step with zero-size batches); its sums are zero.
        return tf.cond(tf.size(token_ids) > 0,
                       lambda: self._nll_sums(inputs, token_ids, training, sampled,
                                              negatives, every_position),
                       lambda: {k: tf.constant(0.0) for k in ("forward", "backward", "count")})

    def target_count(self, inputs):
        """Targets per direction of a batch, float32 scalar (`nll_sums(...)["count"]`)."""
        valid = token_mask(char_ids_of(inputs))[:, 1:]  # (batch, T-1)
        return tf.reduce_sum(tf.cast(valid, tf.float32))

    def sample_negatives(self, inputs, token_ids):
        """`{"forward": ..., "backward": ...}`: each direction's sampled-softmax negatives
        for the targets of every position of a batch (`SharedSoftmax.sample`), drawn
        outside an XLA-compiled step for its `nll_sums(negatives=...)`."""
        forward, backward = self._targets(inputs, tf.cast(token_ids, tf.int32),
                                          every_position=True)
        return {"forward": self.softmax.sample(forward),
                "backward": self.softmax.sample(backward)}

    @staticmethod
    def _targets(inputs, token_ids, every_position):
        """The forward and backward targets of a batch, `(N,)` each: the real ones, or
        those of every position `(batch * (T-1),)`."""
        # Forward: output t predicts t+1; backward: output t predicts t-1.
        forward, backward = token_ids[:, 1:], token_ids[:, :-1]  # (batch, T-1)
        if every_position:
            return tf.reshape(forward, (-1,)), tf.reshape(backward, (-1,))
        valid = token_mask(char_ids_of(inputs))[:, 1:]  # (batch, T-1)
        return tf.boolean_mask(forward, valid), tf.boolean_mask(backward, valid)

    def _nll_sums(self, inputs, token_ids, training, sampled, negatives, every_position):
        outputs = self(inputs, training=training)
        top = outputs["layers"][:, -1]  # (batch, T, 2P)
        top = self.output_dropout(top, training=training)
        p = self.options.projection_dim
        valid = outputs["mask"][:, 1:]  # (batch, T-1): a real token follows / precedes
        forward_hidden, backward_hidden = top[:, :-1, :p], top[:, 1:, p:]  # (batch, T-1, P)
        if every_position:  # the padding's NLL zeroed below
            forward_hidden = tf.reshape(forward_hidden, (-1, p))  # (N, P), N = batch*(T-1)
            backward_hidden = tf.reshape(backward_hidden, (-1, p))  # (N, P)
        else:  # the real targets only
            forward_hidden = tf.boolean_mask(forward_hidden, valid)  # (N, P)
            backward_hidden = tf.boolean_mask(backward_hidden, valid)  # (N, P)
        forward_targets, backward_targets = self._targets(inputs, token_ids,
                                                          every_position)  # (N,) each
        if sampled:
            negatives = negatives or {"forward": None, "backward": None}
            forward = self.softmax.sampled_nll(forward_hidden, forward_targets,
                                               negatives["forward"])
            backward = self.softmax.sampled_nll(backward_hidden, backward_targets,
                                                negatives["backward"])
        else:
            forward = self.softmax.full_nll(forward_hidden, forward_targets)
            backward = self.softmax.full_nll(backward_hidden, backward_targets)
        if every_position:
            real = tf.reshape(valid, (-1,))  # (N,)
            forward = tf.where(real, forward, tf.zeros_like(forward))
            backward = tf.where(real, backward, tf.zeros_like(backward))
        return {"forward": tf.reduce_sum(forward), "backward": tf.reduce_sum(backward),
                "count": tf.reduce_sum(tf.cast(valid, tf.float32))}

    def get_config(self):
        return {"backbone": keras.saving.serialize_keras_object(self.backbone),
                "vocab_size": self.vocab_size, "dropout": self.dropout_rate,
                "num_sampled": self.num_sampled,
                "use_sampled_softmax": self.use_sampled_softmax,
                "name": self.name, "trainable": self.trainable}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["backbone"] = keras.saving.deserialize_keras_object(config["backbone"])
        return cls(**config)


def model_inputs(batch):
    """The backbone's inputs of a training batch (`keras_elmo.training.dataset`): its char
    ids, or a word model's `{"char_ids": ..., "word_ids": ...}`."""
    if "word_ids" in batch:
        return {"char_ids": batch["char_ids"], "word_ids": batch["word_ids"]}
    return batch["char_ids"]


def char_ids_of(inputs):
    """The int32 char ids `(batch, T, max_chars)` of `model_inputs`' value."""
    return tf.cast(inputs["char_ids"] if isinstance(inputs, dict) else inputs, tf.int32)
