"""`SparseAdagrad` updates the rows of an IndexedSlices gradient exactly as dense Adagrad does."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_elmo.training.config import TrainingConfig
from keras_elmo.training.optimizers import SparseAdagrad, make_optimizer, scale_gradient


def _numpy_adagrad(table, accumulator, dense_gradient, lr, epsilon):
    accumulator = accumulator + dense_gradient ** 2
    return table - lr * dense_gradient / np.sqrt(accumulator + epsilon), accumulator


def test_sparse_rows_equal_dense_adagrad_and_numpy():
    rng = np.random.default_rng(0)
    start = rng.normal(size=(7, 3)).astype("float32")
    indices = np.array([4, 1, 4, 6, 1, 4], "int32")  # repeated, unsorted
    values = rng.normal(size=(6, 3)).astype("float32")
    dense_gradient = np.zeros_like(start)
    np.add.at(dense_gradient, indices, values)

    sparse_table, dense_table = keras.Variable(start), keras.Variable(start)
    sparse = SparseAdagrad(learning_rate=0.2, initial_accumulator_value=1.0)
    dense = keras.optimizers.Adagrad(learning_rate=0.2, initial_accumulator_value=1.0)
    expected, accumulator = start, np.ones_like(start)
    for _ in range(3):
        sparse.apply([tf.IndexedSlices(tf.constant(values), tf.constant(indices))],
                     [sparse_table])
        dense.apply([tf.constant(dense_gradient)], [dense_table])
        expected, accumulator = _numpy_adagrad(expected, accumulator, dense_gradient, 0.2,
                                               sparse.epsilon)
    np.testing.assert_array_equal(sparse_table.numpy(), dense_table.numpy())
    np.testing.assert_allclose(sparse_table.numpy(), expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(sparse_table.numpy()[[0, 2, 3, 5]], start[[0, 2, 3, 5]])
    np.testing.assert_array_equal(sparse._accumulators[0].numpy(),
                                  dense._accumulators[0].numpy())


def test_dense_gradients_take_keras_update():
    start = np.arange(6, dtype="float32").reshape(2, 3)
    a, b = keras.Variable(start), keras.Variable(start)
    gradient = tf.constant(np.full((2, 3), 0.5, "float32"))
    SparseAdagrad(learning_rate=0.1).apply([gradient], [a])
    keras.optimizers.Adagrad(learning_rate=0.1).apply([gradient], [b])
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_sparse_update_inside_tf_function():
    table = keras.Variable(np.ones((4, 2), "float32"))
    optimizer = SparseAdagrad(learning_rate=0.5, initial_accumulator_value=1.0)
    optimizer.build([table])

    @tf.function
    def apply(values, indices):
        optimizer.apply([tf.IndexedSlices(values, indices)], [table])

    apply(tf.ones((1, 2)), tf.constant([2]))
    expected = 1.0 - 0.5 * 1.0 / np.sqrt(2.0 + optimizer.epsilon)
    np.testing.assert_allclose(table.numpy()[2], [expected, expected], rtol=1e-6)
    np.testing.assert_array_equal(table.numpy()[[0, 1, 3]], np.ones((3, 2)))


@pytest.mark.parametrize("name, cls", [("adagrad", SparseAdagrad),
                                       ("adam", keras.optimizers.Adam)])
def test_make_optimizer_follows_the_config(name, cls):
    config = TrainingConfig.preset("tiny").replace(optimizer=name, learning_rate=0.01)
    optimizer = make_optimizer(config)
    assert type(optimizer) is cls
    assert float(optimizer.learning_rate) == pytest.approx(0.01)


def test_scale_gradient_keeps_slices_sparse():
    scaled = scale_gradient(tf.IndexedSlices(tf.ones((2, 3)), tf.constant([0, 5])), 0.5)
    assert isinstance(scaled, tf.IndexedSlices)
    np.testing.assert_array_equal(scaled.values.numpy(), np.full((2, 3), 0.5))
    np.testing.assert_array_equal(scaled.indices.numpy(), [0, 5])
    np.testing.assert_array_equal(scale_gradient(tf.ones((2,)), 2.0).numpy(), [2.0, 2.0])
