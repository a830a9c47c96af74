"""`ElmoPreprocessor`: tokens to a biLM's ids on Python values and in `tf.data`, the ids of
`batch_to_ids` and of a vocabulary model's `batch_to_ids`. (Under JAX and PyTorch:
tests/test_backends.py and tests/test_without_tensorflow.py.)"""

import os

import numpy as np
import pytest
import tensorflow as tf

import keras_elmo
from keras_elmo import ElmoPreprocessor, batch_to_ids

HERE = os.path.dirname(os.path.abspath(__file__))
EFML_DIR = os.path.join(HERE, "fixtures", "efml", "tiny_no_words")
SENTENCES = [["The", "cat", "", "sat"], [], ["我", "爱", "b" * 300]]


def _padded(sentences):
    steps = max(len(s) for s in sentences)
    return [s + [""] * (steps - len(s)) for s in sentences]


def test_python_lists_numpy_and_tf_strings_give_batch_to_ids():
    preprocessor = ElmoPreprocessor()
    expected = batch_to_ids(SENTENCES)
    np.testing.assert_array_equal(preprocessor(SENTENCES), expected)
    np.testing.assert_array_equal(preprocessor(np.array(_padded(SENTENCES))), expected)
    np.testing.assert_array_equal(preprocessor(tf.constant(_padded(SENTENCES))), expected)
    np.testing.assert_array_equal(preprocessor(tf.ragged.constant(SENTENCES)), expected)


def test_in_tf_data_the_ids_come_per_batch():
    preprocessor = ElmoPreprocessor()
    dataset = tf.data.Dataset.from_tensor_slices(tf.ragged.constant(SENTENCES)).batch(3)
    (ids,) = list(dataset.map(preprocessor))
    np.testing.assert_array_equal(ids.numpy(), batch_to_ids(SENTENCES))


def test_a_vocabulary_model_gets_its_own_ids_in_python_and_in_the_graph():
    bilm = keras_elmo.load_bilm(EFML_DIR)
    sentences = [["the", "cat", "唽壝"], ["北京"]]
    preprocessor = ElmoPreprocessor.from_bilm(bilm)
    expected = bilm.batch_to_ids(sentences)
    np.testing.assert_array_equal(preprocessor(sentences), expected)
    np.testing.assert_array_equal(preprocessor(tf.ragged.constant(sentences)), expected)
    np.testing.assert_array_equal(ElmoPreprocessor.from_preset(EFML_DIR)(sentences), expected)
    rebuilt = ElmoPreprocessor.from_config(preprocessor.get_config())
    np.testing.assert_array_equal(rebuilt(sentences), expected)


@pytest.mark.parametrize("value", ["the cat", ["the", "cat"]])
def test_untokenised_text_is_one_line(value):
    with pytest.raises(ValueError, match="tokenised sentences: a list of lists of str") as error:
        ElmoPreprocessor()(value)
    assert "\n" not in str(error.value)
