"""The optimizers of `keras-elmo train`: Adagrad (published recipe) with sparse row updates, Adam.

The softmax table is the largest weight of a biLM (`(vocab_size, projection_dim)`: 55k x 128
for the small model on People's Daily, 793k x 512 published), yet a sampled-softmax step
touches only the rows of its targets and negatives. Its gradient arrives as
`tf.IndexedSlices`; `SparseAdagrad` updates just those rows. For Adagrad this is exact, not
an approximation: a row whose gradient is zero keeps its accumulator (`+ 0^2`) and its value
(`- lr * 0 / sqrt(acc)`), so the dense and the sparse update give the same weights
(tests/test_optimizers.py checks it bit for bit). bilm-tf updates this table sparsely too.
Adam has no such identity (its moments decay on every step), so Adam stays dense.

Example:
>>> optimizer = make_optimizer(TrainingConfig.preset("tiny"))  # doctest: +SKIP
>>> optimizer.build(model.trainable_variables)  # doctest: +SKIP
"""

import keras
import tensorflow as tf

from keras_elmo.training.distribute import gather_rows


@keras.saving.register_keras_serializable(package="keras_elmo_training")
class SparseAdagrad(keras.optimizers.Adagrad):
    """`keras.optimizers.Adagrad` that applies a `tf.IndexedSlices` gradient row by row.

    Dense gradients take Keras' own update. For an `IndexedSlices` gradient (repeated
    indices allowed, as `tf.gather`'s gradient has them) the rows are summed per index
    first, then, for those rows only:

        accumulator[rows] += g ** 2
        variable[rows]    -= learning_rate * g / sqrt(accumulator[rows] + epsilon)

    which is Keras' dense formula restricted to the rows with a nonzero gradient. Same
    arguments, variables and checkpoint layout as `keras.optimizers.Adagrad`.

    Example:
    >>> table = keras.Variable(np.ones((5, 2), "float32"))
    >>> optimizer = SparseAdagrad(learning_rate=0.2, initial_accumulator_value=1.0)
    >>> optimizer.apply([tf.IndexedSlices(tf.ones((2, 2)), tf.constant([3, 3]))], [table])
    >>> table.numpy()[3], table.numpy()[0]  # 1 - 0.2 * 2 / sqrt(1 + 4); row 0 unchanged
    (array([0.8211146, 0.8211146], dtype=float32), array([1., 1.], dtype=float32))
    """

    def update_step(self, gradient, variable, learning_rate):
        if not isinstance(gradient, tf.IndexedSlices):
            return super().update_step(gradient, variable, learning_rate)
        accumulator = self._accumulators[self._get_variable_index(variable)]
        rows, position = tf.unique(gradient.indices)
        values = tf.math.unsorted_segment_sum(tf.cast(gradient.values, variable.dtype),
                                              position, tf.shape(rows)[0])
        lr = tf.cast(learning_rate, variable.dtype)
        accumulator, variable = _tf_variable(accumulator), _tf_variable(variable)
        # Row reads only: a whole read of a row-updated table copies it (see gather_rows).
        accumulated = gather_rows(accumulator, rows, like=variable) + tf.square(values)
        accumulator.scatter_update(tf.IndexedSlices(accumulated, rows))
        step = lr * values / tf.sqrt(accumulated + self.epsilon)
        variable.scatter_sub(tf.IndexedSlices(step, rows))
        return None


def _tf_variable(variable):
    """The `tf.Variable` behind a Keras variable (the optimizer may hand either)."""
    return variable.value if isinstance(variable, keras.Variable) else variable


def make_optimizer(config):
    """The optimizer a `TrainingConfig` names: `SparseAdagrad` or `keras.optimizers.Adam`,
    inside a `keras.optimizers.LossScaleOptimizer` for `precision="mixed_float16"` (its
    `scale_loss` multiplies the loss by the dynamic scale; `apply` divides the gradients
    by it and skips a step whose gradients are not finite, halving the scale)."""
    if config.optimizer == "adam":
        optimizer = keras.optimizers.Adam(learning_rate=config.learning_rate)
    else:
        optimizer = SparseAdagrad(learning_rate=config.learning_rate,
                                  initial_accumulator_value=config.initial_accumulator_value)
    if config.precision == "mixed_float16":
        return keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer


def inner_optimizer(optimizer):
    """The optimizer that updates the weights (inside a `LossScaleOptimizer`, or itself)."""
    return getattr(optimizer, "inner_optimizer", optimizer)


def scheduled_learning_rate(config, fraction_done):
    """The learning rate of a `TrainingConfig` at `fraction_done` (in [0, 1]) of the run.

    `"constant"`: `learning_rate` throughout. `"linear-decay"`:
    `learning_rate * (1 - fraction_done)`, so the last steps take ever smaller updates
    and the run ends annealed.

    Example:
    >>> scheduled_learning_rate(config.replace(learning_rate_schedule="linear-decay"), 0.25)
    0.0015  # doctest: +SKIP  (learning_rate 0.002)
    """
    if config.learning_rate_schedule == "constant":
        return float(config.learning_rate)
    share = min(max(float(fraction_done), 0.0), 1.0)
    return float(config.learning_rate) * (1.0 - share)


def scale_gradient(gradient, factor):
    """`gradient * factor` for a dense tensor or a `tf.IndexedSlices` (kept sparse)."""
    if isinstance(gradient, tf.IndexedSlices):
        return tf.IndexedSlices(gradient.values * factor, gradient.indices, gradient.dense_shape)
    return gradient * factor
