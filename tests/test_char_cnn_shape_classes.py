"""The char CNN's convolution shape classes: few distinct shapes at inference, the same
numbers as exact shapes, exact shapes in training."""

import numpy as np
import pytest
import tensorflow as tf

import keras_elmo
from keras_elmo.formats.options import BiLMOptions
from keras_elmo.layers.char_cnn_embedder import CharCNNEmbedder, conv_row_class


@pytest.mark.parametrize("rows, expected", [
    (1, 8), (8, 8), (9, 16), (63, 64), (64, 64), (65, 96), (96, 96), (97, 128), (300, 320)])
def test_conv_row_class(rows, expected):
    assert int(conv_row_class(tf.constant(rows))) == expected


def _words(count):
    """`count` distinct tokens of 1-6 characters."""
    return [f"w{i}"[: 1 + i % 6] + str(i) for i in range(count)]


def _recorded_shapes(embedder, batches, training):
    """The `(rows, K)` of every convolution input `embedder` makes over `batches`."""
    from keras.src.backend.tensorflow import nn as backend_nn  # what keras.ops.conv calls

    shapes = []
    saved = backend_nn.tf.nn.convolution

    def record(inputs, *args, **kwargs):
        shapes.append(tuple(int(d) for d in inputs.shape[:2]))
        return saved(inputs, *args, **kwargs)

    backend_nn.tf.nn.convolution = record
    try:
        for tokens in batches:
            embedder(keras_elmo.batch_to_ids([tokens]), training=training)
    finally:
        backend_nn.tf.nn.convolution = saved
    return shapes


def test_inference_meets_few_convolution_shapes_and_training_exact_ones():
    embedder = CharCNNEmbedder.from_options(BiLMOptions.tiny())
    batches = [_words(n) for n in range(1, 41)]  # 2..41 rows with the padding row
    inference = _recorded_shapes(embedder, batches, training=False)
    training = _recorded_shapes(embedder, batches, training=True)
    assert {rows for rows, _ in inference} == {8, 16, 24, 32, 40, 48}
    assert {positions % 8 for _, positions in inference} == {0}
    assert {rows for rows, _ in training} == set(range(2, 42))
    assert {positions % 8 for _, positions in training} != {0}  # exact K


def test_shape_classes_give_the_exact_shapes_numbers():
    embedder = CharCNNEmbedder.from_options(BiLMOptions.tiny())
    rng = np.random.default_rng(3)
    for count in (1, 5, 17, 70):
        tokens = [w * int(rng.integers(1, 4)) for w in _words(count)]
        ids = keras_elmo.batch_to_ids([tokens, tokens[: count // 2]])
        classes = embedder(ids, training=False).numpy()
        exact = embedder(ids, training=True).numpy()
        static = tf.function(embedder, jit_compile=True)(ids).numpy()  # every position
        np.testing.assert_allclose(classes, exact, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(classes, static, rtol=1e-6, atol=1e-6)
