"""`keras_elmo.text.whitespace.split_whitespace`: the in-graph split equals Python's `str.split()`."""

import tensorflow as tf

from keras_elmo.text.whitespace import PYTHON_EXTRA_WHITESPACE, split_whitespace


def _split(texts):
    return [[t.decode("utf-8") for t in row] for row in split_whitespace(
        tf.constant([t.encode("utf-8") if isinstance(t, str) else t for t in texts])).to_list()]


def test_every_basic_multilingual_plane_character_as_separator_matches_python():
    characters = [chr(c) for c in range(0x10000) if not 0xD800 <= c <= 0xDFFF]
    texts = [f"a{c}b" for c in characters]
    got = _split(texts)
    mismatches = [(hex(ord(c)), g) for c, g, t in zip(characters, got, texts) if g != t.split()]
    assert mismatches == []


def test_unicode_spaces_written_out():
    assert _split(["a\u00a0b", "a\u3000b", "a\u2003b", "a\x85b", "a\x1cb"]) == [["a", "b"]] * 5
    # Not whitespace in Python either: zero-width space, BOM, Mongolian vowel separator.
    assert _split(["a\u200bb", "a\ufeffb", "a\u180eb"]) == [["a\u200bb"], ["a\ufeffb"],
                                                           ["a\u180eb"]]
    assert set(PYTHON_EXTRA_WHITESPACE) == {chr(c) for c in range(0x10000)
                                            if chr(c).isspace() and not chr(c) in " \t\n\v\f\r"}


def test_empty_blank_and_repeated_whitespace_give_no_empty_tokens():
    assert _split(["", "   ", "\u3000\t\n", "  a  b  "]) == [[], [], [], ["a", "b"]]


def test_invalid_utf8_is_dropped_before_splitting():
    raw = b"a \xff b\xfe c \xc3"
    assert _split([raw]) == [raw.decode("utf-8", "ignore").split()] == [["a", "b", "c"]]
