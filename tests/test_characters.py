"""Char ids (docs/model.md section 1): Python, in-graph TF and the numpy reference agree.

Expected id lists are also written out by hand for a few tokens.
"""

import numpy as np
import pytest
import tensorflow as tf

import numpy_reference as ref
from keras_elmo.text.characters import batch_to_ids, token_to_char_ids
from keras_elmo.text.string_char_ids import tf_padded_char_ids, tf_token_char_ids

MAX = 50
# Shifted special ids: BOW 259, EOW 260, pad 261, BOS 257, EOS 258.
BOW, EOW, PAD, BOS, EOS = 259, 260, 261, 257, 258


def _word(*body, max_chars=MAX):
    ids = [BOW] + [b + 1 for b in body] + [EOW]
    return ids + [PAD] * (max_chars - len(ids))


# (token, expected shifted ids), written by hand from the spec.
HAND_WRITTEN = [
    ("a", _word(0x61)),
    ("Hi", _word(0x48, 0x69)),
    ("", [BOW, EOW] + [PAD] * 48),
    ("<S>", [BOW, BOS, EOW] + [PAD] * 47),
    ("</S>", [BOW, EOS, EOW] + [PAD] * 47),
    ("<s>", _word(0x3C, 0x73, 0x3E)),  # not the boundary token: plain bytes
    ("é", _word(0xC3, 0xA9)),
    ("中", _word(0xE4, 0xB8, 0xAD)),
    ("😀", _word(0xF0, 0x9F, 0x98, 0x80)),
    ("x" * 60, [BOW] + [0x78 + 1] * 48 + [EOW]),
    # 1 + 17 * 3 = 52 bytes, cut to 48: "a", 15 whole "中", then 2 of the 16th's 3 bytes.
    ("a" + "中" * 17, [BOW, 0x62] + [0xE5, 0xB9, 0xAE] * 15 + [0xE5, 0xB9, EOW]),
    ("a\ud800b", _word(0x61, 0x62)),  # lone surrogate dropped
    ("\udfff", [BOW, EOW] + [PAD] * 48),
]

# Valid-UTF-8 tokens that the in-graph path must treat exactly as the Python path.
TF_TOKENS = ["a", "Hi", "", "<S>", "</S>", "<s>", "é", "中", "😀", "x" * 60, "a" + "中" * 17,
             "naïve", "Ünïcödé", "日本語のテキスト", "🎉👍🏽", "é" * 30, "ab" + "😀" * 20, "S", "/S"]


@pytest.mark.parametrize("token,expected", HAND_WRITTEN)
def test_hand_written_ids(token, expected):
    assert len(expected) == MAX
    assert ref.token_char_ids(token) == expected
    assert list(token_to_char_ids(token)) == expected


@pytest.mark.parametrize("token", TF_TOKENS)
def test_bytes_input_same_as_str(token):
    assert list(token_to_char_ids(token.encode("utf-8"))) == ref.token_char_ids(token)


def test_tf_token_char_ids_matches_reference():
    expected = np.array([ref.token_char_ids(t) for t in TF_TOKENS], np.int32)
    got = tf_token_char_ids(tf.constant(TF_TOKENS))
    assert got.dtype == tf.int32
    np.testing.assert_array_equal(got.numpy(), expected)


def test_tf_token_char_ids_any_rank():
    tokens = np.array(TF_TOKENS[:12], dtype=object).reshape(2, 3, 2)
    got = tf_token_char_ids(tf.constant(tokens.tolist())).numpy()
    assert got.shape == (2, 3, 2, MAX)
    expected = np.array([ref.token_char_ids(t) for t in TF_TOKENS[:12]]).reshape(2, 3, 2, MAX)
    np.testing.assert_array_equal(got, expected)
    scalar = tf_token_char_ids(tf.constant("中")).numpy()
    np.testing.assert_array_equal(scalar, ref.token_char_ids("中"))


