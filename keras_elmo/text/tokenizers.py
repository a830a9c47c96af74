"""The tokenisers of keras-elmo, in one registry: what a line of text becomes as tokens.

    whitespace      pre-tokenised text: split on every Unicode space, as Python's `str.split()`
    unicode-script  raw text of scripts that separate words with spaces: split on spaces and
                    between scripts/punctuation (tensorflow-text `UnicodeScriptTokenizer`);
                    Han, Hiragana and Katakana have no word spaces, so each of their
                    characters is its own token (`keras_elmo.text.unicode_script`)
    jieba           raw Chinese: the jieba word segmenter (optional extra
                    `pip install keras-elmo[chinese]`)

`vocab`, `train`, `perplexity`, `embed` and `neighbors` all tokenise through `tokenize`, so a
model sees the same tokens in training and in use. The tokeniser a model was trained with is
`"tokenizer"` in its options.json (`model_tokenizer`), the default of every later command.
`whitespace` and `unicode-script` also run in-graph (the tf.data pipeline); jieba is Python,
so training segments a corpus once (`keras_elmo.training.segmented_corpus`) and feeds the
segmented text, tokens joined by single spaces, to the whitespace split.

This module imports no TensorFlow (the command line checks `--tokenizer` before TF loads):
`whitespace` and `jieba` tokenise in Python under every Keras backend; `unicode-script` runs
tensorflow-text's tokenizer, so it needs TensorFlow installed (`check_tokenizer` says so in
one line where it is not), and imports it when first used, as jieba is.

Example:
>>> tokenize(["我爱北京天安门。"], "jieba")  # doctest: +SKIP
[['我', '爱', '北京', '天安门', '。']]
>>> tokenize(["a\\u00a0b  c"], "whitespace")
[['a', 'b', 'c']]
"""

import json
import logging
import os

from keras_elmo.process.keras_backend import require_tensorflow

#: Every tokeniser name, the default first.
TOKENIZERS = ("whitespace", "unicode-script", "jieba")
DEFAULT_TOKENIZER = "whitespace"
#: Tokenisers the tf.data pipeline runs itself; the others are applied before it.
IN_GRAPH_TOKENIZERS = ("whitespace", "unicode-script")
#: Key of the tokeniser in a model's options.json (`keras_elmo.training.config`).
OPTIONS_KEY = "tokenizer"
#: How to install jieba, quoted by the error when it is missing.
JIEBA_INSTALL = "pip install keras-elmo[chinese]"


def check_tokenizer(name):
    """Returns `name` if it is a known tokeniser whose package is installed.

    Raises:
        ValueError: an unknown name, or jieba is not installed (one line, with the fix).
        MissingPackageError: `unicode-script` without TensorFlow and tensorflow-text
            installed (one line, with the fix).
    """
    if name not in TOKENIZERS:
        raise ValueError(f"tokenizer must be one of {', '.join(TOKENIZERS)}; received {name!r}.")
    if name == "jieba":
        _jieba()
    if name == "unicode-script":
        require_tensorflow("tokenizer 'unicode-script' (tensorflow-text)", text=True)
    return name


def is_in_graph(name):
    """True when the tf.data pipeline runs tokeniser `name` itself (no segmentation first)."""
    check_tokenizer(name)
    return name in IN_GRAPH_TOKENIZERS


def tokenize(lines, name):
    """Tokens of each line: list of str `(N,)` -> list of lists of str `(N, (n))`.

    Tokens never contain whitespace and are never empty; a blank line gives `[]`.

    Args:
        lines: list of str, one sentence each.
        name: one of `TOKENIZERS`.

    Example:
    >>> tokenize(["hello world", ""], "whitespace")
    [['hello', 'world'], []]
    """
    check_tokenizer(name)
    lines = list(lines)
    if name == "whitespace":
        return [line.split() for line in lines]
    if name == "jieba":
        jieba = _jieba()
        # jieba returns the spaces between words as tokens of their own: drop them.
        return [[token for piece in jieba.lcut(line) for token in piece.split()]
                for line in lines]
    if not lines:
        return []
    from keras_elmo.text.unicode_script import split_unicode_script

    ragged = split_unicode_script(lines)  # (N, (n)) tf.string
    return [[token.decode("utf-8") for token in row] for row in ragged.to_list()]


def segment(line, name):
    """One line as its tokens joined by single spaces (what the whitespace split reads back)."""
    return " ".join(tokenize([line], name)[0])


def model_tokenizer(model_dir):
    """The tokeniser of a model directory's options.json, or of an options file given by path
    (`"whitespace"` when it names none or there is none).

    A published model (bilm-tf options) has no `"tokenizer"`: its inputs are pre-tokenised.

    Raises:
        ValueError: options.json is not JSON or names an unknown tokeniser.
    """
    path = os.fspath(model_dir)
    if not os.path.isfile(path):
        path = os.path.join(path, "options.json")
    if not os.path.isfile(path):
        return DEFAULT_TOKENIZER
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (ValueError, UnicodeDecodeError) as error:
        raise ValueError(f"{path} is not valid JSON ({error}); expected a model's "
                         "options.json.") from None
    name = data.get(OPTIONS_KEY, DEFAULT_TOKENIZER) if isinstance(data, dict) else None
    if name not in TOKENIZERS:
        raise ValueError(f"{path} names tokenizer {name!r}; expected one of "
                         f"{', '.join(TOKENIZERS)}.")
    return name


def resolve_tokenizer(requested, model_dir=None):
    """`requested` if given, else the model directory's tokeniser, else `"whitespace"`;
    checked (jieba installed) before anything heavy loads."""
    if requested is None:
        requested = model_tokenizer(model_dir) if model_dir is not None else DEFAULT_TOKENIZER
    return check_tokenizer(requested)


def jieba_version():
    """The installed jieba's version (part of the segmentation cache key)."""
    return getattr(_jieba(), "__version__", "unknown")


def _jieba():
    """The jieba module, imported once and quiet (no dictionary-loading lines on stderr)."""
    try:
        import jieba
    except ImportError:
        raise ValueError("tokenizer 'jieba' needs the jieba package, which is not installed; "
                         f"install it with `{JIEBA_INSTALL}` (or `pip install jieba`)."
                         ) from None
    jieba.setLogLevel(logging.WARNING)
    return jieba
