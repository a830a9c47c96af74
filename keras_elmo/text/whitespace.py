"""In-graph whitespace tokenisation that splits exactly where Python's `str.split()` does.

Core TensorFlow only (`unicode_transcode`, `regex_replace`, `strings.split`), so a SavedModel
that contains it loads with TensorFlow alone. `tf.strings.split` on its own splits on ASCII
whitespace only: `'a\\u00a0b'` stays one token there while Python's `split()` gives two.
`split_whitespace` first maps every other character that Python's `str.isspace()` accepts
(`\\x1c`-`\\x1f`, `\\x85`, `\\xa0`, `\\u1680`, `\\u2000`-`\\u200a`, `\\u2028`, `\\u2029`,
`\\u202f`, `\\u205f`, `\\u3000`) to a space. Zero-width characters (`\\u200b`, `\\ufeff`,
`\\u180e`) are not whitespace in either, so they stay inside tokens.

Example:
>>> split_whitespace(tf.constant(["The  cat\\u00a0sat", ""])).to_list()
[[b'The', b'cat', b'sat'], []]
"""

import tensorflow as tf

#: Every code point above ASCII space (and the ASCII separators `\x1c`-`\x1f`) that Python's
#: `str.isspace()` accepts; `tf.strings.split` already handles `\t\n\v\f\r` and space.
PYTHON_EXTRA_WHITESPACE = (
    "\x1c", "\x1d", "\x1e", "\x1f", "\x85", "\xa0", "\u1680",
    *(chr(c) for c in range(0x2000, 0x200B)), "\u2028", "\u2029", "\u202f", "\u205f",
    "\u3000")

# RE2 character class of the above, written with \x{...} escapes.
_EXTRA_WHITESPACE_CLASS = "[" + "".join(f"\\x{{{ord(c):x}}}" for c in
                                        PYTHON_EXTRA_WHITESPACE) + "]"


def split_whitespace(text):
    """Splits sentences on whitespace, like `text.decode("utf-8", "ignore").split()`.

    Invalid UTF-8 is dropped first (as the char-id converters do), then every Unicode space
    becomes `" "` and the result is split; leading, trailing and repeated whitespace give no
    empty tokens, so `""` and `"  "` give zero tokens.

    Args:
        text: tf.string `(batch,)`, one untokenised sentence per entry.

    Returns:
        tf.string `tf.RaggedTensor` `(batch, (num_tokens))`.

    Example:
    >>> split_whitespace(tf.constant(["a\\u3000b c"])).to_list()
    [[b'a', b'b', b'c']]
    """
    text = tf.convert_to_tensor(text)
    if text.dtype != tf.string:
        raise ValueError(f"text must be a tf.string tensor; received dtype {text.dtype.name}.")
    clean = tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="ignore")
    spaced = tf.strings.regex_replace(clean, _EXTRA_WHITESPACE_CLASS, " ")
    return tf.strings.split(spaced)  # (batch, (num_tokens))
