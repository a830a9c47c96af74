"""String tokens to a biLM's ids inside TensorFlow (`tf.string`, padded or ragged).

`ElmoLayer` on Keras' TensorFlow backend and `ElmoPreprocessor` on `tf.data` under every
backend take string tokens through these functions; the ids are those of
`keras_elmo.batch_to_ids` (a byte model) or of the model's vocabulary
(`keras_elmo.text.vocabulary_lookup`), and an empty string is no token. TensorFlow only:
the functions import it when called.

    is_string_tensor(x)                        a tf.string tensor or ragged tensor
    string_token_ids(tokens, options, lookup)  char ids, or {"char_ids", "word_ids"}
    string_token_mask(tokens)                  bool (batch, T): not ""
"""

from keras_elmo.process.keras_backend import require_tensorflow


def is_string_tensor(x):
    """True for a `tf.string` `tf.Tensor` or `tf.RaggedTensor` (False, importing nothing,
    for anything that is not a TensorFlow value)."""
    if not type(x).__module__.startswith("tensorflow"):
        return False
    return getattr(x, "dtype", None) is not None and x.dtype.name == "string"


def string_token_ids(tokens, options, lookup=None, with_words=False):
    """The ids of string tokens `(batch, num_tokens)`, padded with `""` or ragged.

    Args:
        tokens: tf.string `(batch, T)` (a numpy array of str too), or a ragged
            `(batch, (T))`.
        options: the model's `BiLMOptions`.
        lookup: a vocabulary model's `VocabularyLookup`; None for a byte model.
        with_words: return the word ids too (a word model).

    Returns:
        int32 char ids `(batch, T, max_characters_per_token)`, or with `with_words` the
        dict `{"char_ids": ..., "word_ids": (batch, T)}`.
    """
    require_tensorflow("string tokens")
    import tensorflow as tf

    from keras_elmo.text.string_char_ids import tf_padded_char_ids, tf_ragged_char_ids

    ragged = isinstance(tokens, tf.RaggedTensor)
    if not ragged:
        tokens = tf.convert_to_tensor(tokens)
        if tokens.shape.rank != 2:
            raise ValueError("String tokens must have shape (batch, num_tokens); received "
                             f"shape {tokens.shape}.")
    if tokens.dtype != tf.string:
        raise ValueError("A ragged input must hold tf.string tokens; received dtype "
                         f"{tokens.dtype.name}.")
    if lookup is not None:
        ids = lookup.ragged_ids(tokens) if ragged else lookup.padded_ids(tokens)
        return ids if with_words else ids["char_ids"]
    chars = options.max_characters_per_token
    return tf_ragged_char_ids(tokens, chars) if ragged else tf_padded_char_ids(tokens, chars)


def string_token_mask(tokens):
    """bool `(batch, T)`: True where a token is not `""` (ragged rows padded with False)."""
    require_tensorflow("string tokens")
    import tensorflow as tf

    if isinstance(tokens, tf.RaggedTensor):
        return tf.not_equal(tokens, "").to_tensor(default_value=False)
    return tf.not_equal(tf.convert_to_tensor(tokens), "")
