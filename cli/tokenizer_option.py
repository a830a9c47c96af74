"""`--tokenizer` of the subcommands that read text: one flag, one way to find its default.

`vocab` has no model: its default is `whitespace`. `train` keeps the flag in its config
flags (saved in options.json). `perplexity`, `embed` and `neighbors` default to the tokeniser
MODEL_DIR was trained with (`"tokenizer"` in its options.json), so a model trained on raw
Chinese with `--tokenizer jieba` reads raw Chinese in every later command. A bad name, a
missing jieba or, for `unicode-script`, a missing TensorFlow is one line on stderr before TF
loads; `unicode-script` tokenises with tensorflow-text, so once it is chosen TensorFlow is
imported here (quietly, `keras_elmo.cli.tensorflow_start`), whatever Keras' backend.

Example:
    add_tokenizer_argument(parser, from_model=True)
    ...
    tokenizer = resolve_tokenizer(args, args.model_dir)
"""

from keras_elmo.cli.tensorflow_start import import_tensorflow
from keras_elmo.text.tokenizers import TOKENIZERS, resolve_tokenizer as _resolve

#: What each tokeniser is for, in `--help`.
TOKENIZER_HELP = ("whitespace: text already tokenised, tokens separated by spaces; "
                  "unicode-script: raw text of languages that put spaces between words, split "
                  "by script and punctuation (Chinese/Japanese characters one per token); "
                  "jieba: raw Chinese, segmented into words by jieba "
                  "(pip install keras-elmo[chinese])")


def add_tokenizer_argument(parser, from_model=True):
    """Adds `--tokenizer NAME` to `parser`; its default is resolved by `resolve_tokenizer`."""
    default = ("the tokenizer MODEL_DIR was trained with (its options.json), else whitespace"
               if from_model else "whitespace")
    parser.add_argument("--tokenizer", choices=TOKENIZERS, default=None,
                        help=f"how lines become tokens (default: {default}). {TOKENIZER_HELP}")


def resolve_tokenizer(args, model_dir=None):
    """`args.tokenizer`, else MODEL_DIR's, else `whitespace`; checked (jieba, or TensorFlow
    for `unicode-script`, installed)."""
    tokenizer = _resolve(getattr(args, "tokenizer", None), model_dir)
    if tokenizer == "unicode-script":  # runs TensorFlow ops
        import_tensorflow()
    return tokenizer
