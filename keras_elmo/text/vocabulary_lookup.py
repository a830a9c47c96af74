"""`VocabularyLookup`: a vocabulary model's ids of string tokens, in the graph.

The TensorFlow twin of `keras_elmo.text.token_vocabulary` (the numpy path, which the tests
hold it to): the same cut to `max_characters_per_token - 2` code points before both
lookups, the same rows `[begin_word, c_1 .. c_n, end_word, padding ..]`, the same boundary
spelling of the literal `<bos>` / `<eos>` tokens, the same +1 shift. The vocabularies are
`tf.lookup.StaticHashTable`s, so a SavedModel holding a `VocabularyLookup` maps text to ids
with core TensorFlow alone (no tensorflow-text, nothing of ours).

Invalid UTF-8 is dropped inside its token (`errors="ignore"`), as the numpy path and byte
models drop it.

Example:
>>> lookup = VocabularyLookup(bilm.vocabulary)  # doctest: +SKIP
>>> ids = lookup.padded_ids(tf.constant([["北京", "欢迎", "你"], ["你", "", ""]]))
>>> ids["char_ids"].shape, ids["word_ids"].shape  # (2, 3, 50), (2, 3)
"""

import tensorflow as tf

from keras_elmo import constants


class VocabularyLookup:
    """Char ids (and word ids) of tf.string tokens for one `TokenVocabulary`.

    Args:
        vocabulary: `keras_elmo.TokenVocabulary`.

    Attributes:
        char_table, word_table: the `tf.lookup.StaticHashTable`s (word_table None without
            words). A `tf.Module` that holds them as attributes saves them in its SavedModel.
    """

    def __init__(self, vocabulary):
        self.vocabulary = vocabulary
        self.char_table = _table(vocabulary.chars, vocabulary.unknown_char)
        self.word_table = (_table(vocabulary.words, vocabulary.unknown_word)
                           if vocabulary.has_words else None)

    def token_ids(self, tokens):
        """Ids of tf.string tokens of any shape `(...)`, each encoded on its own (`""` as
        an empty word; the sentence converters below make it no token).

        Returns:
            dict: `"char_ids"` int32 `(..., max_characters_per_token)`, and with words
            `"word_ids"` int32 `(...)`, shifted by +1 as the model takes them.
        """
        v = self.vocabulary
        tokens = tf.convert_to_tensor(tokens)
        if tokens.dtype != tf.string:
            raise ValueError(f"tokens must be a tf.string tensor; received dtype "
                             f"{tokens.dtype.name}.")
        shape = tf.shape(tokens)
        flat = tf.reshape(tokens, [-1])  # (N,)
        body_len = v.max_characters_per_token - constants.NUM_WORD_MARKERS
        chars = tf.strings.unicode_split(flat, "UTF-8", errors="ignore")[:, :body_len]
        char_ids = tf.cast(self.char_table.lookup(chars), tf.int32)  # (N, (n))
        lengths = tf.cast(char_ids.row_lengths(), tf.int32)  # (N,)
        body = char_ids.to_tensor(default_value=v.padding_char,
                                  shape=[None, body_len])  # (N, body_len)
        is_bos = tf.equal(flat, v.begin_sentence_token)
        is_eos = tf.equal(flat, v.end_sentence_token)
        is_boundary = tf.logical_or(is_bos, is_eos)
        special = tf.where(is_bos, v.begin_sentence_char, v.end_sentence_char)  # (N,)
        first = tf.equal(tf.range(body_len), 0)  # (body_len,)
        boundary_body = tf.where(first, special[:, tf.newaxis], v.padding_char)
        body = tf.where(is_boundary[:, tf.newaxis], boundary_body, body)
        lengths = tf.where(is_boundary, 1, lengths)
        row = tf.concat([tf.fill([tf.shape(flat)[0], 1], v.begin_word_char), body,
                         tf.fill([tf.shape(flat)[0], 1], v.padding_char)],
                        axis=1)  # (N, C)
        at_end = tf.equal(tf.range(v.max_characters_per_token)[tf.newaxis],
                          lengths[:, tf.newaxis] + 1)  # (N, C)
        row = tf.where(at_end, v.end_word_char, row) + constants.CHAR_ID_SHIFT
        out_shape = tf.concat([shape, [v.max_characters_per_token]], axis=0)
        result = {"char_ids": tf.reshape(row, out_shape)}
        if self.word_table is not None:
            words = tf.strings.reduce_join(chars, axis=1)  # (N,) the cut token
            word_ids = tf.cast(self.word_table.lookup(words), tf.int32) + constants.WORD_ID_SHIFT
            result["word_ids"] = tf.reshape(word_ids, shape)
        return result

    def padded_ids(self, tokens):
        """Like `token_ids` for `(batch, max_len)` tokens padded with `""`: a `""` is no
        token, its ids are zeros."""
        ids = self.token_ids(tokens)
        real = tf.not_equal(tf.convert_to_tensor(tokens), "")
        return _zero_where_not(ids, real)

    def ragged_ids(self, tokens):
        """Ids of ragged tokens `(batch, (n))`, every value a token but `""` (no token,
        zeros), as dense tensors `(batch, max_len, ...)` with zeros past each row's end."""
        flat = tokens.flat_values
        ids = _zero_where_not(self.token_ids(flat), tf.not_equal(flat, ""))
        return {key: tokens.with_flat_values(value).to_tensor(default_value=0)
                for key, value in ids.items()}

    def masked_ids(self, tokens, real):
        """`token_ids` of `(batch, max_len)` tokens with zeros where `real` (bool, same
        shape) is False, and where a token is `""` (no token)."""
        real = tf.logical_and(real, tf.not_equal(tf.convert_to_tensor(tokens), ""))
        return _zero_where_not(self.token_ids(tokens), real)


def _zero_where_not(ids, real):
    chars = ids["char_ids"]
    result = {"char_ids": tf.where(real[..., tf.newaxis], chars, tf.zeros_like(chars))}
    if "word_ids" in ids:
        result["word_ids"] = tf.where(real, ids["word_ids"], tf.zeros_like(ids["word_ids"]))
    return result


def _table(token_ids, default):
    """A `StaticHashTable` string -> int64 id, `default` for a key it lacks."""
    keys = list(token_ids)
    values = [token_ids[k] for k in keys]
    initializer = tf.lookup.KeyValueTensorInitializer(
        tf.constant(keys, tf.string), tf.constant(values, tf.int64))
    return tf.lookup.StaticHashTable(initializer, default_value=default)
