"""`SharedSoftmax`: the word-level output layer shared by the forward and backward LMs.

`p(w | h) = softmax(h W^T + b)_w` with `W` `(vocab_size, input_dim)` and `b` `(vocab_size,)`
(bilm-tf's `softmax/W`, `softmax/b`). Training with a large vocabulary uses the sampled
softmax (`tf.nn.sampled_softmax_loss`, log-uniform sampler: the vocabulary is sorted by
frequency, as that sampler assumes); evaluation always uses the full softmax.

Example:
>>> softmax = SharedSoftmax(vocab_size=100, input_dim=8)
>>> softmax.build((None, 8))
>>> nll = softmax.full_nll(tf.zeros((3, 8)), tf.constant([4, 5, 6]))  # (3,)
>>> np.allclose(nll, np.log(100))
True
"""

import keras
import tensorflow as tf

from keras_elmo.training.distribute import gather_rows
from keras_elmo.validation import check_int


@keras.saving.register_keras_serializable(package="keras_elmo_training")
class SharedSoftmax(keras.layers.Layer):
    """Full and sampled negative log-likelihood of target words.

    Args:
        vocab_size: int, number of words (`n_tokens_vocab`).
        input_dim: int, size of the hidden vectors (the biLM's `projection_dim`).
        num_sampled: int, negatives of the sampled softmax, `< vocab_size`.
        **kwargs: base layer arguments.

    Call arguments (`full_nll`, `sampled_nll`):
        hidden: float `(N, input_dim)`, one row per prediction.
        targets: int `(N,)`, word ids in `[0, vocab_size)`.

    Returns:
        float `(N,)`, `-log p(target | hidden)` (for `sampled_nll`, the sampled estimate).
    """

    def __init__(self, vocab_size, input_dim, num_sampled=8192, **kwargs):
        super().__init__(**kwargs)
        for name, value in (("vocab_size", vocab_size), ("input_dim", input_dim),
                            ("num_sampled", num_sampled)):
            check_int(name, value)
        if num_sampled >= vocab_size:
            raise ValueError(f"num_sampled must be < vocab_size ({vocab_size}); "
                             f"received {num_sampled}.")
        self.vocab_size = vocab_size
        self.input_dim = input_dim
        self.num_sampled = num_sampled

    def build(self, input_shape=None):
        # bilm-tf: W ~ N(0, 1 / input_dim), b = 0.
        self.embeddings = self.add_weight(
            name="embeddings", shape=(self.vocab_size, self.input_dim),
            initializer=keras.initializers.RandomNormal(stddev=self.input_dim ** -0.5))
        self.bias = self.add_weight(name="bias", shape=(self.vocab_size,), initializer="zeros")

    def logits(self, hidden):
        """`(N, input_dim)` -> `(N, vocab_size)`, in the layer's compute dtype."""
        hidden = tf.cast(hidden, self.compute_dtype)
        return tf.matmul(hidden, tf.cast(self.embeddings, self.compute_dtype),
                         transpose_b=True) + tf.cast(self.bias, self.compute_dtype)

    def full_nll(self, hidden, targets):
        """Exact `-log softmax(h W^T + b)[target]`, `(N,)`, in float32."""
        return tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.cast(targets, tf.int32), logits=self.logits(tf.cast(hidden, tf.float32)))

    def sample(self, targets):
        """Negatives for `sampled_nll`: `num_sampled` distinct log-uniform ids.

        Args:
            targets: int `(N,)`, the true ids (only their expected counts depend on them).

        Returns:
            `(sampled (num_sampled,) int64, true_expected_count (N, 1),
            sampled_expected_count (num_sampled,))`, `tf.nn.sampled_softmax_loss`'s
            `sampled_values`. The sampler has CPU kernels only (and no XLA one): an
            XLA-compiled step samples before it and passes these in.
        """
        return tf.random.log_uniform_candidate_sampler(
            true_classes=tf.cast(targets, tf.int64)[:, tf.newaxis], num_true=1,
            num_sampled=self.num_sampled, unique=True, range_max=self.vocab_size)

    def sampled_nll(self, hidden, targets, negatives=None):
        """Sampled-softmax loss over `negatives` (`sample(targets)` when None), `(N,)`.

        `tf.nn.sampled_softmax_loss`'s formula (`remove_accidental_hits=True`,
        `subtract_log_q=True`) in plain ops, so that it runs on a GPU and compiles with
        XLA: logits `h . W[t] + b[t] - log Q(t)` and `h W[s]^T + b[s] - log Q(s)`, a
        sampled id equal to the target gets `-FLT_MAX` added, then
        `-log softmax(...)[target]`, in float32.
        """
        sampled, true_expected, sampled_expected = (self.sample(targets) if negatives is None
                                                    else negatives)
        hidden = tf.cast(hidden, tf.float32)
        targets = tf.cast(targets, tf.int64)  # (N,)
        # Row reads of the variables: no copy of the table, whose gradient stays
        # IndexedSlices rows (see gather_rows).
        table, bias = self.embeddings, self.bias
        true_logits = (tf.reduce_sum(hidden * gather_rows(table, targets), axis=1)
                       + gather_rows(bias, targets) - tf.math.log(true_expected[:, 0]))  # (N,)
        sampled_logits = tf.matmul(hidden, gather_rows(table, sampled), transpose_b=True) + \
            gather_rows(bias, sampled)  # (N, S)
        hits = tf.equal(targets[:, tf.newaxis], sampled[tf.newaxis, :])  # (N, S)
        sampled_logits = tf.where(hits, sampled_logits + tf.float32.min, sampled_logits)
        sampled_logits -= tf.math.log(sampled_expected)
        logits = tf.concat([true_logits[:, tf.newaxis], sampled_logits], axis=1)  # (N, 1+S)
        return -tf.nn.log_softmax(logits)[:, 0]

    def call(self, hidden):
        return self.logits(hidden)

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, input_dim=self.input_dim,
                      num_sampled=self.num_sampled)
        return config
