"""A model directory: `options.json` + `weights.hdf5` (published layout), maybe `vocab.txt`.

`keras-elmo train` writes all three; a published ELMo model has the first two.

Example:
>>> bilm = load_bilm("runs/people_daily_small")  # doctest: +SKIP
>>> cache = load_token_cache(bilm, "runs/people_daily_small/vocab.txt")  # doctest: +SKIP
"""

from keras_elmo.weight_file import OPTIONS_FILE, WEIGHTS_FILE, find_published  # noqa: F401

VOCAB_FILE = "vocab.txt"


def model_files(model_dir):
    """`(options_file, weight_file)` of a model directory (see `find_published`)."""
    return find_published(model_dir)


def load_bilm(model_dir):
    """A stateless `keras_elmo.BiLM` with the weights of `model_dir`."""
    from keras_elmo import BiLM

    options_file, weight_file = model_files(model_dir)
    return BiLM.from_weights(options_file, weight_file)


def load_token_cache(bilm, vocab_file, batch_size=None):
    """A `TokenEmbeddingCache` over the tokens of a one-token-per-line file."""
    from keras_elmo.token_cache import DEFAULT_BATCH_SIZE, TokenEmbeddingCache, read_vocab_file

    return TokenEmbeddingCache(bilm, read_vocab_file(vocab_file),
                               batch_size=batch_size or DEFAULT_BATCH_SIZE)
