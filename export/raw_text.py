"""In-graph whitespace split of raw sentences that keeps every token, valid UTF-8 or not.

`split_raw_text(text)` splits each sentence where Python's
`text.decode("utf-8", "surrogateescape").split()` does, and returns each token's own bytes:
an invalid UTF-8 byte is never whitespace, so it stays inside its token (and a token of
invalid bytes only is still a token). The char-id conversion then drops those bytes inside
the token (docs/model.md section 1), so `b"\\xff"` between spaces is the empty word
`[BOW, EOW]`: one vector per token, whatever the bytes.

Whitespace is every code point Python's `str.isspace()` accepts (ASCII `\\t\\n\\v\\f\\r`,
space, `\\x1c`-`\\x1f`, `U+0085`, `U+00A0`, `U+1680`, `U+2000`-`U+200A`, `U+2028`, `U+2029`,
`U+202F`, `U+205F`, `U+3000`). Core TensorFlow ops only (`unicode_decode_with_offsets`,
`substr`), so a SavedModel containing it loads with TensorFlow alone.

Example:
>>> split_raw_text(tf.constant([b"ab\\xff \\xfe c", b""])).to_list()
[[b'ab\\xff', b'\\xfe', b'c'], []]
"""

import tensorflow as tf

#: Code points of Python's whitespace (`str.isspace()`); none lies above U+3000.
WHITESPACE_CODE_POINTS = tuple(c for c in range(0x3001) if chr(c).isspace())
#: What an invalid byte sequence decodes to while looking for whitespace (never a space).
_REPLACEMENT = 0xFFFD


def split_raw_text(text):
    """Whitespace tokens of raw sentences, each token its original bytes.

    Example:
    >>> split_raw_text(tf.constant([" a  b ", "", b"caf\\xe9 ok"])).to_list()
    [[b'a', b'b'], [], [b'caf\\xe9', b'ok']]

    Args:
        text: tf.string `(batch,)`, one untokenised sentence per entry (any bytes).

    Returns:
        tf.string `tf.RaggedTensor` `(batch, (num_tokens))`; `""` and all-space entries
        give zero tokens.
    """
    text = tf.convert_to_tensor(text)
    if text.dtype != tf.string:
        raise ValueError(f"text must be a tf.string tensor; received dtype {text.dtype.name}.")
    code_points, starts = tf.strings.unicode_decode_with_offsets(
        text, "UTF-8", errors="replace", replacement_char=_REPLACEMENT)  # (batch, (chars))
    rows = code_points.value_rowids()  # (chars,) the sentence of each character
    starts = starts.flat_values  # (chars,) first byte of each character
    row_splits = code_points.row_splits  # (batch + 1,)
    position = tf.range(tf.size(rows, out_type=tf.int64), dtype=tf.int64)  # (chars,)
    first = tf.equal(position, tf.gather(row_splits, rows))  # (chars,)
    last = tf.equal(position + 1, tf.gather(row_splits, rows + 1))  # (chars,)
    space = tf.reduce_any(tf.equal(code_points.flat_values[:, tf.newaxis],
                                   tf.constant(WHITESPACE_CODE_POINTS, tf.int32)),
                          axis=1)  # (chars,)
    before = tf.concat([[True], space[:-1]], axis=0)  # (chars,) previous one is a space
    after = tf.concat([space[1:], [True]], axis=0)  # (chars,) next one is a space
    begins = tf.logical_and(~space, tf.logical_or(first, before))  # (chars,)
    ends = tf.logical_and(~space, tf.logical_or(last, after))  # (chars,)
    text_bytes = tf.strings.length(text, unit="BYTE")  # (batch,)
    next_start = tf.concat([starts[1:], [0]], axis=0)  # (chars,)
    stops = tf.where(last, tf.cast(tf.gather(text_bytes, rows), tf.int64), next_start)
    token_rows = tf.boolean_mask(rows, begins)  # (tokens,)
    token_starts = tf.boolean_mask(starts, begins)  # (tokens,)
    token_stops = tf.boolean_mask(stops, ends)  # (tokens,) in the same order
    tokens = tf.strings.substr(tf.gather(text, token_rows), token_starts,
                               token_stops - token_starts, unit="BYTE")  # (tokens,)
    return tf.RaggedTensor.from_value_rowids(tokens, token_rows,
                                             nrows=tf.shape(text, out_type=tf.int64)[0])
