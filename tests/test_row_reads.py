"""The softmax table is read row by row in training, never whole.

`SparseAdagrad` updates the table with `scatter_*`, which puts the variable in TensorFlow's
copy-on-read mode: a whole read (`ReadVariableOp`) then copies the table (28 MB for the
small model on People's Daily, 1.6 GB at the published vocabulary), and the step used to do
that five times (measured: 11 ms of a 68 ms step). `gather_rows` reads rows of the
replica's own variable (`ResourceGather`) instead.
"""

import io

import keras
import numpy as np
import tensorflow as tf

from keras_elmo.training.distribute import gather_rows
from keras_elmo.training.optimizers import SparseAdagrad
from keras_elmo.training.softmax import SharedSoftmax
from keras_elmo.training.trainer import Trainer
from test_gpu_kernels import device_ops


def _op_types(function, *args):
    return device_ops(function.get_concrete_function(*args).graph.as_graph_def())


def test_the_sampled_softmax_reads_rows_under_a_strategy_with_the_same_gradient():
    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        softmax = SharedSoftmax(vocab_size=50, input_dim=4, num_sampled=6)
        softmax.build()
    hidden = tf.constant(np.random.default_rng(0).normal(size=(5, 4)), tf.float32)
    targets = tf.constant([3, 7, 7, 40, 1])
    negatives = softmax.sample(targets)

    @tf.function
    def loss_and_gradient(hidden, targets):
        def replica(hidden, targets):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(softmax.sampled_nll(hidden, targets, negatives))
            return loss, tape.gradient(loss, softmax.trainable_variables)
        return strategy.run(replica, (hidden, targets))

    ops = _op_types(loss_and_gradient, hidden, targets)
    assert "ResourceGather" in ops and "ReadVariableOp" not in ops, sorted(ops)
    loss, (d_table, d_bias) = loss_and_gradient(hidden, targets)
    assert isinstance(d_table, tf.IndexedSlices)
    # the same numbers from plain tensors
    table, bias = (tf.constant(v.numpy()) for v in (softmax.embeddings, softmax.bias))
    with tf.GradientTape() as tape:
        tape.watch([table, bias])
        sampled, true_count, sampled_count = negatives
        true = tf.reduce_sum(hidden * tf.gather(table, targets), 1) + tf.gather(bias, targets)
        true -= tf.math.log(true_count[:, 0])
        other = hidden @ tf.transpose(tf.gather(table, sampled)) + tf.gather(bias, sampled)
        other = tf.where(tf.equal(tf.cast(targets, tf.int64)[:, None], sampled[None]),
                         other + tf.float32.min, other) - tf.math.log(sampled_count)
        want = tf.reduce_sum(-tf.nn.log_softmax(tf.concat([true[:, None], other], 1))[:, 0])
    want_table, want_bias = tape.gradient(want, [table, bias])
    np.testing.assert_allclose(float(loss), float(want), rtol=1e-6)
    np.testing.assert_allclose(tf.convert_to_tensor(d_table), tf.convert_to_tensor(want_table),
                               atol=1e-6)
    np.testing.assert_allclose(tf.convert_to_tensor(d_bias), tf.convert_to_tensor(want_bias),
                               atol=1e-6)


def test_sparse_adagrad_reads_its_accumulator_rows_in_an_update_call():
    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        table = keras.Variable(np.ones((6, 2), "float32"))
        optimizer = SparseAdagrad(learning_rate=0.2, initial_accumulator_value=1.0)
        optimizer.build([table])
    rows = tf.IndexedSlices(tf.ones((2, 2)), tf.constant([3, 3]))

    @tf.function
    def apply(values):
        strategy.run(lambda v: optimizer.apply([tf.IndexedSlices(v, rows.indices)], [table]),
                     (values,))

    assert "ResourceGather" in _op_types(apply, rows.values)
    apply(rows.values)
    np.testing.assert_allclose(table.numpy()[3], 1 - 0.2 * 2 / np.sqrt(1 + 4), rtol=1e-6)
    np.testing.assert_array_equal(table.numpy()[0], [1.0, 1.0])


def test_gather_rows_of_a_plain_variable_and_outside_a_strategy():
    variable = tf.Variable(np.arange(12, dtype="float32").reshape(6, 2))
    np.testing.assert_array_equal(gather_rows(variable, [4, 1]), [[8, 9], [2, 3]])
    np.testing.assert_array_equal(gather_rows(keras.Variable(variable.numpy()), [5]), [[10, 11]])


def test_the_training_step_reads_the_softmax_table_by_rows(tiny_corpus):
    config, vocab, model_dir, files = tiny_corpus
    config = config.replace(full_softmax_max_vocab=4)  # the sampled softmax
    trainer = Trainer(config, vocab, model_dir, stream=io.StringIO())
    dataset = trainer.distributed_dataset(files, epoch=0)
    step = trainer._build_step(dataset.element_spec)
    assert "ResourceGather" in device_ops(step.get_concrete_function().graph.as_graph_def())
