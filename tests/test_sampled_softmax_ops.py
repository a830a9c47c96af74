"""`SharedSoftmax.sampled_nll` in plain ops (GPU kernels, XLA) equals TensorFlow's
`tf.nn.sampled_softmax_loss` for the same negatives, accidental hits included."""

import numpy as np
import tensorflow as tf

from keras_elmo.training.softmax import SharedSoftmax


def test_plain_op_sampled_loss_equals_tensorflows():
    softmax = SharedSoftmax(vocab_size=60, input_dim=8, num_sampled=40)
    softmax.build()
    softmax.bias.assign(np.random.default_rng(0).normal(size=60).astype("float32"))
    hidden = tf.constant(np.random.default_rng(1).normal(size=(30, 8)), tf.float32)
    targets = tf.constant(np.random.default_rng(2).integers(0, 60, 30))
    negatives = softmax.sample(targets)
    hits = int(tf.reduce_sum(tf.cast(tf.equal(targets[:, None], negatives[0][None]), tf.int32)))
    assert hits > 0  # 40 of 60 ids sampled: several targets are among them

    def ours():
        return softmax.sampled_nll(hidden, targets, negatives)

    def theirs():
        return tf.nn.sampled_softmax_loss(
            weights=softmax.embeddings.value, biases=softmax.bias.value,
            labels=targets[:, None], inputs=hidden, num_sampled=40, num_classes=60,
            remove_accidental_hits=True, sampled_values=negatives)

    results = []
    for loss_fn in (ours, theirs):
        with tf.GradientTape() as tape:
            loss = loss_fn()
            total = tf.reduce_sum(loss)
        results.append((loss.numpy(), tape.gradient(total, softmax.trainable_variables)))
    (loss, grads), (expected, expected_grads) = results
    np.testing.assert_allclose(loss, expected, rtol=1e-5, atol=1e-6)
    assert isinstance(grads[0], tf.IndexedSlices)  # the table's rows stay sparse
    for grad, expected_grad in zip(grads, expected_grads):
        np.testing.assert_allclose(tf.convert_to_tensor(grad).numpy(),
                                   tf.convert_to_tensor(expected_grad).numpy(), atol=1e-5)