def test_tf_padded_char_ids_zero_for_empty():
    tokens = [["The", "中", "😀", ""], ["<S>", "", "", ""]]
    got = tf_padded_char_ids(tf.constant(tokens)).numpy()
    assert got.shape == (2, 4, MAX)
    for b, row in enumerate(tokens):
        for k, token in enumerate(row):
            expected = np.zeros(MAX, np.int32) if token == "" else ref.token_char_ids(token)
            np.testing.assert_array_equal(got[b, k], expected, err_msg=repr(token))


def test_batch_to_ids_matches_reference():
    sentences = [["The", "cat", "sat", "."], ["我", "爱", "😀"], [], ["<S>", "x" * 300, "a\ud800b"]]
    got = batch_to_ids(sentences)
    assert got.dtype == np.int32
    assert got.shape == (4, 4, MAX)
    np.testing.assert_array_equal(got, ref.batch_char_ids(sentences))
    assert not got[1, 3].any() and not got[2].any()  # rows past a sentence's end all zero


def test_three_paths_agree():
    sentences = [["Ünïcödé", "中文", "🎉👍🏽", "a" + "中" * 17], ["<S>", "</S>", "é" * 30]]
    python_ids = batch_to_ids(sentences)
    padded = [s + [""] * (4 - len(s)) for s in sentences]
    tf_ids = tf_padded_char_ids(tf.constant(padded)).numpy()
    np.testing.assert_array_equal(python_ids, ref.batch_char_ids(sentences))
    np.testing.assert_array_equal(tf_ids, python_ids)


@pytest.mark.parametrize("max_chars", [5, 10])
def test_other_max_characters_per_token(max_chars):
    tokens = ["a", "abcdefghijkl", "中文字", "<S>", "</S>", "😀😀"]
    expected = np.array([ref.token_char_ids(t, max_chars) for t in tokens], np.int32)
    python = np.array([token_to_char_ids(t, max_characters_per_token=max_chars) for t in tokens])
    np.testing.assert_array_equal(python, expected)
    graph = tf_token_char_ids(tf.constant(tokens), max_characters_per_token=max_chars).numpy()
    np.testing.assert_array_equal(graph, expected)
    batch = batch_to_ids([tokens], max_characters_per_token=max_chars)
    np.testing.assert_array_equal(batch[0], expected)
    assert ref.token_char_ids("abcdefghijkl", 5) == [BOW, 98, 99, 100, EOW]


def test_invalid_utf8_bytes_dropped_before_cut():
    """Invalid code points (here invalid UTF-8 bytes) are dropped, then the cut applies."""
    surrogate = "a\ud800b".encode("utf-8", "surrogatepass")  # b"a\xed\xa0\x80b"
    garbage_first = b"\xff" * 10 + b"a" * 50
    expected = [_word(0x61, 0x62), [BOW] + [0x62] * 48 + [EOW]]
    for token, want in zip([surrogate, garbage_first], expected):
        assert ref.token_char_ids(token) == want
        assert list(token_to_char_ids(token)) == want
    graph = tf_token_char_ids(tf.constant([surrogate, garbage_first])).numpy()
    np.testing.assert_array_equal(graph, np.array(expected))


def test_batch_to_ids_of_repeated_tokens_is_exact_and_fresh():
    """Remembered rows of frequent tokens: same ids as the first time, and a caller that
    edits the returned array never changes the next batch."""
    first = batch_to_ids([["the", "cat"], ["the"]])
    assert first[0, 0].tolist() == first[1, 0].tolist() == [259, 117, 105, 102, 260] + [261] * 45
    first[0, 0] = 0
    again = batch_to_ids([["the"]], 8)
    assert again[0, 0].tolist() == [259, 117, 105, 102, 260, 261, 261, 261]
    assert batch_to_ids([["the"]])[0, 0, :5].tolist() == [259, 117, 105, 102, 260]
