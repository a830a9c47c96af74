"""In-graph tokenisation of raw text by script, with one token per Han/kana character.

tensorflow-text's `UnicodeScriptTokenizer` splits on whitespace and where the Unicode script
changes ("Hello," -> "Hello", ","). That suits scripts that separate words with spaces. Han
(Chinese characters, Japanese kanji), Hiragana and Katakana do not, so the tokenizer alone
would return a whole clause ("我爱北京天安门") as one token. `split_unicode_script` first puts a
space on both sides of every character of those scripts, so each is its own token: a
character-level model of Chinese/Japanese, which needs no segmenter. For word tokens of
Chinese use the `jieba` tokeniser (`keras_elmo.text.tokenizers`).

Needs tensorflow-text (imported here; keep it out of a SavedModel that must load with
TensorFlow alone: `tf.saved_model.load` of a graph holding a tensorflow-text op needs
`import tensorflow_text` first).

Example:
>>> split_unicode_script(["我爱北京。Hello, world!"]).to_list()  # doctest: +SKIP
[[b'\\xe6\\x88\\x91', b'\\xe7\\x88\\xb1', b'\\xe5\\x8c\\x97', b'\\xe4\\xba\\xac', b'\\xe3\\x80\\x82',
  b'Hello', b',', b'world', b'!']]
"""

import tensorflow as tf
import tensorflow_text

#: RE2 class of the scripts written without spaces between words, one token per character.
UNSPACED_SCRIPTS = r"[\p{Han}\p{Hiragana}\p{Katakana}]"


def split_unicode_script(lines):
    """Splits raw text into tokens by script; Han, Hiragana and Katakana per character.

    Invalid UTF-8 is dropped first (as the char-id converters do).

    Args:
        lines: tf.string `(N,)` (or a list of str), one sentence each.

    Returns:
        tf.string `tf.RaggedTensor` `(N, (n))`.
    """
    lines = tf.convert_to_tensor(lines, tf.string)
    clean = tf.strings.unicode_transcode(lines, "UTF-8", "UTF-8", errors="ignore")
    spaced = tf.strings.regex_replace(clean, UNSPACED_SCRIPTS, r" \0 ")
    tokenizer = tensorflow_text.UnicodeScriptTokenizer(keep_whitespace=False)
    return tokenizer.tokenize(spaced)  # (N, (n))
