"""`ElmoPreprocessor`: string tokens -> what a biLM takes, the keras-hub way.

keras-hub splits a model into a backbone, which runs on every Keras backend, and a
preprocessing layer that turns text into the backbone's integer inputs outside it (in
`tf.data`, or on Python values). `ElmoPreprocessor` is that layer for ELMo: tokens in, char
ids out (and a vocabulary model's word ids), the ids `keras_elmo.batch_to_ids` and
`bilm.batch_to_ids` give.
"""

import keras

from keras_elmo import constants
from keras_elmo.models.string_tokens import is_string_tensor, string_token_ids
from keras_elmo.text.characters import batch_to_ids
from keras_elmo.text.token_vocabulary import TokenVocabulary, vocabulary_batch_to_ids


@keras.saving.register_keras_serializable(package="keras_elmo")
class ElmoPreprocessor(keras.layers.Layer):
    """Tokenised sentences -> a biLM's inputs, on every backend, in `tf.data` or in Python.

    Runs on:
    - Python values (no TensorFlow needed): a list of sentences, each a list of `str`
      tokens (lengths may differ; a sentence may be empty), or a numpy array of str
      `(batch, num_tokens)` padded with `""`. Returns numpy int32 arrays.
    - TensorFlow values, under every Keras backend (TensorFlow installed): tf.string
      `(batch, num_tokens)` padded with `""`, or a ragged `(batch, (num_tokens))`, e.g.
      inside `tf.data.Dataset.map`. Returns int32 `tf.Tensor`s (numpy arrays when called
      eagerly outside `tf.data` on JAX or PyTorch, which take them as they are).
    An empty string token is no token (an all-zero row), wherever it stands.

    Args:
        max_characters_per_token: int, char ids per token (50, the published models').
        vocabulary: a vocabulary model's `keras_elmo.TokenVocabulary` (or its config
            dict); None for a byte model (UTF-8 bytes, as bilm-tf and AllenNLP).
        **kwargs: base layer arguments (`name`, ...).

    Call arguments:
        inputs: the tokens, as above.

    Returns:
        int32 char ids `(batch, num_tokens, max_characters_per_token)`; a model with a word
        table gets `{"char_ids": ..., "word_ids": (batch, num_tokens)}`.

    Example:
    >>> bilm = keras_elmo.BiLM(keras_elmo.BiLMOptions.tiny())
    >>> preprocessor = ElmoPreprocessor.from_bilm(bilm)
    >>> ids = preprocessor([["The", "cat", "sat"], ["Hi"]])  # numpy, on any backend
    >>> ids.shape
    (2, 3, 50)
    >>> keras_elmo.ElmoLayer(bilm)(ids).shape
    (2, 3, 16)
    >>> tokens = tf.ragged.constant([["The", "cat"], ["Hi"]])
    >>> dataset = tf.data.Dataset.from_tensor_slices(tokens).batch(2).map(preprocessor)
    >>> next(iter(dataset)).shape  # ids in tf.data
    TensorShape([2, 2, 50])
    """

    def __init__(self, max_characters_per_token=constants.MAX_CHARACTERS_PER_TOKEN,
                 vocabulary=None, **kwargs):
        super().__init__(**kwargs)
        self.max_characters_per_token = int(max_characters_per_token)
        self.vocabulary = (None if vocabulary is None
                           else TokenVocabulary.from_config(vocabulary))
        if self.vocabulary is not None:
            self.max_characters_per_token = self.vocabulary.max_characters_per_token
        self._lookup = None  # a vocabulary's TensorFlow tables, made at the first tf call
        # Strings and Python lists reach `call` as they are (Keras would convert them).
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        self.built = True

    @classmethod
    def from_bilm(cls, bilm, **kwargs):
        """The preprocessor of a `BiLM` (or an `ElmoLayer`): its chars per token and, for a
        vocabulary model, its vocabulary."""
        bilm = getattr(bilm, "bilm", bilm)
        if bilm.options.char_vocabulary:
            bilm.require_vocabulary("ElmoPreprocessor.from_bilm")
            return cls(vocabulary=bilm.vocabulary, **kwargs)
        return cls(max_characters_per_token=bilm.options.max_characters_per_token, **kwargs)

    @classmethod
    def from_preset(cls, preset, **kwargs):
        """The preprocessor of a published model's catalog name, a model archive's URL or
        a model directory (`keras_elmo.load_bilm`'s presets): reads its options and
        vocabulary, not its weights."""
        from keras_elmo.formats.model_vocabulary import read_model_vocabulary
        from keras_elmo.formats.options import BiLMOptions
        from keras_elmo.pretrained.resolve import resolve_files

        files = resolve_files(preset)
        if files.efml_dir is not None:
            from keras_elmo.formats import efml_weights

            return cls(vocabulary=efml_weights.efml_vocabulary(files.efml_dir), **kwargs)
        if files.module_dir is not None:  # a TF Hub module: a byte model
            from keras_elmo.formats.tfhub_module import read_tfhub_module

            options = BiLMOptions.from_dict(
                read_tfhub_module(files.module_dir, weights=False).options)
            return cls(max_characters_per_token=options.max_characters_per_token, **kwargs)
        options = BiLMOptions.from_file(files.options_file)
        if options.char_vocabulary:
            return cls(vocabulary=read_model_vocabulary(files, options), **kwargs)
        return cls(max_characters_per_token=options.max_characters_per_token, **kwargs)

    def __call__(self, inputs, *args, **kwargs):
        # Python values never enter Keras' call machinery (which converts inputs to tensors
        # and wraps errors in several lines): the ids come from numpy.
        if not is_string_tensor(inputs):
            return self._python_ids(inputs)
        return super().__call__(inputs, *args, **kwargs)

    def call(self, inputs):
        if is_string_tensor(inputs):
            return self._tensorflow_ids(inputs)
        return self._python_ids(inputs)

    def _python_ids(self, inputs):
        sentences = _sentences(inputs)
        if self.vocabulary is None:
            return batch_to_ids(sentences, self.max_characters_per_token)
        ids = vocabulary_batch_to_ids(self.vocabulary, sentences)
        return ids if self.vocabulary.has_words else ids["char_ids"]

    def _tensorflow_ids(self, tokens):
        import tensorflow as tf

        if self.vocabulary is not None and self._lookup is None:
            from keras_elmo.text.vocabulary_lookup import VocabularyLookup

            self._lookup = VocabularyLookup(self.vocabulary)
        from keras_elmo.formats.options import BiLMOptions

        options = BiLMOptions(max_characters_per_token=self.max_characters_per_token)
        ids = string_token_ids(tokens, options, self._lookup,
                               with_words=self.vocabulary is not None
                               and self.vocabulary.has_words)
        if keras.backend.backend() != "tensorflow" and tf.executing_eagerly():
            return tf.nest.map_structure(lambda x: x.numpy(), ids)
        return ids

    def get_config(self):
        config = super().get_config()
        config.update(max_characters_per_token=self.max_characters_per_token,
                      vocabulary=None if self.vocabulary is None
                      else self.vocabulary.get_config())
        return config


def _sentences(inputs):
    """A list of sentences (lists of str) from Python lists or a numpy str array (`""`
    padding kept: an empty token is no token)."""
    if hasattr(inputs, "tolist"):
        inputs = inputs.tolist()
    if isinstance(inputs, (str, bytes)) or not all(isinstance(s, (list, tuple))
                                                   for s in inputs):
        raise ValueError("ElmoPreprocessor expects tokenised sentences: a list of lists of "
                         "str tokens, a numpy str array (batch, num_tokens) or tf.string "
                         f"tokens; received {type(inputs).__name__} holding "
                         f"{type(inputs[0]).__name__ if len(inputs) else 'nothing'}.")
    return [[t.decode("utf-8", "ignore") if isinstance(t, bytes) else t for t in s]
            for s in inputs]
