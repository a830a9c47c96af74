"""Char ids of string tensors inside the TensorFlow graph: the ids of
`keras_elmo.text.characters`, computed from `tf.string` tokens.

Identical ids to `batch_to_ids` / `token_to_char_ids` (docs/model.md section 1), with core
TensorFlow string ops only, so a SavedModel that contains them loads without
tensorflow-text. String tensors are TensorFlow's: this module imports it, and only what
takes strings in a graph (`ElmoLayer`'s string inputs, the training pipeline, the export)
imports this module.

Example:
>>> tf_padded_char_ids(tf.constant([["a", ""]])).shape
TensorShape([1, 2, 50])
"""

import tensorflow as tf

from keras_elmo import constants
from keras_elmo.text.characters import check_max_characters


def tf_token_char_ids(tokens, max_characters_per_token=constants.MAX_CHARACTERS_PER_TOKEN):
    """In-graph char ids of string tokens: `(...)` tf.string -> `(..., max_chars)` int32.

    Core TensorFlow ops only. Works on dense tensors of any rank and on `tf.RaggedTensor`
    (ragged dims are kept). `""` gets its `[BOW, EOW]` row here; the sentence converters
    (`tf_padded_char_ids`, `tf_ragged_char_ids`) make it no token.
    """
    length = check_max_characters(max_characters_per_token)
    if isinstance(tokens, tf.RaggedTensor):
        return tokens.with_flat_values(tf_token_char_ids(tokens.flat_values, length))
    tokens = tf.convert_to_tensor(tokens)
    if tokens.dtype != tf.string:
        raise ValueError(f"tokens must be a tf.string tensor; received dtype {tokens.dtype.name}.")
    body_len = length - constants.NUM_WORD_MARKERS
    # Drop invalid UTF-8 (as Python's errors="ignore" does), then take the bytes.
    clean = tf.strings.unicode_transcode(tokens, "UTF-8", "UTF-8", errors="ignore")
    num_bytes = tf.minimum(tf.strings.length(clean, unit="BYTE"), body_len)  # (...)
    body = tf.io.decode_raw(clean, tf.uint8, fixed_length=body_len)  # (..., body_len)
    body = tf.cast(body, tf.int32)
    is_bos = tf.equal(tokens, constants.BOS_TOKEN)
    is_eos = tf.equal(tokens, constants.EOS_TOKEN)
    special = tf.where(is_bos, constants.BEGIN_SENTENCE_CHAR, constants.END_SENTENCE_CHAR)
    is_special = tf.logical_or(is_bos, is_eos)
    num_bytes = tf.where(is_special, 1, num_bytes)
    positions = tf.range(body_len)  # (body_len,)
    first = tf.equal(positions, 0)
    body = tf.where(is_special[..., tf.newaxis],
                    tf.where(first, special[..., tf.newaxis], constants.PADDING_CHAR),
                    body)
    in_word = positions < num_bytes[..., tf.newaxis]  # (..., body_len)
    at_end = tf.equal(positions, num_bytes[..., tf.newaxis])
    body = tf.where(in_word, body,
                    tf.where(at_end, constants.END_WORD_CHAR, constants.PADDING_CHAR))
    # An end-of-word marker that falls just past the body goes in the last slot.
    full = tf.equal(num_bytes, body_len)[..., tf.newaxis]  # (..., 1)
    last = tf.where(full, constants.END_WORD_CHAR, constants.PADDING_CHAR)
    bow = tf.fill(tf.shape(last), constants.BEGIN_WORD_CHAR)
    ids = tf.concat([bow, body, last], axis=-1)  # (..., length)
    return ids + constants.CHAR_ID_SHIFT


def tf_padded_char_ids(tokens, max_characters_per_token=constants.MAX_CHARACTERS_PER_TOKEN):
    """Like `tf_token_char_ids`, but `""` is padding: its row is all zeros (no token).

    Args:
        tokens: tf.string `(batch, max_len)`, padded with `""`.

    Returns:
        int32 `(batch, max_len, max_characters_per_token)`.
    """
    ids = tf_token_char_ids(tokens, max_characters_per_token)
    is_token = tf.not_equal(tf.convert_to_tensor(tokens), "")[..., tf.newaxis]
    return tf.where(is_token, ids, tf.zeros_like(ids))


def tf_ragged_char_ids(tokens, max_characters_per_token=constants.MAX_CHARACTERS_PER_TOKEN):
    """Ragged tokens `(batch, (n_tokens))` -> dense int32 `(batch, max_len, max_chars)`.

    Every ragged value is a token but `""`, which is no token (an all-zero row at its
    position); rows are padded with zeros.
    """
    ids = tf_token_char_ids(tokens, max_characters_per_token)  # (batch, (n), length)
    is_token = tf.not_equal(tokens, "")[..., tf.newaxis]  # (batch, (n), 1)
    ids = tf.ragged.map_flat_values(lambda i, t: tf.where(t, i, tf.zeros_like(i)), ids,
                                    is_token)
    return ids.to_tensor(default_value=0)
